/**
 * Client-side parse throughput in batch mode: rows/s through the split + parse
 * path a `Subscription` uses, and through a whole `Subscription` (a `for await`
 * loop over a socket that delivers pre-built batched frames), against plain
 * `JSON.parse` of the same lines.
 *
 * Run alone: deno run -A bench/micro/client_parse.ts [--quick]
 */
import { connect, type WebSocketConstructor } from "../../client/connect.ts";
import { parseLine } from "../../client/_frame.ts";
import { splitBatch } from "../../wire/subscribe.ts";
import { type BenchSection, median, renderSection } from "../harness/report.ts";

const ROWS_PER_FRAME = 64;

function makeLines(n: number): string[] {
  const lines = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const o = 1_000_001 + i;
    lines[i] = `[${o},${
      JSON.stringify({
        event_ts: 1790038800123456 + i,
        symbol: i % 2 ? "BTC-USD" : "ETH-USD",
        price: 85565.12 + (i % 100) / 8,
        amount: 0.015,
        side: i % 2,
        trade_id: 123456789 + i,
      })
    }]`;
  }
  return lines;
}

function makeFrames(lines: string[]): string[] {
  const frames: string[] = [];
  for (let i = 0; i < lines.length; i += ROWS_PER_FRAME) {
    frames.push(lines.slice(i, i + ROWS_PER_FRAME).join("\n"));
  }
  return frames;
}

let sink = 0;

function baseline(lines: string[]): number {
  const t0 = performance.now();
  for (let i = 0; i < lines.length; i++) {
    const v = JSON.parse(lines[i]);
    sink += v[0];
  }
  return lines.length / ((performance.now() - t0) / 1000);
}

function splitParse(frames: string[], rows: number): number {
  const t0 = performance.now();
  for (let f = 0; f < frames.length; f++) {
    const ls = splitBatch(frames[f]);
    for (let i = 0; i < ls.length; i++) {
      const r = parseLine(ls[i]);
      if (r === null) throw new Error("bad line");
      sink += r[0]!;
    }
  }
  return rows / ((performance.now() - t0) / 1000);
}

const GREETING = JSON.stringify({
  streamcast: 2,
  stream: "bench",
  stream_id: "ab".repeat(16),
  end_offset: 1_000_001,
  replay: [1_000_001, 1_000_001],
  log: { name: "bench", archive: null },
  durable: true,
  schema: {},
  frames: "batch",
});

/** A WebSocket that delivers the greeting and `frames` at once, then waits to be closed. */
function fakeSocket(frames: string[]): WebSocketConstructor {
  return class {
    onmessage: ((e: { data: string }) => void) | null = null;
    onclose: ((e: { code: number; reason: string; wasClean: boolean }) => void) | null = null;
    onerror: (() => void) | null = null;
    constructor(_url: string | URL) {
      setTimeout(() => {
        this.onmessage?.({ data: GREETING });
        for (const f of frames) this.onmessage?.({ data: f });
      }, 0);
    }
    close(): void {
      setTimeout(() => this.onclose?.({ code: 1000, reason: "", wasClean: true }), 0);
    }
  } as unknown as WebSocketConstructor;
}

async function subscription(frames: string[], rows: number, raw: boolean): Promise<number> {
  const sub = await connect("ws://bench.invalid/bench", {
    offset: 1_000_001,
    WebSocket: fakeSocket(frames),
  });
  let n = 0;
  const t0 = performance.now();
  if (raw) {
    for await (const [o] of sub.lines()) {
      sink += o!;
      if (++n === rows) break;
    }
  } else {
    for await (const [o] of sub) {
      sink += o!;
      if (++n === rows) break;
    }
  }
  return rows / ((performance.now() - t0) / 1000);
}

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const rows = quick ? 64 * 1000 : 64 * 8000;
  const repeats = quick ? 3 : 7;
  const lines = makeLines(rows);
  const frames = makeFrames(lines);
  const base: number[] = [];
  const split: number[] = [];
  const iter: number[] = [];
  const raw: number[] = [];
  // Interleaved, so drift on a noisy machine hits both sides alike.
  for (let r = 0; r < repeats; r++) {
    base.push(baseline(lines));
    split.push(splitParse(frames, rows));
    base.push(baseline(lines));
    iter.push(await subscription(frames, rows, false));
    raw.push(await subscription(frames, rows, true));
  }
  const b = median(base);
  const row = (name: string, xs: number[], target: string, min: number | null, note: string) => {
    const ours = median(xs);
    return {
      case: name,
      ours,
      baseline: b,
      unit: "rows/s",
      ratio: ours / b,
      target,
      met: min === null ? null : ours / b >= min,
      note,
    };
  };
  if (sink === 0) throw new Error("nothing was parsed");
  return {
    title: "Client parse, batch mode (client/)",
    baseline: "`JSON.parse` of each `[offset,msg]` line, already split, in the same run.",
    rows: [
      row(
        "splitBatch + parseLine per frame",
        split,
        "≥ 0.8× JSON.parse",
        0.8,
        "the per-frame path a Subscription uses",
      ),
      row(
        "Subscription, for await [offset, msg]",
        iter,
        "",
        null,
        "whole iterator: split, parse, offset checks, one promise per row",
      ),
      row(
        "Subscription.lines() (tail's path)",
        raw,
        "",
        null,
        "offset read from the text; msg not parsed",
      ),
    ],
    notes: [
      `${rows} rows of 6 columns (~150 bytes) in frames of ${ROWS_PER_FRAME} rows, median of ` +
      `${repeats} runs. The Subscription rows read frames from an in-memory socket, so they ` +
      `measure the client alone; JSON.parse is the floor for any client that yields parsed ` +
      `rows.`,
    ],
  };
}

if (import.meta.main) {
  const section = await run(Deno.args.includes("--quick"));
  console.log(renderSection(section));
}
