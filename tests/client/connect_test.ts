import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import {
  connect,
  ConnectionClosed,
  MemoryCursor,
  NotReplayable,
  ProtocolError,
  StreamNotFound,
  type Subscription,
  TooSlow,
} from "../../client/mod.ts";
import { fixture, line, row, type TradeRow } from "../harness/client_server.ts";

/** Reads `n` rows with next() (not a for-await loop, which would close on break). */
async function read<T>(sub: Subscription<T>, n: number): Promise<[number | null, T][]> {
  const out: [number | null, T][] = [];
  while (out.length < n) {
    const r = await sub.next();
    if (r.done) throw new Error(`subscription ended after ${out.length} of ${n} rows`);
    out.push(r.value);
  }
  return out;
}

Deno.test("connect gets the greeting, then replay and live rows contiguously", async () => {
  const f = await fixture();
  try {
    await f.send(1, 50);
    const sub = await connect<TradeRow>(f.url, { offset: 1 });
    const g = sub.greeting;
    assertEquals(g.streamcast, 2);
    assertEquals(g.stream, "trades");
    assertEquals(g.stream_id, f.stream.streamId);
    assertEquals(g.end_offset, 51);
    assertEquals(g.replay, [1, 51]);
    assertEquals(g.durable, true);
    assertEquals(g.frames, "batch");
    assertEquals(sub.streamId, f.stream.streamId);
    const replayed = await read(sub, 50);
    // Live rows in several commits while the subscriber reads.
    const publishing = (async () => {
      for (let i = 51; i <= 150; i += 10) {
        await f.send(i, i + 9);
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const live = await read(sub, 100);
    await publishing;
    const all = [...replayed, ...live];
    assertEquals(all.map(([o]) => o), Array.from({ length: 150 }, (_, k) => k + 1));
    for (const [o, msg] of all) assertEquals(msg, row(o!));
    assertEquals(sub.lastOffset, 150);
    // Row 150 is yielded but not handled until the loop asks for the next one.
    assertEquals(sub.position, 150);
    await sub.commit();
    assertEquals(sub.position, 151);
    await sub.close();
    assertEquals((await sub.next()).done, true, "a closed subscription ends");
  } finally {
    await f.stop();
  }
});

Deno.test("connect without an offset starts live at the greeting's end_offset", async () => {
  const f = await fixture();
  try {
    await f.send(1, 10);
    const sub = await connect(f.url);
    assertEquals(sub.greeting.replay, null);
    assertEquals(sub.greeting.end_offset, 11);
    await f.send(11, 12);
    assertEquals((await read(sub, 2)).map(([o]) => o), [11, 12]);
    await sub.close();
    // "earliest" reads from the first row kept; 0 means the first offset.
    for (const offset of ["earliest", 0] as const) {
      const s = await connect(f.url, { offset });
      assertEquals(s.greeting.replay, [1, 13]);
      assertEquals((await read(s, 1))[0][0], 1);
      await s.close();
    }
  } finally {
    await f.stop();
  }
});

Deno.test("connect asks for batched frames and splits them transparently", async () => {
  const f = await fixture();
  const urls: string[] = [];
  const frames: string[] = [];
  class Recording extends WebSocket {
    constructor(url: string | URL) {
      super(url);
      urls.push(String(url));
      this.addEventListener("message", (e) => frames.push(e.data));
    }
  }
  try {
    for (let i = 1; i <= 2000; i += 500) await f.send(i, i + 499);
    // Text frames, to look at them (compressed ones: tests/client/compress_test.ts).
    const sub = await connect(f.url, { offset: 1, WebSocket: Recording, compress: false });
    assert(new URL(urls[0]).searchParams.get("frames") === "batch", urls[0]);
    const rows = await read(sub, 2000);
    assertEquals(rows.map(([o]) => o), Array.from({ length: 2000 }, (_, k) => k + 1));
    const data = frames.slice(1);
    const lines = data.flatMap((d) => d.split("\n"));
    assertEquals(lines.length, 2000);
    assert(data.length < 2000 && data.some((d) => d.includes("\n")), `${data.length} frames`);
    await sub.close();
    // lines() gives the text exactly as received.
    const raw = await connect(f.url, { offset: 1998 });
    const it = raw.lines();
    const got: [number | null, string][] = [];
    for (let i = 0; i < 3; i++) got.push((await it.next()).value!);
    assertEquals(got, [[1998, line(1998)], [1999, line(1999)], [2000, line(2000)]]);
    await it.return!();
  } finally {
    await f.stop();
  }
});

Deno.test("connect rejects each refusal the server makes with its typed error and next step", async () => {
  const f = await fixture({ maxReplay: 5 });
  const eph = await fixture({ ephemeral: true });
  try {
    await f.send(1, 10);
    // Sealed into chunks, so that the server refuses too_old (a client can
    // read them over HTTP instead).
    await f.stream.log!.roll();
    await f.stream.log!.chunks.settled();
    const ahead = await assertRejects(() => connect(f.url, { offset: 12 }), NotReplayable);
    assertEquals([ahead.why, ahead.offset, ahead.endOffset, ahead.code], ["ahead", 12, 11, 4416]);
    assert(
      ahead.message.includes("offset 12") && ahead.message.includes("end is 11"),
      ahead.message,
    );
    assert(ahead.message.includes("subscribe at 11"), ahead.message);

    const old = await assertRejects(() => connect(f.url, { offset: 2 }), NotReplayable);
    assertEquals([old.why, old.offset, old.rows, old.maxReplay, old.endOffset], [
      "too_old",
      2,
      9,
      5,
      11,
    ]);
    for (const s of ["9 rows", "max_replay of 5", "about offset 6", "--max-replay"]) {
      assert(old.message.includes(s), `${s} in ${old.message}`);
    }

    const other = "0".repeat(32);
    const cursor = new MemoryCursor({ offset: 10, streamId: other });
    const os = await assertRejects(() => connect(f.url, { cursor }), NotReplayable);
    assertEquals(os.why, "other_stream");
    assert(
      os.message.includes(other) && os.message.includes("delete the saved cursor"),
      os.message,
    );

    const nd = await assertRejects(() => connect(eph.url, { offset: 1 }), NotReplayable);
    assertEquals([nd.why, nd.offset], ["not_durable", 1]);
    assert(nd.message.includes("ephemeral") && nd.message.includes("Subscribe live"), nd.message);

    const nf = await assertRejects(
      () => connect(`ws://127.0.0.1:${f.port}/nope`),
      StreamNotFound,
    );
    assertEquals([nf.stream, nf.code], ["nope", 4404]);
    assert(nf.message.includes("/_/streams"), nf.message);

    const pe = await assertRejects(() => connect(`${f.url}?ofset=3`), ProtocolError);
    assertEquals([pe.code, pe.detail], [4400, "unknown parameter ofset"]);
    assert(pe.message.includes("unknown parameter ofset"), pe.message);

    // None of the refusals left a subscriber behind, and the stream still serves.
    assertEquals(f.stream.subscribers, 0);
    const ok = await connect(f.url, { offset: 8 });
    assertEquals((await read(ok, 3)).map(([o]) => o), [8, 9, 10]);
    await ok.close();
  } finally {
    await eph.stop();
    await f.stop();
  }
});

Deno.test("connect rejects options and URLs it cannot honour before opening a socket", async () => {
  await assertRejects(() => connect("ws://127.0.0.1:1/t", { offset: -1 }), RangeError, "offset");
  await assertRejects(
    () => connect("ws://127.0.0.1:1/t?offset=5"),
    TypeError,
    "pass the offset as the offset option",
  );
  await assertRejects(() => connect("ftp://127.0.0.1/t"), TypeError, "ws://");
  await assertRejects(
    () => connect("ws://127.0.0.1:1/t", { backoff: { minMs: 10, maxMs: 5 } }),
    RangeError,
    "backoff.maxMs",
  );
});

Deno.test("connect to a port with no server rejects with ConnectionClosed 1006", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  const err = await assertRejects(() => connect(`ws://127.0.0.1:${port}/t`), ConnectionClosed);
  assertEquals(err.code, 1006);
  assert(err.reconnectable);
  assert(err.message.includes(`127.0.0.1:${port}`), err.message);
});

Deno.test("a subscription without reconnect ends with ConnectionClosed 1001 at shutdown", async () => {
  const f = await fixture();
  let stopped = false;
  try {
    await f.send(1, 3);
    const sub = await connect(f.url, { offset: 1 });
    await read(sub, 3);
    await f.server.shutdown();
    stopped = true;
    const err = await assertRejects(() => sub.next(), ConnectionClosed);
    assertEquals(err.code, 1001);
    assertEquals(err.resume, 4);
    assert(err.message.includes("shutting down") && err.message.includes("offset 4"), err.message);
    assertEquals((await sub.next()).done, true);
  } finally {
    if (!stopped) await f.server.shutdown();
    await f.stop();
  }
});

Deno.test("aborting the signal ends a waiting loop with the signal's reason", async () => {
  const f = await fixture();
  try {
    const ac = new AbortController();
    const sub = await connect(f.url, { signal: ac.signal });
    const pending = sub.next();
    setTimeout(() => ac.abort(new Error("stop now")), 20);
    await assertRejects(() => pending, Error, "stop now");
    assertEquals(f.stream.subscribers, 0);
    // An already-aborted signal rejects connect at once.
    await assertRejects(() => connect(f.url, { signal: ac.signal }), Error, "stop now");
  } finally {
    await f.stop();
  }
});

Deno.test("a subscription refuses a second next() while one is pending", async () => {
  const f = await fixture();
  try {
    const sub = await connect(f.url);
    const first = sub.next();
    await assertRejects(() => sub.next(), TypeError, "pending");
    await f.send(1, 1);
    assertEquals((await first).value?.[0], 1);
    await sub.close();
  } finally {
    await f.stop();
  }
});

// A fake server for what a real one never sends: it answers each path with a
// scripted greeting, frames and close.
function fakeServer(script: (path: string, ws: WebSocket) => void) {
  const ac = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    (req) => {
      const { socket, response } = Deno.upgradeWebSocket(req);
      socket.onopen = () => script(new URL(req.url).pathname, socket);
      socket.onerror = () => {};
      return response;
    },
  );
  return {
    url: `ws://127.0.0.1:${server.addr.port}`,
    async stop() {
      ac.abort();
      await server.finished;
    },
  };
}

const GREETING = {
  streamcast: 2,
  stream: "x",
  stream_id: "ab".repeat(16),
  end_offset: 20,
  replay: [10, 20],
  log: { name: "x", archive: null },
  durable: true,
  schema: {},
  frames: "batch",
};

Deno.test("the close code decides the error class even when the reason is not JSON", async () => {
  const fake = fakeServer((path, ws) => ws.close(Number(path.slice(2)), "not json at all"));
  try {
    const cases: [number, new (...a: never[]) => Error][] = [
      [4400, ProtocolError],
      [4404, StreamNotFound],
      [4416, NotReplayable],
      [4429, TooSlow],
      [1001, ConnectionClosed],
      [1011, ConnectionClosed],
    ];
    for (const [code, Class] of cases) {
      const err = await assertRejects(() => connect(`${fake.url}/c${code}`, { offset: 5 }), Class);
      assertEquals((err as unknown as { code: number }).code, code);
      if (err instanceof NotReplayable) {
        assertEquals([err.why, err.offset], [null, 5]);
        assert(err.message.includes("offset 5"), err.message);
      }
    }
  } finally {
    await fake.stop();
  }
});

Deno.test("a subscription throws ProtocolError on offsets out of order and malformed frames", async () => {
  const fake = fakeServer((path, ws) => {
    if (path === "/v1") {
      ws.send(JSON.stringify({ ...GREETING, streamcast: 1 }));
      return;
    }
    if (path === "/binary") {
      ws.send(JSON.stringify(GREETING));
      ws.send(new Uint8Array([1, 2, 3]));
      return;
    }
    ws.send(JSON.stringify(GREETING));
    const frames: Record<string, string> = {
      "/repeat": '[10,{"a":1}]\n[11,{"a":2}]\n[11,{"a":3}]',
      "/below": '[9,{"a":1}]',
      "/malformed": '[10,{"a":1}]\n[11,{"a":',
      "/null": '[null,{"a":1}]',
    };
    ws.send(frames[path]);
  });
  try {
    await assertRejects(() => connect(`${fake.url}/v1`), ProtocolError, "protocol 1");
    const cases: [string, number, string][] = [
      ["/repeat", 2, "offset 11 came after 11"],
      ["/below", 0, "offset 9 is below 10"],
      ["/malformed", 1, "not [offset,msg]"],
      ["/null", 0, "without an offset"],
      ["/binary", 0, "binary frame"],
    ];
    for (const [path, good, msg] of cases) {
      const sub = await connect(`${fake.url}${path}`);
      for (let i = 0; i < good; i++) assertEquals((await sub.next()).done, false);
      const err = await assertRejects(() => sub.next(), ProtocolError, msg);
      assertEquals(err.code, null);
      assertEquals((await sub.next()).done, true);
    }
  } finally {
    await fake.stop();
  }
});

Deno.test("the client runs with Deno's globals removed, as in a browser", async () => {
  const f = await fixture();
  try {
    await f.send(1, 5);
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_browserlike.ts", import.meta.url).pathname, f.url, "3"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const dec = new TextDecoder();
    assertEquals(out.code, 0, dec.decode(out.stderr));
    const rows = dec.decode(out.stdout).trim().split("\n").map((l) => JSON.parse(l));
    assertEquals(rows, [1, 2, 3].map((o) => [o, row(o)]));
  } finally {
    await f.stop();
  }
});

Deno.test("the client modules import nothing runtime-specific (the browser path)", async () => {
  // Every module client/mod.ts loads, except the Deno file cursor (not exported there).
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL("../../client/mod.ts", import.meta.url).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert(out.success, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout));
  const specifiers: string[] = info.modules.map((m: { specifier: string }) => m.specifier);
  assert(specifiers.length >= 6, specifiers.join(" "));
  for (const spec of specifiers) {
    assert(!spec.startsWith("node:"), `client/mod.ts loads ${spec}, a Deno/Node built-in`);
    // npm packages are checked by the bundler that targets the browser, not here.
    if (!spec.startsWith("file://")) continue;
    // client/ may import common/ and wire/ (tests/layout_test.ts), nothing else of the project.
    const root = new URL("../../", import.meta.url).href;
    assert(
      ["client/", "common/", "wire/"].some((dir) => spec.startsWith(`${root}${dir}`)),
      `${spec} is outside client/, common/ and wire/`,
    );
    assert(!spec.endsWith("file_cursor.ts"), "client/mod.ts must not load the Deno file cursor");
    const text = await Deno.readTextFile(new URL(spec));
    const code = text.replace(/^\s*(\/\/|\*).*$/gm, "");
    assert(!/\bDeno\./.test(code), `${spec} uses Deno.*`);
    assert(!/from\s+["']node:/.test(code), `${spec} imports a Node built-in`);
  }
});
