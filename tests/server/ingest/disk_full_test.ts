// Ingest against a sink whose disk fills: lines (stdin) are sent again, in
// order, once the sink takes rows, with rejects kept in their place; an
// upstream drops what the sink refused, disconnects, reconnects once the
// sink takes rows and says what it missed. The sink fails as a stream does:
// a batch in flight fails with the log's write error (ENOSPC), and every
// send after it is refused with DiskFullError until `ready` resolves.
// Seeded: where the disk fills and the chunking of the input; a fresh seed each run, printed.
import { deepEqual, equal, ok } from "node:assert/strict";
import {
  type IngestBatch,
  type IngestEvent,
  ingestLines,
  type IngestSink,
  ingestUpstream,
  type RejectRecord,
} from "../../../server/ingest/mod.ts";
import { DiskFullError } from "../../../server/stream/disk_gate.ts";
import { LogWriteError } from "../../../log/mod.ts";
import { rng } from "../../harness/util.ts";

const SEED = crypto.getRandomValues(new Uint32Array(1))[0];

function enospc(): Error {
  return new LogWriteError(
    "append failed",
    Object.assign(new Error("No space left on device (os error 28)"), { code: "ENOSPC" }),
  );
}

/** A sink that stores rows as a stream would, and whose disk fills at the `fullAt`-th batch. */
class FillingSink implements IngestSink {
  readonly name = "t";
  readonly stored: number[] = [];
  full = false;
  batches = 0;
  fulls = 0;
  #waiters: (() => void)[] = [];
  constructor(readonly fullAt: Set<number>) {}

  send(row: unknown): Promise<number | null> {
    const b = this.sendJson([JSON.stringify(row)]);
    return b.durable.then(() => this.stored.length);
  }

  sendJson(texts: readonly string[]): IngestBatch {
    if (this.full) throw new DiskFullError("t", "the test's disk is full");
    const rows: number[] = [];
    const refused: (Error | undefined)[] = new Array(texts.length);
    let any = false;
    for (let i = 0; i < texts.length; i++) {
      const v = JSON.parse(texts[i]);
      if (typeof v.n !== "number") {
        refused[i] = new SyntaxError("not a row");
        any = true;
      } else rows.push(v.n);
    }
    const batch = ++this.batches;
    if (this.fullAt.has(batch)) {
      // The write fails: this batch is not stored, and the stream stops at once.
      this.full = true;
      this.fulls++;
      setTimeout(() => {
        this.full = false;
        for (const w of this.#waiters.splice(0)) w();
      }, 20);
      const durable = Promise.reject(enospc());
      durable.catch(() => {});
      return { refused: any ? refused : null, durable };
    }
    return {
      refused: any ? refused : null,
      durable: new Promise((r) => setTimeout(r, 1)).then(() => void this.stored.push(...rows)),
    };
  }

  ready(): Promise<void> {
    if (!this.full) return Promise.resolve();
    return new Promise((r) => this.#waiters.push(r));
  }
}

Deno.test(`ingest lines on a filling disk: every line stored once, in order, rejects in place (seed ${SEED})`, async () => {
  console.log(`seed ${SEED}`);
  const r = rng(SEED);
  const total = 5000;
  const lines: string[] = [];
  const bad = new Set<number>();
  for (let n = 1; n <= total; n++) {
    if (r() < 0.02) {
      bad.add(n);
      lines.push(`{"x":${n}}`);
    } else lines.push(JSON.stringify({ n }));
  }
  // Cut into random chunks.
  const bytes = new TextEncoder().encode(lines.join("\n") + "\n");
  const chunks: Uint8Array[] = [];
  for (let at = 0; at < bytes.length;) {
    const n = 1 + Math.floor(r() * 4096);
    chunks.push(bytes.subarray(at, at + n));
    at += n;
  }
  const input = new ReadableStream<Uint8Array>({
    pull(c) {
      const next = chunks.shift();
      if (next) c.enqueue(next);
      else c.close();
    },
  });
  const fullAt = new Set([2 + Math.floor(r() * 5), 10 + Math.floor(r() * 10)]);
  const sink = new FillingSink(fullAt);
  const rejects: RejectRecord[] = [];
  const stats = await ingestLines(input, sink, {
    onReject: (rec) => void rejects.push(rec),
    onEvent: () => {},
    maxInFlight: 512,
  });
  ok(sink.fulls >= 1, `the disk filled (${sink.fulls} times)`);
  const want = Array.from({ length: total }, (_, i) => i + 1).filter((n) => !bad.has(n));
  deepEqual(sink.stored, want);
  deepEqual(rejects.map((x) => x.line), [...bad]);
  deepEqual(stats, { lines: total, accepted: want.length, rejected: bad.size });
});

Deno.test("ingest upstream on a full disk disconnects, reconnects once the sink takes rows, says what it missed", async () => {
  let sent = 0;
  const opens: number[] = [];
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, (req) => {
    const { socket, response } = Deno.upgradeWebSocket(req);
    opens.push(sent);
    socket.onopen = () => {
      for (let k = 0; k < 200; k++) socket.send(JSON.stringify({ n: ++sent }));
    };
    socket.onerror = () => {};
    return response;
  });
  const sink = new FillingSink(new Set([50]));
  const events: IngestEvent[] = [];
  const stop = new AbortController();
  const done = ingestUpstream(`ws://127.0.0.1:${server.addr.port}/`, sink, {
    onEvent: (e) => events.push(e),
    signal: stop.signal,
    minBackoffMs: 10,
  });
  try {
    const deadline = Date.now() + 10_000;
    while (!events.some((e) => e.event === "upstream_resumed") || opens.length < 2) {
      ok(Date.now() < deadline, `no resume: ${events.map((e) => e.event).join(", ")}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    const paused = events.find((e) => e.event === "upstream_paused");
    ok(paused && /disk is full/.test(paused.msg), paused?.msg);
    const resumed = events.find((e) => e.event === "upstream_resumed");
    ok(resumed?.event === "upstream_resumed" && resumed.dropped >= 1, resumed?.msg);
    // What is stored is in the upstream's order, none twice.
    for (let i = 1; i < sink.stored.length; i++) ok(sink.stored[i] > sink.stored[i - 1]);
    equal(sink.stored.includes(50), false);
  } finally {
    stop.abort();
    await done;
    await server.shutdown();
  }
});
