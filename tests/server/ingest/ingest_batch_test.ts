// The stdin fast path (a stream as the sink: each chunk's lines decoded once,
// sent together through Stream#sendJson, texts already in the encoded form
// stored as they are) against the per-row path (the same stream behind a sink
// with only `send`): for the same input cut into random chunks, the same
// stats, the same rejects (line, error, input) in the same order, and the same
// stored rows, byte for byte. Seeded: a fresh seed each run, printed.
import { deepEqual, equal } from "node:assert/strict";
import { ingestLines, type IngestSink, type RejectRecord } from "../../../server/ingest/mod.ts";
import { Stream } from "../../../server/stream/stream.ts";
import { caseName, caseRng, fuzzCases, replayHint, seedBanner } from "../../harness/seeds.ts";
import { tempDir } from "../../harness/util.ts";

const SCHEMA = {
  type: "object",
  properties: {
    ts: { type: "integer" },
    side: { type: "integer", format: "int32" },
    sym: { type: "string" },
    px: { type: "number" },
    note: { type: ["string", "null"] },
  },
  required: ["ts", "side", "sym", "px", "note"],
};

const enc = new TextEncoder();

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)];
}

// One input line (without its newline), as bytes: mostly valid rows in the
// encoded form, and every kind of other line.
function line(r: () => number, i: number): Uint8Array {
  const row = {
    ts: 1_790_038_800_000_000 + i,
    side: Math.floor(r() * 2),
    sym: pick(r, ["BTC-USD", "ETH-USD", "é€😀", ""]),
    px: Math.round(r() * 1e7) / 100,
    note: r() < 0.5 ? null : "n",
  };
  const k = r();
  let text: string;
  if (k < 0.6) text = JSON.stringify(row);
  else if (k < 0.65) text = JSON.stringify(row, null, 1).replaceAll("\n", " "); // valid, spelled otherwise
  else if (k < 0.68) {
    text = JSON.stringify({ px: row.px, ts: row.ts, side: row.side, sym: row.sym, note: row.note }); // key order differs
  } else if (k < 0.71) text = JSON.stringify({ ...row, side: 2 ** 31 }); // out of int32
  else if (k < 0.73) text = JSON.stringify({ ...row, extra: 1 });
  else if (k < 0.75) text = JSON.stringify({ ...row, px: "1" });
  else if (k < 0.77) text = JSON.stringify(row).slice(0, -3); // not JSON
  else if (k < 0.79) text = "";
  else if (k < 0.81) text = pick(r, [" ", "\t", " \t "]);
  else if (k < 0.83) text = JSON.stringify(row) + "\r";
  else if (k < 0.85) text = "\uFEFF" + JSON.stringify(row); // a BOM starts the line
  else if (k < 0.87) text = JSON.stringify({ ...row, sym: "\uFFFD" }); // a genuine U+FFFD
  else if (k < 0.89) text = JSON.stringify({ ...row, sym: "x".repeat(300) }); // too long
  else if (k < 0.91) text = "[1,2]";
  else if (k < 0.93) text = JSON.stringify({ ...row, sym: 'a"b\\c\u0001' }); // escapes
  else text = JSON.stringify(row);
  const bytes = enc.encode(text);
  if (k >= 0.93 && k < 0.95) {
    // Not UTF-8: a stray continuation byte in the middle.
    const out = new Uint8Array(bytes.length + 1);
    out.set(bytes.subarray(0, 5));
    out[5] = 0x80;
    out.set(bytes.subarray(5), 6);
    return out;
  }
  return bytes;
}

function input(r: () => number, lines: number): Uint8Array {
  const parts: Uint8Array[] = [];
  let total = 0;
  for (let i = 0; i < lines; i++) {
    const l = line(r, i);
    parts.push(l, enc.encode("\n"));
    total += l.length + 1;
  }
  if (r() < 0.5) parts.pop(); // a last line without newline
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out.subarray(0, at);
}

// The bytes cut into chunks of random sizes (cutting inside lines and characters).
function chunked(bytes: Uint8Array, r: () => number): ReadableStream<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for (let at = 0; at < bytes.length;) {
    const n = r() < 0.2 ? 1 + Math.floor(r() * 8) : 1 + Math.floor(r() * 4096);
    chunks.push(bytes.slice(at, at + n));
    at += n;
  }
  return new ReadableStream({
    pull(c) {
      const next = chunks.shift();
      if (next === undefined) c.close();
      else c.enqueue(next);
    },
  });
}

async function stored(stream: Stream): Promise<string[]> {
  const reader = stream.log!.reader(1);
  const out: string[] = [];
  const dec = new TextDecoder();
  for (;;) {
    const batch = await reader.read(1 << 20);
    if (batch.count === 0) break;
    for (let i = 0; i < batch.count; i++) {
      out.push(dec.decode(batch.buf.subarray(batch.starts[i], batch.starts[i] + batch.lengths[i])));
    }
  }
  reader.close();
  return out;
}

