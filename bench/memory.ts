/**
 * Server memory with a thousand subscribers of which half have stalled: the
 * server process (streamcast, durable, batched frames, fsync on) publishes
 * flat out to 1000 subscribers held by the load generator; 500 of them are raw
 * sockets that do the WebSocket handshake and then never read. The server's
 * RSS is read from /proc/PID/status (VmRSS, sampled, and VmHWM, the peak).
 * Baseline: the same server with 1000 reading subscribers.
 *
 * Variants of how live frames are sent, measured in the same run (see
 * server/live_pieces.ts, `sendBufferBytes` in server/limits.ts and
 * server/allocator.ts):
 * - whole commits, allocator as is: each commit one batched frame (how the
 *   first wave sent); the baseline of the variants;
 * - whole commits, mmap threshold pinned (what `cli.ts serve` does by
 *   default), each socket handed frames while under its share of the 64 MiB
 *   send buffer;
 * - 16 KiB pieces, queue (pinned, and not): a commit cut into shared pieces,
 *   each subscriber handed what fits its share, the rest queued as references
 *   to the shared pieces;
 * - 16 KiB pieces, cursor: over its share a subscriber goes straight back to
 *   the log, keeping only its next offset;
 * - 64 KiB pieces, queue; and 16 KiB pieces with a 16 MiB send buffer.
 *
 * Run alone: deno run -A bench/memory.ts [--quick]
 */
import { type CaseResult, type Contender, measure } from "./_harness.ts";
import { type BenchRow, type BenchSection, human, renderSection } from "./_report.ts";
import type { ServerConfig } from "./_fanout_server.ts";

const LIMIT_MIB = 256;

type Live = NonNullable<ServerConfig["live"]>;

interface Variant {
  name: string;
  live: Live;
  /** Also measured with 1000 reading subscribers. */
  reading: boolean;
  /** Extra deno flags of the server process. */
  denoFlags?: string[];
}

const WHOLE: Variant = {
  name: "whole commits, allocator as is (the first wave)",
  live: { pieceBytes: null, pinMalloc: false },
  reading: true,
};
const VARIANTS: Variant[] = [
  {
    name: "16 KiB pieces, queue, mmap threshold pinned",
    live: { pieceBytes: 16 * 1024 },
    reading: true,
  },
  {
    name: "16 KiB pieces, queue, allocator as is",
    live: { pieceBytes: 16 * 1024, pinMalloc: false },
    reading: true,
  },
  {
    name: "16 KiB pieces, cursor (back to the log)",
    live: { pieceBytes: 16 * 1024, fallBehind: "cursor" },
    reading: true,
  },
  { name: "64 KiB pieces, queue", live: { pieceBytes: 64 * 1024 }, reading: false },
  {
    name: "16 KiB pieces, queue, 16 MiB send buffer",
    live: { pieceBytes: 16 * 1024, sendBufferBytes: 16 << 20 },
    reading: false,
  },
  {
    name: "whole commits, pinned, V8 --max-semi-space-size=4",
    live: {},
    reading: true,
    denoFlags: ["--v8-flags=--max-semi-space-size=4"],
  },
];

function contender(live: Live = {}): Contender {
  return {
    name: "memory",
    runtime: "deno",
    server: { mode: "streamcast", inflight: 1024, live },
    path: "/trades?frames=batch",
  };
}

