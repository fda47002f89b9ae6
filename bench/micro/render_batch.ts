/**
 * Micro-benchmark of replay frame rendering (`renderBatch`, server/frames/text_frames.ts):
 * the rows of one catch-up read of trade rows, from a segment and from a
 * chunk, rendered into batched frames of up to 4096 rows, against two
 * references in the same group: building the same text from JS strings as
 * the live path does (`liveFrame` per row, joined with `\n`), and decoding
 * bytes that already hold the text (the floor: a frame is a JS string).
 *
 * A segment read holds each payload between binary record heads, so the
 * frames are copied out; a chunk read's lines are the frames already, so they
 * are decoded in place.
 *
 * Usage: `deno bench -A bench/micro/render_batch.ts`
 *
 * @module
 */

import { Log, type RecordBatch } from "../../log/mod.ts";
import { liveFrame, MAX_BATCH_ROWS, renderBatch } from "../../server/frames/text_frames.ts";
import { fill } from "../harness/trade_log.ts";

const ROWS = 20_000;
const READ_BYTES = 512 * 1024;

async function readOne(chunks: boolean): Promise<RecordBatch> {
  const root = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
  try {
    await fill(root, ROWS, chunks);
    const log = await Log.open(`${root}/trades`, { chunks, timers: false });
    const reader = log.reader(5001);
    const batch = await reader.read(READ_BYTES);
    reader.close();
    await log.close();
    return batch;
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

function renderAll(batch: RecordBatch): number {
  let bytes = 0;
  for (let i = 0; i < batch.count;) {
    const { text, rows } = renderBatch(batch, i);
    bytes += text.length;
    i += rows;
  }
  return bytes;
}

const decoder = new TextDecoder();

for (const [source, chunks] of [["segment", false], ["chunk", true]] as const) {
  const batch = await readOne(chunks);
  const group = `render ${batch.count} rows read from a ${source}`;
  const jsons: string[] = [];
  for (let i = 0; i < batch.count; i++) {
    const s = batch.starts[i];
    jsons.push(decoder.decode(batch.buf.subarray(s, s + batch.lengths[i])));
  }
  const textBytes: Uint8Array[] = [];
  for (let i = 0; i < batch.count;) {
    const { text, rows } = renderBatch(batch, i);
    textBytes.push(new TextEncoder().encode(text));
    i += rows;
  }

  Deno.bench(`renderBatch (${source})`, { group, baseline: true }, () => {
    renderAll(batch);
  });

  Deno.bench(`liveFrame + join of the same rows (${source})`, { group }, () => {
    for (let i = 0; i < jsons.length; i += MAX_BATCH_ROWS) {
      const frames: string[] = [];
      const end = Math.min(jsons.length, i + MAX_BATCH_ROWS);
      for (let k = i; k < end; k++) frames.push(liveFrame(batch.offsets[k], jsons[k]));
      frames.join("\n");
    }
  });

  Deno.bench(`decode the finished text only (${source}; the floor)`, { group }, () => {
    for (const b of textBytes) decoder.decode(b);
  });
}
