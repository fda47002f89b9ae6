import assert from "node:assert/strict";
import { relative as relativePath } from "node:path";
import { setImmediate } from "node:timers";
import { RowError } from "../../../server/stream/row_error.ts";
import {
  type IngestEvent,
  ingestLines,
  type IngestSink,
  ingestUpstream,
  loadHandler,
  rejectFile,
  type RejectRecord,
} from "../../../server/ingest/mod.ts";

const encoder = new TextEncoder();

/**
 * A sink like a stream with group commit: validates synchronously (an object
 * with a numeric `x`), assigns offsets in call order, and settles every call
 * of one turn together on a later macrotask, as a commit would.
 */
class TestSink implements IngestSink {
  readonly name: string;
  readonly rows: unknown[] = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Calls (valid or not) whose promise rejects with a non-RowError. */
  failAtCall = 0;
  calls = 0;
  #settle: (() => void)[] = [];
  #waiters: { count: number; resolve(): void }[] = [];

  constructor(name = "trades") {
    this.name = name;
  }

  send(row: unknown): Promise<number | null> {
    this.calls++;
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    let outcome: { offset: number } | { error: Error };
    if (this.calls === this.failAtCall) {
      outcome = { error: new Error("disk full (simulated)") };
    } else if (
      typeof row !== "object" || row === null || Array.isArray(row) ||
      typeof (row as { x?: unknown }).x !== "number"
    ) {
      outcome = { error: new RowError(this.name, "/x: must be number") };
    } else {
      outcome = { offset: this.rows.push(row) };
    }
    return new Promise((resolve, reject) => {
      this.#settle.push(() => {
        this.inFlight--;
        if ("error" in outcome) reject(outcome.error);
        else resolve(outcome.offset);
      });
      if (this.#settle.length === 1) setImmediate(() => this.#commit());
    });
  }

  /** Resolves once `count` rows are stored. */
  stored(count: number): Promise<void> {
    if (this.rows.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ count, resolve }));
  }

  #commit(): void {
    const settle = this.#settle;
    this.#settle = [];
    for (const fn of settle) fn();
    this.#waiters = this.#waiters.filter((w) => {
      if (this.rows.length < w.count) return true;
      w.resolve();
      return false;
    });
  }
}

/** A byte stream that hands out `bytes` in chunks of the given sizes (cycled). */
function chunked(bytes: Uint8Array, sizes: number[]): ReadableStream<Uint8Array> {
  let at = 0;
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) {
        controller.close();
        return;
      }
      const size = sizes[i++ % sizes.length];
      // A fresh copy each time, like a real reader, so slices cannot alias.
      controller.enqueue(bytes.slice(at, at + size));
      at += size;
    },
  });
}

function logger(): { lines: string[]; log(message: string): void } {
  const lines: string[] = [];
  return { lines, log: (message) => lines.push(message) };
}

const SAMPLE = [
  '{"x":1,"s":"héllo"}', // 1
  '{"x":2,"s":"€uro 🎉"}\r', // 2, CRLF
  "", // 3, blank
  "not json", // 4, reject: JSON
  '{"x":"three"}', // 5, reject: schema
  "   ", // 6, blank (whitespace only)
  '{"x":3,"s":"日本語"}', // 7
  "\r", // 8, blank CRLF
  "[1,2]", // 9, reject: schema
  '{"x":4,"s":"ünïcödé"}', // 10, no trailing newline
].join("\n");

