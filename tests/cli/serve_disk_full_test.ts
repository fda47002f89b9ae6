// A full disk, through the real path: `serve` on a small tmpfs the test
// mounts (tests run as root), filled by --stdin, by publishers (POST and the
// publish socket) and by an --upstream. The stream stops taking rows (507
// disk_full, a publish frame's disk_full, stdin unread, the upstream
// disconnected), /_/health stays 200 and lists it degraded, subscribers keep
// every committed row; once the test frees space (deletes its filler file)
// the stream takes rows again by itself, and `verify` passes.
import { join } from "node:path";
import { assert, assertEquals } from "../harness/assert.ts";
import { CLI, getJson, type ServeProc, startServe } from "../harness/serve.ts";
import { TestSub } from "../harness/subscriber.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import { SmallDisk } from "../harness/small_disk.ts";
import { type Publisher, publisher, type PublishError } from "../../client/publisher.ts";

const SCHEMA = {
  type: "object",
  properties: { n: { type: "integer" }, pad: { type: "string" } },
  required: ["n", "pad"],
};
const PAD = "x".repeat(400);
const row = (n: number) => JSON.stringify({ n, pad: PAD });

/** A tmpfs of `mib` MiB at DIR/disk, with a log root and a schema; unmounted by `close`. */
async function smallDisk(mib: number) {
  const dir = await tempDir("streamcast-disk-");
  const disk = await SmallDisk.mount(join(dir, "disk"), mib);
  const schema = join(dir, "t.json");
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  return {
    dir,
    root: join(disk.path, "data"),
    schema,
    /** Fills the disk with a file until `leaveBytes` are left free (roughly). */
    fill: (leaveBytes: number) => disk.fill(leaveBytes),
    free: () => disk.free(),
    async close(): Promise<void> {
      await disk.close();
      await rmrf(dir);
    },
  };
}

type Disk = Awaited<ReturnType<typeof smallDisk>>;

async function health(s: ServeProc): Promise<Record<string, unknown>> {
  const res = await fetch(`${s.url}/_/health`);
  assertEquals(res.status, 200);
  return await res.json();
}

async function degraded(s: ServeProc): Promise<boolean> {
  return (await health(s)).degraded !== undefined;
}

async function takesRowsMetric(s: ServeProc): Promise<string | undefined> {
  const text = await (await fetch(`${s.url}/_/metrics`)).text();
  return /^streamcast_stream_takes_rows\{stream="t"\} (\d)$/m.exec(text)?.[1];
}

/** Every row of stream t from offset 1, by a subscriber (replay then live). */
async function allRows(s: ServeProc, end: number): Promise<number[]> {
  const sub = await TestSub.open(`${s.ws}/t?offset=1&frames=batch`);
  try {
    await sub.waitLines(end - 1, 30_000);
    return sub.lines.map((l) => JSON.parse(l)[1].n);
  } finally {
    await sub.close();
  }
}

async function verify(d: Disk): Promise<void> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "verify", join(d.root, "t")],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert(out.success, said);
}

Deno.test("serve --stdin on a full disk stops reading and resumes by itself, no line lost", async () => {
  const d = await smallDisk(24);
  let s: ServeProc | null = null;
  try {
    s = await startServe([
      "--stream",
      `t=${d.schema}`,
      "--stdin",
      "t",
      "--root",
      d.root,
      "--port",
      "0",
      "--min-free-bytes",
      "0",
      // Segments are sealed and chunked while the disk fills: the chunk worker meets it too.
      "--seal-every",
      "0.2",
    ], { stdin: true });
    const live = await TestSub.open(`${s.ws}/t`);
    await d.fill(1 << 20);
    // Twice what is left: the disk fills, the server stops reading, this writer blocks.
    const total = 4000;
    const server = s;
    const writing = (async () => {
      for (let n = 1; n <= total; n += 100) {
        const lines = [];
        for (let k = n; k < n + 100 && k <= total; k++) lines.push(row(k));
        await server.write(lines.join("\n") + "\n");
      }
    })();
    await until(() => degraded(server), 30_000, "health degraded");
    assertEquals((await health(s)).degraded, [{ stream: "t", why: "disk_full" }]);
    assertEquals(await takesRowsMetric(s), "0");
    await s.waitStderr(/takes no rows: its disk is full/);
    // Reads go on: what was committed is there.
    const head = await getJson(`${s.url}/t/head`);
    const held = (head.end_offset as number) - 1;
    assert(held > 0 && held < total, `held ${held}`);
    assertEquals(s.stderr().includes("shutting down"), false);
    await d.free();
    await writing;
    await s.closeStdin();
    await s.waitStderr(/end of stdin for stream "t" \(4000 rows accepted, 0 rejected\)/, 30_000);
    assertEquals(await degraded(s), false);
    assertEquals(await takesRowsMetric(s), "1");
    const rows = await allRows(s, total + 1);
    assertEquals(rows, Array.from({ length: total }, (_, i) => i + 1));
    // The live subscriber saw every committed row, in order, none twice.
    await live.waitLines(total);
    assertEquals(live.lines.map((l) => JSON.parse(l)[1].n), rows);
    await live.close();
    const status = await s.signal("SIGTERM");
    assertEquals(status.code, 0, s.stderr());
    s = null;
    await verify(d);
  } finally {
    await s?.stop();
    await d.close();
  }
});

