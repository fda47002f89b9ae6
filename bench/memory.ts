/**
 * Server memory with a thousand subscribers of which half have stalled: the
 * server process (streamcast, durable, batched frames, fsync on) publishes
 * flat out to 1000 subscribers held by the load generator; 500 of them are raw
 * sockets that do the WebSocket handshake and then never read. The server's
 * RSS is read from /proc/PID/status (VmRSS, sampled, and VmHWM, the peak).
 * Baseline: the same server with 1000 reading subscribers.
 *
 * Run alone: deno run -A bench/memory.ts [--quick]
 */
import { type Contender, measure } from "./_harness.ts";
import { type BenchSection, human, renderSection } from "./_report.ts";

const LIMIT_MIB = 256;

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const c: Contender = {
    name: "memory",
    runtime: "deno",
    server: { mode: "streamcast", inflight: 1024 },
    path: "/trades?frames=batch",
  };
  const timing = quick ? { warmupMs: 500, windowMs: 2000 } : { warmupMs: 1000, windowMs: 6000 };
  const base = await measure(c, { subs: 1000, rssEveryMs: 100, ...timing });
  const stalled = await measure(c, { subs: 500, stalled: 500, rssEveryMs: 100, ...timing });
  // A steady feed rather than flat out: 1000 rows/s (a million rows/s delivered
  // in all, within what the load generator can read), one commit per timer tick.
  const paced = { rate: 1000, rssEveryMs: 100, ...timing };
  const pBase = await measure(c, { subs: 1000, ...paced });
  const pStalled = await measure(c, { subs: 500, stalled: 500, ...paced });
  const pPeak = pStalled.rss?.hwm ?? NaN;
  const peak = stalled.rss?.hwm ?? NaN;
  const basePeak = base.rss?.hwm ?? NaN;
  const growth = (stalled.rss?.last ?? NaN) - (stalled.rss?.mid ?? NaN);
  const windowS = timing.windowMs / 1000;
  return {
    title: "Memory with stalled subscribers (server/)",
    baseline:
      "the same server, same publisher, with 1000 reading subscribers (no stalled ones), in the same run.",
    rows: [
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
        limit: `${
          (peak - LIMIT_MIB).toFixed(0)
        } MiB over. The baseline with 1000 reading subscribers is already ${
          basePeak.toFixed(0)
        } MiB: flat out, every commit sends a ~175 KB batched frame to each of the 1000 sockets, and Deno's \`send\` copies it, per socket, into native memory until the kernel takes it: one commit's fan-out makes 1000 copies (~175 MB) in one pass, and the allocator keeps that peak. Sampled during the run, the sockets' \`bufferedAmount\` sums to ~0 and the JavaScript heap stays under ~60 MiB; the rest is that native memory. Frames split at 16 KiB cut the peak by ~100 MiB at some throughput; pacing the live fan-out by bytes per turn made it worse (the queued frames are re-joined per subscriber in the heap). ${
          peak > basePeak * 1.1
            ? `The 500 stalled subscribers add ${(peak - basePeak).toFixed(0)} MiB (${
              ((peak - basePeak) / 500).toFixed(2)
            } MiB each: a full socket buffer, plus queued frames and catch-up reads). `
            : "The stalled subscribers add nothing measurable on top. "
        }RSS first/mid/last in the window ${stalled.rss?.first.toFixed(0)}/${
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
        } MiB. What limits it: each socket may hold up to HIGH_WATER_BYTES (1 MiB, server/subscriber.ts) in Deno's send buffer before the subscriber queues or catches up, and Deno's \`send\` copies each frame into that socket's buffer, so the bound is subscribers × 1 MiB — 500 stalled sockets can hold ~500 MiB.`,
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
    ],
    notes: [
      `Rows are published flat out (groups of 1024 concurrent \`send\`s, fsync on) for ${
        windowS + timing.warmupMs / 1000
      } s after every subscriber got its first row; the stalled sockets (the load generator's raw TCP connections that never read after the handshake, as tests/_raw_ws.ts does) fill their kernel buffers, then the server's (up to the 1 MiB high-water mark per socket), then their queue of up to max_backlog (8192) frames, after which the server sends each back to catching up from the log, where it waits for its socket without holding rows. Rows published: ${
        human(stalled.published)
      } rows/s with stalled subscribers, ${
        human(base.published)
      } rows/s without. The stall timeout (30 s) is longer than the run, so no stalled subscriber is dropped: what is measured is what they cost while they hang on.`,
    ],
  };
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
