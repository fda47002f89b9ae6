// compress=zstd-stream (docs/SPEC.md §2.6.1) through a real
// server and real sockets: each subscriber's messages, decoded in order, give
// exactly the batched frames' text; the members of a group get the very same
// bytes; a joiner gets self-contained frames until its group's next frame
// starts; each filter has its own stream; a stalled subscriber catches up; a
// new frame starts after --compress-frame-bytes of text (the CLI's flag).
import { assert, assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { RawWs } from "../../harness/raw_ws.ts";
import { zstdCli } from "../../harness/zstd_cli.ts";
import { startsZstdFrame, ZstdStreamDecoder } from "../../../client/_zstd_stream.ts";
import { zstdDecompressSync } from "node:zlib";
import { startServe } from "../../harness/serve.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, side: { type: "string" }, s: { type: "string" } },
  required: ["i", "side", "s"],
};
const row = (i: number) => ({ i, side: i % 3 === 0 ? "buy" : "sell", s: `row ${i} é` });
const line = (i: number) => `[${i},${JSON.stringify(row(i))}]`;
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, k) => a + k);
const whole = (b: Uint8Array, max: number) => zstdDecompressSync(b, { maxOutputLength: max });

/** A subscriber keeping every data message as it came. */
class Sub {
  readonly ws: WebSocket;
  greeting: Record<string, unknown> | null = null;
  readonly messages: Uint8Array[] = [];
  closed: { code: number; reason: string } | null = null;
  constructor(url: string) {
    this.ws = new WebSocket(url);
    this.ws.binaryType = "arraybuffer";
    this.ws.onerror = () => {};
    this.ws.onclose = (e) => (this.closed = { code: e.code, reason: e.reason });
    this.ws.onmessage = (e) => {
      if (this.greeting === null) this.greeting = JSON.parse(e.data);
      else {
        assert(e.data instanceof ArrayBuffer, "compress=zstd-stream data messages are binary");
        this.messages.push(new Uint8Array(e.data));
      }
    };
  }
  static async open(url: string): Promise<Sub> {
    const s = new Sub(url);
    await until(() => s.greeting !== null || s.closed !== null, 10_000, `greeting ${url}`);
    return s;
  }
  async close(): Promise<void> {
    if (this.closed) return;
    this.ws.close();
    await until(() => this.closed !== null, 5_000, "close");
  }
}

/** The text of each message, decoded in order by the client's decoder. */
function decodeAll(messages: Uint8Array[]): string[] {
  const d = new ZstdStreamDecoder({ whole });
  return messages.map((m) => d.decode(m));
}

/** Whether a message is one whole zstd frame (a self-contained frame). */
function selfContained(m: Uint8Array): boolean {
  if (!startsZstdFrame(m)) return false;
  try {
    zstdDecompressSync(m);
    return true;
  } catch {
    return false;
  }
}

/** The frames of a member's messages (each from a message with the magic), decoded by `zstd -d`. */
async function framesByZstdCli(messages: Uint8Array[]): Promise<string[]> {
  const frames: Uint8Array[][] = [];
  for (const m of messages) {
    if (startsZstdFrame(m)) frames.push([m]);
    else frames.at(-1)!.push(m);
  }
  const out: string[] = [];
  for (const parts of frames) {
    const n = parts.reduce((k, p) => k + p.length, 0);
    const bytes = new Uint8Array(n);
    let at = 0;
    for (const p of parts) {
      bytes.set(p, at);
      at += p.length;
    }
    out.push(await zstdCli(bytes));
  }
  return out;
}