Deno.test("ingest lines keeps order, line numbers and stats across awkward chunk splits", async () => {
  const bytes = encoder.encode(SAMPLE);
  const splits = [[bytes.length], [1], [2], [3], [5, 1, 7], [13, 2], [64]];
  for (let n = 4; n <= 17; n++) splits.push([n]);
  for (const sizes of splits) {
    const sink = new TestSink();
    const { lines, log } = logger();
    const rejects: RejectRecord[] = [];
    const stats = await ingestLines(chunked(bytes, sizes), sink, {
      log,
      onReject: (rec) => {
        rejects.push(rec);
      },
    });
    const what = `chunk sizes ${sizes.join(",")}`;
    assert.deepEqual(stats, { lines: 10, accepted: 4, rejected: 3 }, what);
    assert.deepEqual(sink.rows, [
      { x: 1, s: "héllo" },
      { x: 2, s: "€uro 🎉" },
      { x: 3, s: "日本語" },
      { x: 4, s: "ünïcödé" },
    ], what);
    assert.deepEqual(rejects.map((r) => [r.line, r.input]), [
      [4, "not json"],
      [5, '{"x":"three"}'],
      [9, "[1,2]"],
    ], what);
    assert.match(rejects[0].error, /JSON/, what);
    assert.equal(rejects[1].error, "/x: must be number", what);
    assert.deepEqual(lines.slice(0, 3), [
      `streamcast: stdin line 4 for stream "trades": ${rejects[0].error}`,
      'streamcast: stdin line 5 for stream "trades": /x: must be number',
      'streamcast: stdin line 9 for stream "trades": /x: must be number',
    ], what);
    assert.equal(
      lines[3],
      'streamcast: end of stdin for stream "trades" (4 rows accepted, 3 rejected); still serving',
    );
    assert.equal(lines.length, 4, what);
  }
});

Deno.test("ingest lines reports structured events, each with the text line as msg", async () => {
  const events: IngestEvent[] = [];
  const logged: string[] = [];
  const input = new Blob(['{"x":1}\nnope\n{"x":"two"}\n']).stream();
  const stats = await ingestLines(input, new TestSink(), {
    onEvent: (e) => events.push(e),
    log: (m) => logged.push(m),
  });
  assert.deepEqual(stats, { lines: 3, accepted: 1, rejected: 2 });
  assert.deepEqual(logged, [], "onEvent replaces log");
  assert.deepEqual(events.map((e) => e.event), ["reject", "reject", "end_of_input"]);
  const [bad, schema, end] = events;
  assert.ok(bad.event === "reject" && schema.event === "reject" && end.event === "end_of_input");
  assert.deepEqual(
    [bad.stream, bad.source, bad.url, bad.line, bad.input],
    ["trades", "stdin", undefined, 2, "nope"],
  );
  assert.equal(bad.msg, `streamcast: stdin line 2 for stream "trades": ${bad.error}`);
  assert.deepEqual([schema.line, schema.error], [3, "/x: must be number"]);
  assert.deepEqual([end.source, end.accepted, end.rejected], ["stdin", 1, 2]);
  assert.equal(
    end.msg,
    'streamcast: end of stdin for stream "trades" (1 rows accepted, 2 rejected); still serving',
  );
});

Deno.test("ingest lines rejects a line that is not UTF-8 and goes on", async () => {
  const bytes = new Uint8Array([
    ...encoder.encode('{"x":1}\n{"x":"'),
    0xff,
    0xfe,
    ...encoder.encode('"}\n{"x":2,"s":"\uFFFD is fine"}\n'),
  ]);
  const sink = new TestSink();
  const rejects: RejectRecord[] = [];
  const stats = await ingestLines(chunked(bytes, [3]), sink, {
    log: () => {},
    onReject: (rec) => {
      rejects.push(rec);
    },
  });
  assert.deepEqual(stats, { lines: 3, accepted: 2, rejected: 1 });
  assert.deepEqual(rejects, [{
    line: 2,
    error: "line is not valid UTF-8",
    input: '{"x":"\ufffd\ufffd"}',
  }]);
});