Deno.test("serve under --min-free-bytes answers publishers disk_full, then takes rows again", async () => {
  const d = await smallDisk(24);
  let s: ServeProc | null = null;
  try {
    s = await startServe([
      "--stream",
      `t=${d.schema}`,
      "--publish",
      "t",
      "--root",
      d.root,
      "--port",
      "0",
      "--min-free-bytes",
      "8MiB",
    ]);
    const post = (n: number) => fetch(`${s!.url}/t`, { method: "POST", body: row(n) + "\n" });
    const first = await post(1);
    assertEquals(first.status, 200, await first.text());
    await d.fill(4 << 20); // under the 8 MiB kept free
    // Looked at before a commit, at most once a second.
    let refused: Response | null = null;
    for (let n = 2; refused === null; n++) {
      const res = await post(n);
      if (res.status === 507) refused = res;
      else assertEquals(res.status, 200, await res.text());
      await new Promise((r) => setTimeout(r, 50));
    }
    assertEquals(refused.headers.get("retry-after"), "1");
    const body = await refused.json();
    assertEquals(body.error, "disk_full");
    assert(/kept free/.test(body.detail), body.detail);
    const end = (await getJson(`${s.url}/t/head`)).end_offset as number;
    // A publish socket's frame: disk_full, nothing of it stored.
    const ws = new WebSocket(`${s.ws}/t/publish?producer=p1`);
    const answers: Record<string, unknown>[] = [];
    ws.onmessage = (e) => answers.push(JSON.parse(e.data));
    await until(() => answers.length === 1, 10_000, "publish greeting");
    ws.send(JSON.stringify({ seq: 1, rows: [{ n: 0, pad: "" }] }));
    await until(() => answers.length === 2, 10_000, "publish answer");
    assertEquals(answers[1].seq, 1);
    assertEquals(answers[1].error, "disk_full");
    assertEquals((await getJson(`${s.url}/t/head`)).end_offset, end);
    assertEquals((await health(s)).degraded, [{ stream: "t", why: "disk_full" }]);
    await d.free();
    await until(async () => !(await degraded(s!)), 10_000, "health not degraded");
    ws.send(JSON.stringify({ seq: 1, rows: [{ n: 0, pad: "" }] }));
    await until(() => answers.length === 3, 10_000, "publish answer after");
    assertEquals(answers[2].first, end);
    ws.close();
    const again = await post(-1);
    assertEquals(again.status, 200, await again.text());
    const status = await s.signal("SIGTERM");
    assertEquals(status.code, 0, s.stderr());
    s = null;
    await verify(d);
  } finally {
    await s?.stop();
    await d.close();
  }
});

