// ingestLines from a ByteSource (`Deno.stdin`'s shape): read into one reused
// buffer, the same lines, rejects and stats as from a byte stream of the same
// bytes, however the reads fall; an abort ends a read that never returns.
// Seeded: a fresh seed each run, printed, beside a fixed one.
import assert from "node:assert/strict";
import {
  type ByteSource,
  ingestLines,
  type IngestSink,
  READ_BUFFER_BYTES,
  type RejectRecord,
} from "../../../server/ingest/mod.ts";
import { rng } from "../../harness/util.ts";

const encoder = new TextEncoder();

// A sink taking JSON texts as a stream does (`sendJson`), keeping them.
function textSink(): IngestSink & { texts: string[] } {
  const texts: string[] = [];
  return {
    name: "t",
    texts,
    send: () => Promise.reject(new Error("sendJson is the path here")),
    sendJson(batch) {
      texts.push(...batch);
      return { refused: null, durable: Promise.resolve() };
    },
  };
}

// The bytes handed out in reads of random sizes (1 byte up to past the
// buffer), checking that every read is into the one same buffer.
function pieces(
  bytes: Uint8Array,
  random: () => number,
): ByteSource & { buffers: Set<Uint8Array> } {
  let at = 0;
  const buffers = new Set<Uint8Array>();
  return {
    buffers,
    read(buffer) {
      buffers.add(buffer);
      if (at >= bytes.length) return Promise.resolve(null);
      const want = random() < 0.5
        ? 1 + Math.floor(random() * 8)
        : 1 + Math.floor(random() * 100_000);
      const n = Math.min(want, buffer.length, bytes.length - at);
      buffer.set(bytes.subarray(at, at + n));
      // Bytes past the read are garbage from an earlier one: the reader must not look.
      buffer.fill(0x7b, n, Math.min(buffer.length, n + 16));
      at += n;
      // Now and then a read completes on a later macrotask, as a pipe's does.
      return random() < 0.2
        ? new Promise((resolve) => setTimeout(() => resolve(n), 0))
        : Promise.resolve(n);
    },
  };
}

// Lines with multi-byte characters, CRLF, blanks, bad UTF-8, bad JSON, one
// line longer than the limit and one longer than a read's buffer.
function input(random: () => number): Uint8Array<ArrayBuffer> {
  const parts: Uint8Array[] = [];
  for (let i = 0; i < 300; i++) {
    const r = random();
    if (r < 0.05) parts.push(encoder.encode("\r\n"));
    else if (r < 0.08) parts.push(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d, 0x0a])); // not UTF-8
    else if (r < 0.1) parts.push(encoder.encode("{not json\n"));
    else {
      const s = "é€😀x".repeat(Math.floor(random() * 20));
      parts.push(encoder.encode(JSON.stringify({ i, s }) + (random() < 0.2 ? "\r\n" : "\n")));
    }
    if (i === 100) parts.push(encoder.encode(JSON.stringify({ long: "y".repeat(300_000) }) + "\n"));
    if (i === 200) {
      parts.push(
        encoder.encode(JSON.stringify({ wide: "z".repeat(READ_BUFFER_BYTES * 2) }) + "\n"),
      );
    }
  }
  parts.push(encoder.encode('{"last":"no newline"}'));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

async function run(source: ReadableStream<Uint8Array> | ByteSource) {
  const sink = textSink();
  const rejects: RejectRecord[] = [];
  const stats = await ingestLines(source, sink, {
    maxLineBytes: 200_000,
    onReject: (r) => void rejects.push(r),
    log: () => {},
  });
  return { stats, texts: sink.texts, rejects };
}

for (const seed of [20261206, Date.now() % 2 ** 31]) {
  Deno.test(`a ByteSource read into one buffer gives what the stream gives (seed ${seed})`, async () => {
    console.log(`seed ${seed}`);
    const random = rng(seed);
    const bytes = input(random);
    const want = await run(new Blob([bytes]).stream());
    const source = pieces(bytes, random);
    const got = await run(source);
    assert.deepEqual(got.stats, want.stats);
    assert.deepEqual(got.texts, want.texts);
    assert.deepEqual(got.rejects, want.rejects);
    assert.equal(source.buffers.size, 1, "every read goes into the same buffer");
    assert.equal([...source.buffers][0].length, READ_BUFFER_BYTES);
    // What the input holds, seen through it: the long line refused, the wide one kept whole.
    assert.ok(want.rejects.some((r) => r.error.startsWith("line is 300011 bytes")));
    assert.ok(want.texts.some((t) => t.length > READ_BUFFER_BYTES * 2));
    assert.equal(want.texts.at(-1), '{"last":"no newline"}');
  });
}

Deno.test("an abort ends a ByteSource's read that never returns", async () => {
  const sink = textSink();
  let reads = 0;
  const never: ByteSource = {
    read(buffer) {
      if (reads++ === 0) {
        buffer.set(encoder.encode('{"a":1}\n'));
        return Promise.resolve(8);
      }
      return new Promise(() => {}); // stdin open and idle
    },
  };
  const stop = new AbortController();
  const events: string[] = [];
  const done = ingestLines(never, sink, {
    signal: stop.signal,
    onEvent: (e) => events.push(e.event),
  });
  while (reads < 2) await new Promise((r) => setTimeout(r, 1));
  stop.abort();
  assert.deepEqual(await done, { lines: 1, accepted: 1, rejected: 0 });
  assert.deepEqual(sink.texts, ['{"a":1}']);
  assert.deepEqual(events, []); // stopped, not the end of the input
  assert.equal(reads, 2); // no read after the abort
});