Deno.test("ingest lines rejects an overlong line without buffering it and resyncs", async () => {
  // The default 16 MiB limit: a 20 MiB line arrives in 64 KiB chunks.
  const long = new Uint8Array(20 * 1024 * 1024).fill(0x61);
  long[0] = 0x5b; // "[" so the preview is recognisable
  const good1 = encoder.encode('{"x":1}\n');
  const good2 = encoder.encode('\n{"x":2}\r\n');
  const bytes = new Uint8Array(good1.length + long.length + good2.length);
  bytes.set(good1);
  bytes.set(long, good1.length);
  bytes.set(good2, good1.length + long.length);
  const sink = new TestSink();
  const rejects: RejectRecord[] = [];
  const { lines, log } = logger();
  const stats = await ingestLines(chunked(bytes, [65536]), sink, {
    log,
    onReject: (rec) => {
      rejects.push(rec);
    },
  });
  assert.deepEqual(stats, { lines: 3, accepted: 2, rejected: 1 });
  assert.deepEqual(sink.rows, [{ x: 1 }, { x: 2 }]);
  assert.equal(rejects.length, 1);
  assert.equal(rejects[0].line, 2);
  assert.equal(rejects[0].input, "[" + "a".repeat(1023));
  assert.match(
    rejects[0].error,
    /^line is 20971520 bytes, longer than the limit of 16777216 bytes/,
  );
  assert.match(lines[0], /^streamcast: stdin line 2 for stream "trades": line is 20971520 bytes/);
});

Deno.test("ingest lines limit counts content, not the line ending", async () => {
  const text = [
    '{"x":12345}', // 11 bytes: at the limit
    '{"x":12345}\r', // 11 + CR: at the limit
    '{"x":123456}', // 12 bytes: over
    '{"x":123456}\r', // over, with CR
    '{"x":7}',
    '{"x":1234567', // over, last line without newline, split over chunks
  ].join("\n");
  for (const sizes of [[1], [4], [5], [1000]]) {
    const sink = new TestSink();
    const rejects: RejectRecord[] = [];
    const stats = await ingestLines(chunked(encoder.encode(text), sizes), sink, {
      maxLineBytes: 11,
      log: () => {},
      onReject: (rec) => {
        rejects.push(rec);
      },
    });
    assert.deepEqual(stats, { lines: 6, accepted: 3, rejected: 3 }, `sizes ${sizes}`);
    assert.deepEqual(sink.rows, [{ x: 12345 }, { x: 12345 }, { x: 7 }]);
    assert.deepEqual(rejects.map((r) => [r.line, r.input]), [
      [3, '{"x":123456}'],
      [4, '{"x":123456}'],
      [6, '{"x":1234567'],
    ], `sizes ${sizes}`);
    assert.match(rejects[0].error, /^line is 12 bytes, longer than the limit of 11 bytes/);
    assert.match(rejects[1].error, /^line is 12 bytes/, "the CR does not count");
  }
  await assert.rejects(
    ingestLines(chunked(encoder.encode(""), [1]), new TestSink(), { maxLineBytes: 0 }),
    RangeError,
  );
});