Deno.test("serve --upstream on a full disk disconnects, reconnects once the disk has room, says what it missed", async () => {
  const d = await smallDisk(24);
  let s: ServeProc | null = null;
  // The upstream: a WebSocket server sending numbered rows as fast as the socket takes them.
  const connections: number[] = [];
  let sent = 0;
  const upstream = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, (req) => {
    const { socket, response } = Deno.upgradeWebSocket(req);
    connections.push(Date.now());
    let timer: ReturnType<typeof setInterval> | undefined;
    socket.onopen = () => {
      timer = setInterval(() => {
        if (socket.readyState !== WebSocket.OPEN) return;
        for (let k = 0; k < 50; k++) socket.send(row(++sent));
      }, 5);
    };
    socket.onclose = () => clearInterval(timer);
    socket.onerror = () => {};
    return response;
  });
  try {
    s = await startServe([
      "--stream",
      `t=${d.schema}`,
      "--upstream",
      `t=ws://127.0.0.1:${upstream.addr.port}/`,
      "--root",
      d.root,
      "--port",
      "0",
      "--min-free-bytes",
      "0",
    ]);
    const server = s;
    await until(() => connections.length === 1, 10_000, "upstream connected");
    await d.fill(1 << 20);
    await until(() => degraded(server), 30_000, "health degraded");
    await s.waitStderr(/disconnecting until it does/, 10_000);
    const stuck = (await getJson(`${s.url}/t/head`)).end_offset as number;
    assertEquals(connections.length, 1);
    await d.free();
    await s.waitStderr(
      /takes rows again; reconnecting\. Missed the feed from \S+ to \S+ \(\d+ rows/,
      15_000,
    );
    await until(() => connections.length === 2, 10_000, "upstream reconnected");
    await until(
      async () => ((await getJson(`${server.url}/t/head`)).end_offset as number) > stuck + 100,
      10_000,
      "rows after the reconnect",
    );
    // What is stored is in the upstream's order, none twice.
    const end = (await getJson(`${s.url}/t/head`)).end_offset as number;
    const rows = await allRows(s, end);
    for (let i = 1; i < rows.length; i++) assert(rows[i] > rows[i - 1], `row ${i}: ${rows[i]}`);
    const status = await s.signal("SIGTERM");
    assertEquals(status.code, 0, s.stderr());
    s = null;
    await verify(d);
  } finally {
    await s?.stop();
    await upstream.shutdown();
    await d.close();
  }
});

Deno.test("serve: a producer's frames pipelined behind a disk_full refusal are refused too, leaving no hole", async () => {
  const d = await smallDisk(24);
  let s: ServeProc | null = null;
  try {
    s = await startServe([
      "--stream",
      `t=${d.schema}`,
      "--publish",
      "t",
      "--root",
      d.root,
      "--port",
      "0",
      "--min-free-bytes",
      "8MiB",
    ]);
    const server = s;
    const post = (n: number) => fetch(`${server.url}/t`, { method: "POST", body: row(n) + "\n" });
    const ws = new WebSocket(`${s.ws}/t/publish?producer=p`);
    const answers: Record<string, unknown>[] = [];
    ws.onmessage = (e) => answers.push(JSON.parse(e.data));
    await until(() => answers.length === 1, 10_000, "publish greeting");
    const frame = (seq: number) =>
      ws.send(JSON.stringify({ seq, rows: [{ n: 1000 + seq, pad: "" }] }));
    frame(1);
    await until(() => answers.length === 2, 10_000, "seq 1 answered");
    assertEquals(answers[1].first, 1);
    // The disk fills: the stream stops taking rows.
    await d.fill(4 << 20);
    for (let n = 1;; n++) {
      const res = await post(n);
      await res.body?.cancel();
      if (res.status === 507) break;
      assertEquals(res.status, 200);
      await new Promise((r) => setTimeout(r, 50));
    }
    frame(2);
    await until(() => answers.length === 3, 10_000, "seq 2 answered");
    assertEquals([answers[2].seq, answers[2].error], [2, "disk_full"]);
    // Space is back; the frames the producer had pipelined behind seq 2 come after.
    await d.free();
    await until(async () => !(await degraded(server)), 10_000, "health not degraded");
    frame(3);
    frame(4);
    await until(() => answers.length === 5, 10_000, "seqs 3 and 4 answered");
    for (const [i, seq] of [[3, 3], [4, 4]]) {
      assertEquals([answers[i].seq, answers[i].error], [seq, "write_failed"]);
      assert(
        /send again from seq 2/.test(answers[i].detail as string),
        answers[i].detail as string,
      );
    }
    const end = (await getJson(`${s.url}/t/head`)).end_offset as number;
    // Sent again from the refused seq: stored in order.
    frame(2);
    frame(3);
    frame(4);
    await until(() => answers.length === 8, 10_000, "seqs 2 to 4 answered again");
    assertEquals(answers.slice(5).map((a) => [a.seq, a.first]), [[2, end], [3, end + 1], [
      4,
      end + 2,
    ]]);
    ws.close();
    const ns = (await allRows(s, end + 3)).filter((n) => n > 1000);
    assertEquals(ns, [1001, 1002, 1003, 1004]);
    const status = await s.signal("SIGTERM");
    assertEquals(status.code, 0, s.stderr());
    s = null;
    await verify(d);
  } finally {
    await s?.stop();
    await d.close();
  }
});