const heapNote = (r: CaseResult) =>
  r.heap
    ? `JS heap used ${r.heap.used.toFixed(0)} MiB, external ${r.heap.external.toFixed(0)} MiB`
    : "";

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const c = contender();
  const timing = quick ? { warmupMs: 500, windowMs: 2000 } : { warmupMs: 1000, windowMs: 6000 };
  const flat = { rssEveryMs: 100, ...timing };
  const base = await measure(c, { subs: 1000, ...flat });
  const stalled = await measure(c, { subs: 500, stalled: 500, ...flat });
  const wStalled = await measure(contender(WHOLE.live), { subs: 500, stalled: 500, ...flat });
  const wBase = await measure(contender(WHOLE.live), { subs: 1000, ...flat });
  const variants: { v: Variant; stalled: CaseResult; reading: CaseResult | null }[] = [];
  for (const v of VARIANTS) {
    variants.push({
      v,
      stalled: await measure(contender(v.live), {
        subs: 500,
        stalled: 500,
        denoFlags: v.denoFlags,
        ...flat,
      }),
      reading: v.reading
        ? await measure(contender(v.live), { subs: 1000, denoFlags: v.denoFlags, ...flat })
        : null,
    });
  }
  // A steady feed rather than flat out: 1000 rows/s (a million rows/s delivered
  // in all, within what the load generator can read), one commit per timer tick.
  const paced = { rate: 1000, rssEveryMs: 100, ...timing };
  const pBase = await measure(c, { subs: 1000, ...paced });
  const pStalled = await measure(c, { subs: 500, stalled: 500, ...paced });
  const pPeak = pStalled.rss?.hwm ?? NaN;
  const peak = stalled.rss?.hwm ?? NaN;
  const basePeak = base.rss?.hwm ?? NaN;
  const wPeak = wStalled.rss?.hwm ?? NaN;
  const growth = (stalled.rss?.last ?? NaN) - (stalled.rss?.mid ?? NaN);
  const windowS = timing.windowMs / 1000;
  const rows: BenchRow[] = [
    {
      case: "peak RSS (VmHWM), 1000 subscribers of which 500 stalled",
      ours: peak,
      baseline: basePeak,
      unit: "MiB",
      ratio: peak / basePeak,
      target: `≤ ${LIMIT_MIB} MiB`,
      met: peak <= LIMIT_MIB,
      serverCpu: [stalled.serverCpu, base.serverCpu],
      genCpu: [stalled.genCpu, base.genCpu],
      limit:
        `${(peak - LIMIT_MIB).toFixed(0)} MiB over; with 1000 reading subscribers ${
          basePeak.toFixed(0)
        } MiB, and with whole-commit frames (the first wave's way) ${wPeak.toFixed(0)} MiB ` +
        `stalled, ${(wBase.rss?.hwm ?? NaN).toFixed(0)} MiB reading. At the end of the window: ${
          heapNote(stalled)
        }. RSS first/mid/last in the window ${stalled.rss?.first.toFixed(0)}/${
          stalled.rss?.mid.toFixed(0)
        }/${stalled.rss?.last.toFixed(0)} MiB.`,
    },
    {
      case: "peak RSS, the same at 1000 rows/s (a steady feed, not flat out)",
      ours: pPeak,
      baseline: pBase.rss?.hwm ?? NaN,
      unit: "MiB",
      ratio: pPeak / (pBase.rss?.hwm ?? NaN),
      target: `≤ ${LIMIT_MIB} MiB`,
      met: pPeak <= LIMIT_MIB,
      serverCpu: [pStalled.serverCpu, pBase.serverCpu],
      genCpu: [pStalled.genCpu, pBase.genCpu],
      limit: `${(pPeak - LIMIT_MIB).toFixed(0)} MiB over; without stalled subscribers ${
        (pBase.rss?.hwm ?? NaN).toFixed(0)
      } MiB.`,
    },
    {
      case: "RSS growth over the second half of the window, 500 stalled",
      ours: growth,
      baseline: (base.rss?.last ?? NaN) - (base.rss?.mid ?? NaN),
      unit: "MiB",
      ratio: NaN,
      target: "no growth with the backlog",
      met: null,
    },
    {
      case: "rows/s delivered to the reading subscribers",
      ours: stalled.rate,
      baseline: base.rate,
      unit: "rows/s",
      ratio: stalled.rate / base.rate,
      target: "",
      met: null,
    },
    {
      case:
        "whole commits, mmap threshold pinned (the default): peak RSS, 500 stalled, vs the first wave",
      ours: peak,
      baseline: wPeak,
      unit: "MiB",
      ratio: peak / wPeak,
      target: "",
      met: null,
      serverCpu: [stalled.serverCpu, wStalled.serverCpu],
      genCpu: [stalled.genCpu, wStalled.genCpu],
    },
    {
      case:
        "whole commits, mmap threshold pinned (the default): rows/s delivered, 1000 reading, vs the first wave",
      ours: base.rate,
      baseline: wBase.rate,
      unit: "rows/s",
      ratio: base.rate / wBase.rate,
      target: "",
      met: null,
      serverCpu: [base.serverCpu, wBase.serverCpu],
      genCpu: [base.genCpu, wBase.genCpu],
    },
  ];
  for (const { v, stalled: s, reading: r } of variants) {
    rows.push({
      case: `variant ${v.name}: peak RSS, 500 stalled, vs the first wave`,
      ours: s.rss?.hwm ?? NaN,
      baseline: wPeak,
      unit: "MiB",
      ratio: (s.rss?.hwm ?? NaN) / wPeak,
      target: "",
      met: null,
      serverCpu: [s.serverCpu, wStalled.serverCpu],
      genCpu: [s.genCpu, wStalled.genCpu],
      note: heapNote(s),
    });
    rows.push({
      case: `variant ${v.name}: rows/s delivered, 500 stalled, vs the first wave`,
      ours: s.rate,
      baseline: wStalled.rate,
      unit: "rows/s",
      ratio: s.rate / wStalled.rate,
      target: "",
      met: null,
    });
    if (r) {
      rows.push({
        case: `variant ${v.name}: peak RSS and rows/s, 1000 reading, vs the first wave`,
        ours: r.rss?.hwm ?? NaN,
        baseline: wBase.rss?.hwm ?? NaN,
        unit: "MiB",
        ratio: (r.rss?.hwm ?? NaN) / (wBase.rss?.hwm ?? NaN),
        target: "",
        met: null,
        note: `${human(r.rate)} rows/s delivered (the first wave ${human(wBase.rate)}); ${
          heapNote(r)
        }`,
      });
    }
  }
  return {
    title: "Memory with stalled subscribers (server/)",
    baseline:
      "the same server, same publisher, with 1000 reading subscribers (no stalled ones), in the same run; for the variants, the server sending whole-commit frames (the first wave's way) in the same run.",
    rows,
    notes: [
      `Rows are published flat out (groups of 1024 concurrent \`send\`s, fsync on) for ${
        windowS + timing.warmupMs / 1000
      } s after every subscriber got its first row; the stalled sockets (the load generator's raw TCP connections that never read after the handshake, as tests/_raw_ws.ts does) fill their kernel buffers, then their share of the server's send buffer (64 MiB shared by 1000 sockets: 64 KiB each), then their queue of up to max_backlog (8192) rows of shared pieces, after which the server sends each back to catching up from the log, where it waits for its socket without holding rows. Rows published: ${
        human(stalled.published)
      } rows/s with stalled subscribers, ${human(base.published)} rows/s without (whole commits: ${
        human(wStalled.published)
      } and ${
        human(wBase.published)
      }). The stall timeout (30 s) is longer than the run, so no stalled subscriber is dropped: what is measured is what they cost while they hang on.`,
      "Why whole commits cost so much: Deno's `send` copies the frame into each socket's own buffer (a Rust `Vec`, outside the JavaScript heap and its external memory), so one flat-out commit of ~175 KB fanned out to 1000 sockets makes ~175 MB of copies in one synchronous pass, and the allocator keeps that peak. Cut into 16 KiB pieces, each socket is handed only what fits its share, so one pass copies at most about the send buffer (64 MiB). Binary frames would not help: Deno copies a `Uint8Array` per socket just the same (`to_vec`), and the protocol's batched frames are text. No API of Deno's WebSocket lets sockets share one buffer.",
    ],
  };
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