Deno.test("ingest lines appends rejects to a file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/trades/rejects.ndjson`;
    const first = await rejectFile(path);
    await first({ line: 1, error: "earlier run", input: "x" });
    await first.close();

    const rejects = await rejectFile(path);
    const input = '{"x":1}\n{"x":"a\\"b"}\n{oops\n\n{"x":2}\n' +
      '{"x":"tab\\t"}\n';
    const sink = new TestSink();
    const stats = await ingestLines(chunked(encoder.encode(input), [7]), sink, {
      log: () => {},
      onReject: rejects,
      source: "trades.ndjson",
    });
    await rejects.close();
    assert.deepEqual(stats, { lines: 6, accepted: 2, rejected: 3 });
    const records = (await Deno.readTextFile(path)).split("\n");
    assert.equal(records.pop(), "", "every record ends with a newline");
    assert.equal(records.length, 4);
    assert.deepEqual(records.map((r) => JSON.parse(r)), [
      { line: 1, error: "earlier run", input: "x" },
      { line: 2, error: "/x: must be number", input: '{"x":"a\\"b"}' },
      { line: 3, error: JSON.parse(records[2]).error, input: "{oops" },
      { line: 6, error: "/x: must be number", input: '{"x":"tab\\t"}' },
    ]);
    assert.match(JSON.parse(records[2]).error, /JSON/);
    assert.deepEqual(Object.keys(JSON.parse(records[1])), ["line", "error", "input"]);
    await assert.rejects(rejects({ line: 9, error: "late", input: "" }), /closed/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ingest lines reports rejects in line order with an async sink and onReject", async () => {
  const rows: string[] = [];
  for (let i = 1; i <= 2000; i++) {
    rows.push(i % 7 === 0 ? "{bad" : i % 5 === 0 ? `{"x":"${i}"}` : `{"x":${i}}`);
  }
  const sink = new TestSink();
  const seen: number[] = [];
  let writing = 0;
  const stats = await ingestLines(chunked(encoder.encode(rows.join("\n") + "\n"), [333]), sink, {
    log: () => {},
    maxInFlight: 64,
    onReject: async (rec) => {
      seen.push(rec.line);
      writing++;
      await new Promise((r) => setTimeout(r, rec.line % 3));
      writing--;
    },
  });
  assert.equal(writing, 0, "resolves after every reject is recorded");
  const expected = rows.map((_, i) => i + 1).filter((n) => n % 7 === 0 || n % 5 === 0);
  assert.deepEqual(seen, expected);
  assert.deepEqual(stats, {
    lines: 2000,
    accepted: 2000 - expected.length,
    rejected: expected.length,
  });
  assert.deepEqual(
    sink.rows.map((r) => (r as { x: number }).x),
    rows.map((_, i) => i + 1).filter((n) => !expected.includes(n)),
  );
  assert.ok(sink.maxInFlight <= 64, `at most maxInFlight pipelined, saw ${sink.maxInFlight}`);
  assert.ok(sink.maxInFlight > 1, "sends are pipelined");
});

Deno.test("ingest lines stops on a real sink failure and throws it after sent rows settle", async () => {
  let cancelled: unknown = "not cancelled";
  let produced = 0;
  const input = new ReadableStream<Uint8Array>({
    pull(controller) {
      // An endless input: only the failure can stop it.
      produced++;
      controller.enqueue(encoder.encode(`{"x":${produced}}\n`));
    },
    cancel(reason) {
      cancelled = reason;
    },
  });
  const sink = new TestSink();
  sink.failAtCall = 50;
  const { lines, log } = logger();
  await assert.rejects(
    ingestLines(input, sink, { log, maxInFlight: 16 }),
    /disk full \(simulated\)/,
  );
  assert.equal(cancelled, undefined, "input cancelled");
  assert.equal(sink.inFlight, 0, "every sent row settled before the throw");
  assert.equal(sink.rows.length, sink.calls - 1);
  assert.deepEqual(
    sink.rows.slice(0, 49).map((r) => (r as { x: number }).x),
    [
      ...Array(49).keys(),
    ].map((i) => i + 1),
  );
  assert.ok(!lines.some((l) => l.includes("end of stdin")), "no end-of-input message");
});

Deno.test("ingest lines stops when onReject fails", async () => {
  const sink = new TestSink();
  await assert.rejects(
    ingestLines(chunked(encoder.encode('{"x":1}\nbad\n{"x":2}\n'), [4]), sink, {
      log: () => {},
      onReject: () => Promise.reject(new Error("cannot write rejects")),
    }),
    /cannot write rejects/,
  );
});