async function metric(port: number, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/_/metrics`)).text();
  const m = text.split("\n").find((l) => l.startsWith(`${name}{`) && l.includes(labels));
  return m ? Number(m.split(" ").at(-1)) : 0;
}

async function openServer(options: { maxBacklog?: number; compressFrameBytes?: number } = {}) {
  const root = await tempDir();
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root,
    maxReplay: null,
    ...(options.maxBacklog ? { maxBacklog: options.maxBacklog } : {}),
  });
  const server = serve([stream], {
    port: 0,
    onListen: () => {},
    ...(options.compressFrameBytes ? { compressFrameBytes: options.compressFrameBytes } : {}),
  });
  const url = `ws://127.0.0.1:${server.addr.port}/t`;
  const done = async () => {
    await server.shutdown();
    await rmrf(root);
  };
  return { stream, server, port: server.addr.port, url, done };
}

Deno.test("compress=zstd-stream: members of a group get identical bytes that decode to the batched text, one compression per commit", async () => {
  const { stream, port, url, done } = await openServer();
  try {
    const subs = await Promise.all(
      range(0, 3).map(() => Sub.open(`${url}?frames=batch&compress=zstd-stream`)),
    );
    assertEquals(subs[0].greeting!.compress, "zstd-stream");
    assertEquals(subs[0].greeting!.dictionary, undefined);
    const commits = [[1], [2], [3, 4, 5], [6], [7, 8]];
    for (const c of commits) await stream.sendMany(c.map(row));
    await until(() => subs.every((s) => s.messages.length === commits.length), 10_000, "messages");
    const texts = commits.map((c) => c.map(line).join("\n"));
    for (const s of subs) {
      assertEquals(decodeAll(s.messages), texts, "each message is its commit's batched text");
      assertEquals(s.messages.map((m) => [...m]), subs[0].messages.map((m) => [...m]));
    }
    assert(startsZstdFrame(subs[0].messages[0]), "the group's first commit starts a frame");
    assert(subs[0].messages.slice(1).every((m) => !startsZstdFrame(m)), "the others continue it");
    assertEquals(
      await metric(port, "streamcast_zstd_frames_total", 'path="live"'),
      commits.length,
      "one compression per commit for the whole group",
    );
    await Promise.all(subs.map((s) => s.close()));
  } finally {
    await done();
  }
});

Deno.test("compress=zstd-stream: a late joiner gets self-contained frames, then the group's shared bytes from its next frame", async () => {
  const frameBytes = 4096;
  const { stream, url, done } = await openServer({ compressFrameBytes: frameBytes });
  try {
    const first = await Sub.open(`${url}?frames=batch&compress=zstd-stream`);
    for (const i of range(1, 4)) await stream.send(row(i));
    await until(() => first.messages.length === 3, 10_000, "first's messages");
    const late = await Sub.open(`${url}?frames=batch&compress=zstd-stream`);
    assertEquals(late.greeting!.compress, "zstd-stream");
    // A joiner waiting ends the open frame once it has carried 1/16 of the
    // frame size (256 bytes here: a few rows), so the switch comes soon.
    for (const i of range(4, 40)) await stream.send(row(i));
    await until(() => first.messages.length === 39 && late.messages.length === 36, 10_000, "all");
    assertEquals(decodeAll(first.messages), range(1, 40).map(line));
    assertEquals(decodeAll(late.messages), range(4, 40).map(line));
    // The joiner's first messages are whole frames; from the group's next
    // frame on, its bytes are the first member's (late's i-th message and
    // first's (3 + i)-th stand for the same commit).
    const same = (i: number) => {
      const a = late.messages[i];
      const b = first.messages[3 + i];
      return a.length === b.length && a.every((x, k) => x === b[k]);
    };
    const j = late.messages.findIndex((_, i) => same(i));
    assert(j > 0, `the joiner starts with self-contained frames, then shares (${j})`);
    for (let i = 0; i < j; i++) {
      assert(selfContained(late.messages[i]), `message ${i} stands alone`);
    }
    assert(startsZstdFrame(late.messages[j]), "the first shared message starts the group's frame");
    for (let i = j; i < late.messages.length; i++) assert(same(i), `message ${i} is shared`);
    await Promise.all([first.close(), late.close()]);
  } finally {
    await done();
  }
});

Deno.test("compress=zstd-stream: each where= filter is its own group with its own stream", async () => {
  const { stream, port, url, done } = await openServer();
  try {
    const buy = encodeURIComponent('{"side":"buy"}');
    const sell = encodeURIComponent('{"side":"sell"}');
    const q = "frames=batch&compress=zstd-stream";
    const buys = await Promise.all([0, 1].map(() => Sub.open(`${url}?${q}&where=${buy}`)));
    const sells = await Sub.open(`${url}?${q}&where=${sell}`);
    const all = await Sub.open(`${url}?${q}`);
    const commits = [[1, 2, 3], [4], [5, 6], [7, 8, 9]];
    for (const c of commits) await stream.sendMany(c.map(row));
    const picks = (f: (i: number) => boolean) =>
      commits.map((c) => c.filter(f)).filter((c) => c.length > 0);
    const buyCommits = picks((i) => row(i).side === "buy");
    const sellCommits = picks((i) => row(i).side === "sell");
    await until(
      () =>
        buys.every((s) => s.messages.length === buyCommits.length) &&
        sells.messages.length === sellCommits.length && all.messages.length === commits.length,
      10_000,
      "messages",
    );
    const texts = (cs: number[][]) => cs.map((c) => c.map(line).join("\n"));
    for (const s of buys) assertEquals(decodeAll(s.messages), texts(buyCommits));
    assertEquals(decodeAll(sells.messages), texts(sellCommits));
    assertEquals(decodeAll(all.messages), texts(commits));
    assertEquals(buys[1].messages.map((m) => [...m]), buys[0].messages.map((m) => [...m]));
    for (const s of [buys[0], sells, all]) assert(startsZstdFrame(s.messages[0]));
    // One compression per commit per group that the commit has rows for.
    assertEquals(
      await metric(port, "streamcast_zstd_frames_total", 'path="live"'),
      buyCommits.length + sellCommits.length + commits.length,
    );
    await Promise.all([...buys, sells, all].map((s) => s.close()));
  } finally {
    await done();
  }
});

Deno.test("compress=zstd-stream: replay sends self-contained frames, then live messages continue in order", async () => {
  const { stream, url, done } = await openServer();
  try {
    await stream.sendMany(range(1, 201).map(row));
    const sub = await Sub.open(`${url}?frames=batch&compress=zstd-stream&offset=1`);
    await until(() => decodeAll(sub.messages).join("\n").split("\n").length === 200, 10_000);
    assert(sub.messages.every(selfContained), "replay frames stand alone");
    for (const i of range(201, 211)) await stream.send(row(i));
    await until(() => sub.messages.length >= 10 && decodeAll(sub.messages).at(-1) === line(210));
    assertEquals(decodeAll(sub.messages).join("\n"), range(1, 211).map(line).join("\n"));
    await sub.close();
  } finally {
    await done();
  }
});

Deno.test("compress=zstd-stream: a stalled subscriber goes back to the log and catches up, then rejoins the stream", async () => {
  const { stream, port, done } = await openServer({ maxBacklog: 64 });
  let seed = 11;
  const noise = () => {
    let t = "";
    for (let k = 0; k < 4000; k++) {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      t += String.fromCharCode(48 + (seed >>> 26));
    }
    return t;
  };
  const rows = range(1, 3001).map((i) => ({ i, side: "buy", s: noise() }));
  const lineOf = (r: { i: number }) => `[${r.i},${JSON.stringify(r)}]`;
  try {
    const member = new Sub(`ws://127.0.0.1:${port}/t?frames=batch&compress=zstd-stream`);
    await until(() => member.greeting !== null);
    const raw = await RawWs.connect(port, "/t?frames=batch&compress=zstd-stream");
    const greeting = await raw.readMessage();
    assertEquals(JSON.parse(new TextDecoder().decode(greeting!.data)).compress, "zstd-stream");
    // Not reading: the server's socket fills, its queue passes maxBacklog and
    // it goes back to the log; the member reading along stays in the stream.
    for (let k = 0; k < rows.length; k += 20) await stream.sendMany(rows.slice(k, k + 20));
    await until(
      async () => await metric(port, "streamcast_drops_total", 'reason="to_catch_up"') > 0,
      20_000,
      "the stalled subscriber sent back to the log",
    );
    const decoder = new ZstdStreamDecoder({ whole });
    const got: string[] = [];
    let kinds = "";
    const readUntil = async (n: number) => {
      while (got.length < n) {
        const m = await raw.readMessage();
        assert(m !== null && m.opcode === 2, "a binary message");
        kinds += selfContained(m.data) ? "s" : startsZstdFrame(m.data) ? "F" : "c";
        got.push(...decoder.decode(m.data).split("\n"));
      }
    };
    await readUntil(rows.length);
    assertEquals(got, rows.map(lineOf), "every row once, in order, across live, replay and live");
    // Back live: it rejoins the group's stream at its next frame.
    const more = range(3001, 3041).map((i) => ({ i, side: "buy", s: `x${i}` }));
    for (const r of more) await stream.send(r);
    await readUntil(rows.length + more.length);
    assertEquals(got.slice(rows.length), more.map(lineOf));
    assert(kinds.includes("s"), `it was sent self-contained frames (${kinds.slice(-80)})`);
    assert(kinds.endsWith("c"), `it is back in the shared stream (${kinds.slice(-80)})`);
    await until(() =>
      member.messages.length > 0 && decodeAll(member.messages).at(-1) === lineOf(more.at(-1)!)
    );
    assertEquals(
      decodeAll(member.messages).join("\n"),
      [...rows, ...more].map(lineOf).join("\n"),
      "the member that kept reading got everything from the shared stream",
    );
    raw.close();
    await member.close();
  } finally {
    await done();
  }
});

Deno.test("compress=zstd-stream needs frames=batch: refused with 4400 naming compress", async () => {
  const { url, done } = await openServer();
  try {
    for (
      const [query, detail] of [
        ["compress=zstd-stream", "compress=zstd-stream needs frames=batch, got frames=single"],
        [
          "compress=zstd-stream&frames=arrow",
          "compress=zstd-stream needs frames=batch, got frames=arrow",
        ],
      ]
    ) {
      const s = new Sub(`${url}?${query}`);
      await until(() => s.closed !== null, 10_000, query);
      assertEquals(s.closed!.code, 4400);
      assertEquals(JSON.parse(s.closed!.reason), { error: "protocol", detail });
    }
  } finally {
    await done();
  }
});

Deno.test("compress=zstd-stream: serve --compress-frame-bytes starts a new frame once a frame carried that much text", async () => {
  const dir = await tempDir();
  const schema = `${dir}/schema.json`;
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  const frameBytes = 4096;
  const proc = await startServe([
    "--root",
    `${dir}/data`,
    "--stream",
    `t=${schema}`,
    "--stdin",
    "t",
    "--port",
    "0",
    "--compress-frame-bytes",
    String(frameBytes),
  ], { stdin: true });
  try {
    const sub = await Sub.open(`${proc.ws}/t?frames=batch&compress=zstd-stream`);
    const n = 400;
    const rowsIn = () => decodeAll(sub.messages).join("\n").split("\n").length;
    for (let i = 1; i <= n; i += 20) {
      // 20 rows at a time, each batch in before the next: commits of about 1 KiB.
      await proc.write(range(i, i + 20).map((k) => JSON.stringify(row(k)) + "\n").join(""));
      await until(() => sub.messages.length > 0 && rowsIn() === i + 19, 20_000, `row ${i + 19}`);
    }
    const texts = decodeAll(sub.messages);
    assertEquals(texts.join("\n"), range(1, n + 1).map(line).join("\n"));
    // Frames: the messages from one with the magic number to the next.
    const frames: number[][] = [];
    sub.messages.forEach((m, i) => startsZstdFrame(m) ? frames.push([i]) : frames.at(-1)!.push(i));
    assert(frames.length >= 3, `${frames.length} frames for ${n} rows`);
    const size = (i: number) => new TextEncoder().encode(texts[i]).length;
    const done = frames.slice(0, -1);
    for (const f of done) {
      const before = f.slice(0, -1).reduce((k, i) => k + size(i), 0);
      assert(before < frameBytes, `a frame ends at the commit that reaches ${frameBytes}`);
      assert(before + size(f.at(-1)!) >= frameBytes, "and not before");
    }
    // Each finished frame is an ordinary zstd frame for `zstd -d`.
    const byCli = await framesByZstdCli(sub.messages.slice(0, frames.at(-1)![0]));
    assertEquals(byCli, done.map((f) => f.map((i) => texts[i]).join("")));
    await sub.close();
  } finally {
    await proc.stop();
    await rmrf(dir);
  }
});