async function run(
  dir: string,
  name: string,
  bytes: Uint8Array,
  r: () => number,
  batched: boolean,
  maxInFlight: number,
) {
  const stream = await Stream.open(name, {
    schema: SCHEMA,
    root: dir,
    logOptions: { timers: false, chunks: false, fsync: false },
  });
  const sink: IngestSink = batched ? stream : { name, send: (row) => stream.send(row) };
  const rejects: RejectRecord[] = [];
  try {
    const stats = await ingestLines(chunked(bytes, r), sink, {
      maxLineBytes: 256,
      maxInFlight,
      onReject: (rec) => {
        rejects.push(rec);
      },
      onEvent: () => {},
    });
    return { stats, rejects, rows: await stored(stream) };
  } finally {
    await stream.close();
  }
}

Deno.test("ingest: the batched path and the per-row path agree on every line", async () => {
  console.log(seedBanner("ingest batch agreement"));
  const dir = await tempDir();
  const cases = fuzzCases(24, "ingest_batch");
  try {
    let fast = 0;
    for (const c of cases) {
      const r = caseRng(c);
      const bytes = input(r, 200 + Math.floor(r() * 800));
      const maxInFlight = pick(r, [1, 7, 64, 4096]);
      const seedA = Math.floor(r() * 2 ** 32);
      const seedB = Math.floor(r() * 2 ** 32);
      const name = `c${c.seed}_${c.index}`;
      const a = await run(
        dir,
        `${name}_a`,
        bytes,
        caseRng({ seed: seedA, index: 0 }),
        true,
        maxInFlight,
      );
      const b = await run(
        dir,
        `${name}_b`,
        bytes,
        caseRng({ seed: seedB, index: 0 }),
        false,
        maxInFlight,
      );
      const what = `${caseName(c)}; ${replayHint([c])}`;
      deepEqual(a.stats, b.stats, what);
      for (let i = 0; i < Math.max(a.rejects.length, b.rejects.length); i++) {
        deepEqual(
          a.rejects[i],
          b.rejects[i],
          `${what}: reject ${i}: ${JSON.stringify(a.rejects[i])} vs ${
            JSON.stringify(b.rejects[i])
          }`,
        );
      }
      deepEqual(a.rows, b.rows, what);
      equal(a.stats.accepted, a.rows.length, what);
      fast += a.rows.length;
    }
    equal(fast > 1000, true, `only ${fast} rows stored`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ingest: a row too big for the log is a reject of its own on the batched path", async () => {
  const dir = await tempDir();
  try {
    const stream = await Stream.open("big", {
      schema: SCHEMA,
      root: dir,
      logOptions: { timers: false, chunks: false, fsync: false, maxPayloadBytes: 200 },
    });
    const row = (sym: string) => JSON.stringify({ ts: 1, side: 0, sym, px: 1.5, note: null });
    const text = [row("a"), row("b".repeat(300)), row("c"), ""].join("\n");
    const rejects: RejectRecord[] = [];
    const stats = await ingestLines(new Blob([text]).stream(), stream, {
      onReject: (rec) => {
        rejects.push(rec);
      },
      onEvent: () => {},
    });
    deepEqual(stats, { lines: 3, accepted: 2, rejected: 1 });
    equal(rejects[0].line, 2);
    equal(
      rejects[0].error,
      `row too big: payload is ${row("b".repeat(300)).length} bytes; the limit is 200`,
    );
    deepEqual(await stored(stream), [row("a"), row("c")]);
    await stream.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sendJson: each text its own verdict; stored bytes as send would store them", async () => {
  const dir = await tempDir();
  try {
    const open = (name: string) =>
      Stream.open(name, {
        schema: SCHEMA,
        root: dir,
        logOptions: { timers: false, chunks: false },
      });
    const a = await open("a");
    const b = await open("b");
    const rows: unknown[] = [
      { ts: 1, side: 0, sym: "x", px: 1.5, note: null }, // encoded form as written
      { note: "n", px: 2, sym: "y", side: 1, ts: 2 }, // keys out of order: respelled
      { ts: 3, side: 2 ** 31, sym: "z", px: 1, note: null }, // refused: int32
      { ts: 4, side: 0, sym: "é\u2028", px: 1e21, note: 'a"b' }, // valid, spelled otherwise
    ];
    const texts = [
      JSON.stringify(rows[0]),
      JSON.stringify(rows[1]),
      JSON.stringify(rows[2]),
      JSON.stringify(rows[3]).replace("1e+21", "1E21"),
      '{"ts":5,',
      "[]",
    ];
    const { refused, durable } = a.sendJson(texts);
    await durable;
    deepEqual(
      Array.from(refused ?? [], (e) => e?.name),
      [undefined, undefined, "RowError", undefined, "SyntaxError", "RowError"],
    );
    for (const i of [0, 1, 3]) await b.send(rows[i]);
    deepEqual(await stored(a), await stored(b));
    equal(a.endOffset, 4);
    await a.close();
    await b.close();
    let threw: unknown = null;
    try {
      a.sendJson(texts);
    } catch (err) {
      threw = err;
    }
    equal(threw instanceof Deno.errors.BadResource, true, "a closed stream refuses at the call");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