Deno.test("ingest lines abort cancels the input and resolves with the stats so far", async () => {
  const ac = new AbortController();
  let produced = 0;
  let cancelled = false;
  const input = new ReadableStream<Uint8Array>({
    async pull(controller) {
      produced++;
      if (produced === 100) ac.abort();
      // A slow producer, like a terminal.
      await new Promise((r) => setTimeout(r, 0));
      controller.enqueue(encoder.encode(`{"x":${produced}}\n`));
    },
    cancel() {
      cancelled = true;
    },
  });
  const sink = new TestSink();
  const { lines, log } = logger();
  const stats = await ingestLines(input, sink, { log, signal: ac.signal });
  assert.ok(cancelled, "input cancelled");
  assert.equal(stats.accepted, sink.rows.length);
  assert.ok(stats.accepted >= 98 && stats.accepted <= 100, String(stats.accepted));
  assert.equal(sink.inFlight, 0);
  assert.deepEqual(lines, [], "no end-of-input message when aborted");

  const already = await ingestLines(chunked(encoder.encode('{"x":1}\n'), [8]), sink, {
    signal: AbortSignal.abort(),
    log,
  });
  assert.deepEqual(already, { lines: 0, accepted: 0, rejected: 0 });
});

// ---------------------------------------------------------------------------
// Upstream: real Deno.serve WebSocket servers on 127.0.0.1.

interface Feed {
  readonly port: number;
  /** Sockets accepted so far. */
  readonly sockets: WebSocket[];
  /** Stops listening; open sockets die without a close frame. */
  kill(): Promise<void>;
  /** Closes every socket cleanly and stops. */
  stop(): Promise<void>;
}

/** A WebSocket server calling `onSocket` for each connection, once open. */
function startFeed(
  onSocket: (socket: WebSocket, n: number) => void,
  port = 0,
): Feed {
  const ac = new AbortController();
  const sockets: WebSocket[] = [];
  const closed: Promise<void>[] = [];
  const server = Deno.serve(
    { port, hostname: "127.0.0.1", signal: ac.signal, onListen() {} },
    (req) => {
      const { socket, response } = Deno.upgradeWebSocket(req);
      const n = sockets.push(socket);
      closed.push(new Promise((r) => socket.addEventListener("close", () => r())));
      socket.onopen = () => onSocket(socket, n);
      return response;
    },
  );
  return {
    port: server.addr.port,
    sockets,
    async kill() {
      ac.abort();
      await server.finished;
      await Promise.all(closed);
    },
    async stop() {
      for (const s of sockets) if (s.readyState === WebSocket.OPEN) s.close(1001);
      await Promise.all(closed);
      ac.abort();
      await server.finished;
    },
  };
}

function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    const check = () => {
      if (condition()) resolve();
      else if (Date.now() - start > timeoutMs) reject(new Error(`timed out waiting for ${what}`));
      else setTimeout(check, 5);
    };
    check();
  });
}

