// A log of trade rows on disk, for the benchmarks that read one back.
import { Stream } from "../../server/stream/stream.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";

/**
 * Fills `ROOT/trades` with `rows` trade rows (sealed into chunks when
 * `chunks`), in segments of `segmentBytes` (the log's default when not given).
 */
export async function fill(
  root: string,
  rows: number,
  chunks: boolean,
  segmentBytes?: number,
): Promise<void> {
  const stream = await Stream.open("trades", {
    schema: SCHEMA,
    root,
    logOptions: { chunks, timers: false, ...(segmentBytes ? { segmentBytes } : {}) },
  });
  const make = tradeRows(7);
  for (let i = 0; i < rows; i += 5000) {
    await stream.sendMany(Array.from({ length: Math.min(5000, rows - i) }, (_, k) => make(i + k)));
  }
  if (chunks) {
    await stream.log!.roll();
    await stream.log!.chunks.settled();
  }
  await stream.close();
}