async function diskFullRefusals(s: ServeProc): Promise<number> {
  const text = await (await fetch(`${s.url}/_/metrics`)).text();
  const m = /^streamcast_publish_refusals_total\{([^}]*)\} (\d+)$/gm;
  let n = 0;
  for (const [, labels, v] of text.matchAll(m)) {
    if (labels.includes('reason="disk_full"') && labels.includes('stream="t"')) n += Number(v);
  }
  return n;
}

Deno.test("publisher(): a full disk holds its frames with backoff, then every row is stored once, in order", async () => {
  const d = await smallDisk(24);
  let s: ServeProc | null = null;
  let pub: Publisher | null = null;
  try {
    s = await startServe([
      "--stream",
      `t=${d.schema}`,
      "--publish",
      "t",
      "--root",
      d.root,
      "--port",
      "0",
      "--min-free-bytes",
      "8MiB",
    ]);
    const server = s;
    pub = await publisher(`${s.ws}/t`, { producer: "p" });
    assertEquals(await pub.send({ n: 1000, pad: "" }), 1);
    // The disk fills: the stream stops taking rows.
    await d.fill(4 << 20);
    for (let n = 1;; n++) {
      const res = await fetch(`${server.url}/t`, { method: "POST", body: row(n) + "\n" });
      await res.body?.cancel();
      if (res.status === 507) break;
      assertEquals(res.status, 200);
      await new Promise((r) => setTimeout(r, 50));
    }
    const before = await diskFullRefusals(s);
    // A caller sending a row every millisecond or so for 2 s while the disk is full.
    const sends: Promise<number>[] = [];
    const settled: string[] = [];
    const started = Date.now();
    for (let n = 1001; Date.now() - started < 2000; n++) {
      const sent = pub.send({ n, pad: "" });
      sent.catch((err) => settled.push(`row ${n}: ${err}`));
      sends.push(sent);
      await new Promise((r) => setTimeout(r, 1));
    }
    const refusals = (await diskFullRefusals(s)) - before;
    console.log(`rows sent while full: ${sends.length}; disk_full refusals: ${refusals}`);
    assert(refusals >= 1, "the server refused the publisher while its disk was full");
    assert(refusals < 100, `${refusals} disk_full refusals for ${sends.length} rows in 2 s`);
    // Held, not refused to the caller.
    assertEquals(settled, []);
    // A publisher told to wait a full disk out for 300 ms at most: its send rejects
    // disk_full then, and its next frame takes the refused seq again.
    const short = await publisher(`${s.ws}/t`, { producer: "q", diskFullTimeoutMs: 300 });
    try {
      const err = await short.send({ n: 1, pad: "" }).then(() => null, (e) => e as PublishError);
      assertEquals([err?.error, err?.seq], ["disk_full", 1]);
      assertEquals(short.nextSeq, 1);
    } finally {
      await short.close();
    }
    // Space is back: every row is stored, once, in the order sent.
    await d.free();
    const offsets = await Promise.all(sends);
    for (let i = 1; i < offsets.length; i++) assertEquals(offsets[i], offsets[i - 1] + 1);
    const ns = (await allRows(s, offsets[offsets.length - 1] + 1)).filter((n) => n >= 1000);
    assertEquals(ns, Array.from({ length: sends.length + 1 }, (_, i) => 1000 + i));
    await pub.close();
    pub = null;
    const status = await s.signal("SIGTERM");
    assertEquals(status.code, 0, s.stderr());
    s = null;
    await verify(d);
  } finally {
    await pub?.close();
    await s?.stop();
    await d.close();
  }
});