Deno.test("ingest upstream survives an abrupt server death and keeps every row in order", async () => {
  const first = startFeed((socket) => {
    for (let x = 1; x <= 5; x++) socket.send(JSON.stringify({ x }));
  });
  const port = first.port;
  const sink = new TestSink();
  const { lines, log } = logger();
  const ac = new AbortController();
  let opens = 0;
  let closes = 0;
  const done = ingestUpstream(
    `ws://feeduser:hunter2@127.0.0.1:${port}/feed?apikey=s3cr3t&venue=x`,
    sink,
    {
      log,
      signal: ac.signal,
      minBackoffMs: 5,
      maxBackoffMs: 40,
      onOpen: () => opens++,
      onClose: () => closes++,
    },
  );
  await sink.stored(5);
  await first.kill(); // no close frame: the client sees an abnormal closure
  await until(() => lines.some((l) => l.includes("failed to connect")), "a refused reconnect");
  const second = startFeed((socket) => {
    for (let x = 6; x <= 10; x++) socket.send(JSON.stringify({ x }));
    socket.send("not json");
    socket.send(JSON.stringify({ x: "eleven" }));
    socket.send(encoder.encode(JSON.stringify({ x: 11 }))); // binary, decoded as UTF-8
  }, port);
  await sink.stored(11);
  ac.abort();
  const stats = await done;
  await second.stop();

  assert.deepEqual(sink.rows.map((r) => (r as { x: number }).x), [
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
  ]);
  assert.deepEqual(stats, { lines: 13, accepted: 11, rejected: 2 });
  assert.equal(opens, 2);
  assert.equal(closes, 2);
  const shown = `ws://127.0.0.1:${port}/feed?apikey=REDACTED&venue=x`;
  for (const line of lines) {
    assert.ok(!line.includes("hunter2") && !line.includes("feeduser"), line);
    assert.ok(!line.includes("s3cr3t"), line);
  }
  assert.equal(lines[0], `streamcast: upstream ${shown} connected for stream "trades"`);
  assert.match(lines[1], /disconnected for stream "trades" \(code \d+.*\); reconnecting in \d/);
  assert.ok(lines[1].includes(shown), lines[1]);
  assert.ok(lines.filter((l) => l.endsWith('connected for stream "trades"')).length === 2);
  assert.ok(
    lines.includes(
      `streamcast: upstream ${shown} frame 12 for stream "trades": /x: must be number`,
    ),
  );
  assert.ok(
    lines.some((l) =>
      l.startsWith(`streamcast: upstream ${shown} frame 11 for stream "trades": Unexpected`)
    ),
  );
  assert.equal(
    lines.at(-1),
    `streamcast: upstream ${shown} stopped for stream "trades" (11 rows accepted, 2 rejected)`,
  );
});

Deno.test("ingest upstream runs frames through a handler module across a clean reconnect", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const handlerPath = `${dir}/feed_handler.ts`;
    await Deno.writeTextFile(
      handlerPath,
      `export default async function handle(frame: string): Promise<unknown> {
  const msg = JSON.parse(frame);
  if (msg.type === "heartbeat") return null;
  if (msg.type === "boom") throw new Error("cannot handle boom");
  if (msg.type === "slow") await new Promise((r) => setTimeout(r, 20));
  if (msg.type === "forgot") return undefined;
  return msg.trades;
}
`,
    );
    const rejectsPath = `${dir}/trades/rejects.ndjson`;
    const rejects = await rejectFile(rejectsPath);
    const frames1 = [
      { type: "trades", trades: [{ x: 1 }, { x: 2 }] },
      { type: "heartbeat" },
      { type: "slow", trades: [{ x: 3 }] },
      { type: "trades", trades: { x: 4 } },
    ];
    const frames2 = [
      { type: "boom" },
      { type: "trades", trades: [{ x: 5 }, { x: "six" }, { x: 7 }] },
      { type: "forgot" },
      { type: "slow", trades: [{ x: 8 }, { x: 9 }] },
    ];
    const feed = startFeed((socket, n) => {
      for (const f of n === 1 ? frames1 : frames2) socket.send(JSON.stringify(f));
      // A clean close midway (service restart); the client comes back.
      if (n === 1) socket.close(1012, "restart");
    });
    const sink = new TestSink();
    const ac = new AbortController();
    const { lines, log } = logger();
    try {
      const handler = await loadHandler(handlerPath);
      const done = ingestUpstream(`ws://127.0.0.1:${feed.port}/`, sink, {
        handler,
        log,
        onReject: rejects,
        signal: ac.signal,
        minBackoffMs: 5,
        maxBackoffMs: 20,
      });
      await sink.stored(8);
      await until(() => sink.inFlight === 0, "the last rows settled");
      ac.abort();
      const stats = await done;
      assert.deepEqual(sink.rows.map((r) => (r as { x: number }).x), [1, 2, 3, 4, 5, 7, 8, 9]);
      assert.deepEqual(stats, { lines: 8, accepted: 8, rejected: 3 });
      assert.equal(feed.sockets.length, 2, "one reconnect");
      assert.ok(
        lines.some((l) => /disconnected .*\(code 1012, "restart"\)/.test(l)),
        lines.join("\n"),
      );
    } finally {
      await rejects.close();
      await feed.stop();
    }
    const records = (await Deno.readTextFile(rejectsPath)).trim().split("\n").map((l) =>
      JSON.parse(l)
    );
    assert.deepEqual(records.map((r) => [r.line, r.error]), [
      [5, "handler threw: cannot handle boom"],
      [6, "/x: must be number"],
      [7, "handler returned undefined (return null to skip a frame)"],
    ]);
    assert.equal(records[1].input, JSON.stringify(frames2[1]));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ingest upstream reports connects, rejects and its stop as structured events", async () => {
  const feed = startFeed((socket) => {
    socket.send('{"x":1}');
    socket.send("{bad");
  });
  const sink = new TestSink();
  const events: IngestEvent[] = [];
  const ac = new AbortController();
  const done = ingestUpstream(`ws://user:secret@127.0.0.1:${feed.port}/`, sink, {
    onEvent: (e) => events.push(e),
    signal: ac.signal,
  });
  await until(() => events.some((e) => e.event === "reject"), "the reject");
  ac.abort();
  assert.deepEqual(await done, { lines: 2, accepted: 1, rejected: 1 });
  await feed.stop();
  const url = `ws://127.0.0.1:${feed.port}/`;
  assert.deepEqual(events.map((e) => e.event), [
    "upstream_connected",
    "reject",
    "upstream_stopped",
  ]);
  const [open, reject, stopped] = events;
  assert.ok(open.event === "upstream_connected" && reject.event === "reject");
  assert.ok(stopped.event === "upstream_stopped");
  assert.equal(open.url, url, "no credentials");
  assert.equal(open.msg, `streamcast: upstream ${url} connected for stream "trades"`);
  assert.deepEqual([reject.source, reject.url, reject.line, reject.input], [
    "upstream",
    url,
    2,
    "{bad",
  ]);
  assert.equal(
    reject.msg,
    `streamcast: upstream ${url} frame 2 for stream "trades": ${reject.error}`,
  );
  assert.deepEqual([stopped.accepted, stopped.rejected], [1, 1]);
  assert.ok(!JSON.stringify(events).includes("secret"));
});

Deno.test("ingest upstream abort during backoff clears the timer and resolves", async () => {
  // A port with nothing listening.
  const listener = Deno.listen({ port: 0, hostname: "127.0.0.1" });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const ac = new AbortController();
  const { lines, log } = logger();
  const started = Date.now();
  const done = ingestUpstream(`ws://127.0.0.1:${port}/`, new TestSink(), {
    log,
    signal: ac.signal,
    minBackoffMs: 60_000,
    maxBackoffMs: 60_000,
  });
  await until(() => lines.some((l) => l.includes("retrying in 60.0 s")), "a failed connect");
  ac.abort();
  assert.deepEqual(await done, { lines: 0, accepted: 0, rejected: 0 });
  assert.ok(Date.now() - started < 10_000, "did not wait out the backoff");
  assert.match(
    lines[0],
    /^streamcast: upstream ws:\/\/127\.0\.0\.1:\d+\/ for stream "trades" failed to connect \(/,
  );
});

Deno.test("ingest upstream abort while connected closes the socket", async () => {
  const feed = startFeed((socket) => socket.send('{"x":1}'));
  const sink = new TestSink();
  const ac = new AbortController();
  const done = ingestUpstream(`ws://127.0.0.1:${feed.port}/`, sink, {
    log: () => {},
    signal: ac.signal,
  });
  await sink.stored(1);
  ac.abort();
  assert.deepEqual(await done, { lines: 1, accepted: 1, rejected: 0 });
  await until(() => feed.sockets[0].readyState === WebSocket.CLOSED, "server side closed");
  await feed.stop();
  // Already aborted: never connects.
  const stats = await ingestUpstream(`ws://127.0.0.1:${feed.port}/`, sink, {
    log: () => {},
    signal: AbortSignal.abort(),
  });
  assert.deepEqual(stats, { lines: 0, accepted: 0, rejected: 0 });
});

Deno.test("ingest upstream stops and throws on a real sink failure", async () => {
  const feed = startFeed((socket) => {
    for (let x = 1; x <= 10; x++) socket.send(JSON.stringify({ x }));
  });
  const sink = new TestSink();
  sink.failAtCall = 4;
  try {
    await assert.rejects(
      ingestUpstream(`ws://127.0.0.1:${feed.port}/`, sink, { log: () => {} }),
      /disk full \(simulated\)/,
    );
    assert.deepEqual(sink.rows.slice(0, 3), [{ x: 1 }, { x: 2 }, { x: 3 }]);
    assert.equal(sink.inFlight, 0);
  } finally {
    await feed.stop();
  }
});

Deno.test("ingest upstream sheds load by disconnecting when frames pile up", async () => {
  const feed = startFeed((socket, n) => {
    if (n === 1) { for (let x = 1; x <= 20; x++) socket.send(JSON.stringify({ x })); }
  });
  const sink = new TestSink();
  const ac = new AbortController();
  const { lines, log } = logger();
  const done = ingestUpstream(`ws://127.0.0.1:${feed.port}/`, sink, {
    handler: async (frame) => {
      await new Promise((r) => setTimeout(r, 5));
      return JSON.parse(frame);
    },
    maxQueuedFrames: 3,
    minBackoffMs: 5,
    log,
    signal: ac.signal,
  });
  try {
    await until(() => feed.sockets.length === 2, "a reconnect after shedding");
    await until(() => sink.inFlight === 0 && sink.rows.length > 0, "queued frames handled");
    const xs = sink.rows.map((r) => (r as { x: number }).x);
    assert.deepEqual(xs, xs.map((_, i) => i + 1), "the rows received, in order");
    assert.ok(xs.length >= 4, `frames queued before the disconnect are handled (${xs.length})`);
    assert.ok(lines.some((l) => l.includes("queued behind ingest (limit 3); disconnecting")));
  } finally {
    ac.abort();
    await done;
    await feed.stop();
  }
});

Deno.test("ingest upstream refuses a URL that is not a WebSocket URL, or bad protocols", async () => {
  await assert.rejects(ingestUpstream("ftp://example.com/", new TestSink()), TypeError);
  await assert.rejects(ingestUpstream("not a url", new TestSink()), TypeError);
  await assert.rejects(
    ingestUpstream("ws://127.0.0.1:1/", new TestSink(), { protocols: ["a b"], log: () => {} }),
    { name: "SyntaxError" },
  );
});

Deno.test("ingest loadHandler names the module when it cannot be used", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/named.ts`, "export function handle() { return null; }\n");
    await Deno.writeTextFile(`${dir}/value.ts`, "export default 42;\n");
    await Deno.writeTextFile(`${dir}/ok.js`, "export default (f) => [JSON.parse(f)];\n");
    await assert.rejects(
      loadHandler(`${dir}/missing.ts`),
      (e: Error) => e.message.startsWith(`Cannot load handler module ${dir}/missing.ts: `),
    );
    await assert.rejects(loadHandler(`${dir}/named.ts`), {
      name: "TypeError",
      message: `Cannot use handler module ${dir}/named.ts: it has no default export ` +
        "(it exports handle); export default a function (frame: string) => row | row[] | null",
    });
    await assert.rejects(loadHandler(`${dir}/value.ts`), {
      name: "TypeError",
      message: `Cannot use handler module ${dir}/value.ts: its default export is a number, ` +
        "not a function",
    });
    const handler = await loadHandler(new URL(`file://${dir}/ok.js`).href);
    assert.deepEqual(await handler('{"x":1}'), [{ x: 1 }]);
    // A relative path resolves against the working directory.
    const relative = await loadHandler(relativePath(Deno.cwd(), `${dir}/ok.js`));
    assert.equal(typeof relative, "function");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
