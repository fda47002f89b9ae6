/**
 * Server memory with a thousand subscribers of which half have stalled: the
 * server process (streamcast, durable, batched frames, fsync on) publishes
 * flat out to 1000 subscribers held by the load generator; 500 of them are raw
 * sockets that do the WebSocket handshake and then never read. The server's
 * RSS is read from /proc/PID/status (VmRSS, sampled, and VmHWM, the peak).
 * Baseline: the same server with 1000 reading subscribers.
 *
 * The ways of sending live frames, each measured against **one pass** —
 * every commit handed to every socket in one synchronous pass, through each
 * socket's own write buffer (`fanoutTurnBytes` 0, no vectored writes) — in
 * the same run (see server/fanout/fanout_pacer.ts, server/vectored_writes.ts,
 * server/fanout/live_pieces.ts, docs/SPEC.md §3.4.3):
 * - the default: paced fan-out (8 MiB of copies a turn), vectored writes,
 *   batched commits cut to the socket's share;
 * - paced only (the runtime's write buffers kept); vectored writes only;
 * - the default with binary frames (the same text as one shared Uint8Array);
 * - a reference, not a server: raw TCP connections each written ONE shared
 *   buffer of pre-framed WebSocket frames with `Deno.Conn.write` (what a
 *   hand-framed WebSocket path would cost).
 *
 * Run alone: deno run -A bench/e2e/memory.ts [--quick]
 */
import {
  type CaseResult,
  type Contender,
  measure,
  type MeasureOptions,
} from "../harness/contenders.ts";
import { type BenchRow, type BenchSection, human, renderSection } from "../harness/report.ts";
import type { ServerConfig } from "../harness/fanout_server.ts";

const LIMIT_MIB = 256;

type Live = NonNullable<ServerConfig["live"]>;

/** Every commit in one pass through the runtime's write buffers: no fan-out turn, no writev. */
const ONE_PASS: Live = { turnBytes: 0, writev: false };

interface Variant {
  name: string;
  contender: Contender;
  /** Also measured with 1000 reading subscribers. */
  reading: boolean;
  binaryText?: boolean;
}

function contender(live: Live = {}): Contender {
  return {
    name: "memory",
    runtime: "deno",
    server: { mode: "streamcast", inflight: 1024, live },
    path: "/trades?frames=batch",
  };
}

const VARIANTS: Variant[] = [
  {
    name: "paced only (8 MiB a turn; write buffers kept)",
    contender: contender({ writev: false }),
    reading: true,
  },
  {
    name: "vectored writes only (one pass)",
    contender: contender({ turnBytes: 0 }),
    reading: true,
  },
  {
    name: "the default with binary frames (one shared Uint8Array a commit)",
    contender: contender({ binary: true }),
    reading: false,
    binaryText: true,
  },
  {
    name:
      "reference: raw TCP, one shared buffer of pre-framed 1024-row frames, Deno.Conn.write per connection",
    contender: {
      name: "raw shared",
      runtime: "deno",
      server: { mode: "raw", rowsPerFrame: 1024, framesPerWrite: 1, independent: true },
      path: "/",
    },
    reading: true,
  },
];

const heapNote = (r: CaseResult) =>
  r.heap
    ? `JS heap used ${r.heap.used.toFixed(0)} MiB, external ${r.heap.external.toFixed(0)} MiB` +
      (Number.isFinite(r.heap.buffered)
        ? `, handed to send ${r.heap.buffered!.toFixed(0)} MiB`
        : "")
    : "";

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const c = contender();
  const timing = quick ? { warmupMs: 500, windowMs: 2000 } : { warmupMs: 1000, windowMs: 4000 };
  const flat = { rssEveryMs: 100, ...timing };
  const stalledOf = (o: Partial<MeasureOptions> = {}) => ({
    subs: 500,
    stalled: 500,
    ...flat,
    ...o,
  });
  const readingOf = (subs: number, o: Partial<MeasureOptions> = {}) => ({ subs, ...flat, ...o });
  const base = await measure(c, readingOf(1000));
  const stalled = await measure(c, stalledOf());
  const base100 = await measure(c, readingOf(100));
  const one = contender(ONE_PASS);
  const oStalled = await measure(one, stalledOf());
  const oBase = await measure(one, readingOf(1000));
  const oBase100 = await measure(one, readingOf(100));
  const variants: { v: Variant; stalled: CaseResult; reading: CaseResult | null }[] = [];
  for (const v of VARIANTS) {
    const extra = v.binaryText ? { binaryText: true } : {};
    variants.push({
      v,
      stalled: await measure(v.contender, stalledOf(extra)),
      reading: v.reading ? await measure(v.contender, readingOf(1000, extra)) : null,
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
  const oPeak = oStalled.rss?.hwm ?? NaN;
  const oBasePeak = oBase.rss?.hwm ?? NaN;
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
      limit: `${(peak - LIMIT_MIB).toFixed(0)} MiB over; with 1000 reading subscribers ${
        basePeak.toFixed(0)
      } MiB; in one pass (before the fan-out turn) ${oPeak.toFixed(0)} MiB stalled, ${
        oBasePeak.toFixed(0)
      } MiB reading. At the end of the window: ${
        heapNote(stalled)
      }. RSS first/mid/last in the window ${stalled.rss?.first.toFixed(0)}/${
        stalled.rss?.mid.toFixed(0)
      }/${stalled.rss?.last.toFixed(0)} MiB.`,
      note: `${heapNote(stalled)}; subscribers ${stalled.heap?.states ?? "?"}`,
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
      case: "the default vs one pass: peak RSS, 500 stalled",
      ours: peak,
      baseline: oPeak,
      unit: "MiB",
      ratio: peak / oPeak,
      target: "",
      met: null,
      serverCpu: [stalled.serverCpu, oStalled.serverCpu],
      genCpu: [stalled.genCpu, oStalled.genCpu],
      note: `one pass: ${heapNote(oStalled)}; subscribers ${oStalled.heap?.states ?? "?"}`,
    },
    {
      case: "the default vs one pass: peak RSS, 1000 reading",
      ours: basePeak,
      baseline: oBasePeak,
      unit: "MiB",
      ratio: basePeak / oBasePeak,
      target: "",
      met: null,
      note: `the default: ${heapNote(base)}; one pass: ${heapNote(oBase)}`,
    },
    {
      case: "the default vs one pass: batched rows/s delivered, 1000 reading",
      ours: base.rate,
      baseline: oBase.rate,
      unit: "rows/s",
      ratio: base.rate / oBase.rate,
      target: "≥ 0.90×",
      met: base.rate / oBase.rate >= 0.9,
      serverCpu: [base.serverCpu, oBase.serverCpu],
      genCpu: [base.genCpu, oBase.genCpu],
    },
    {
      case: "the default vs one pass: batched rows/s delivered, 100 reading",
      ours: base100.rate,
      baseline: oBase100.rate,
      unit: "rows/s",
      ratio: base100.rate / oBase100.rate,
      target: "≥ 0.90×",
      met: base100.rate / oBase100.rate >= 0.9,
      serverCpu: [base100.serverCpu, oBase100.serverCpu],
      genCpu: [base100.genCpu, oBase100.genCpu],
      note: `peak RSS ${(base100.rss?.hwm ?? NaN).toFixed(0)} MiB (one pass ${
        (oBase100.rss?.hwm ?? NaN).toFixed(0)
      } MiB)`,
    },
  ];
  for (const { v, stalled: s, reading: r } of variants) {
    rows.push({
      case: `variant ${v.name}: peak RSS, 500 stalled, vs one pass`,
      ours: s.rss?.hwm ?? NaN,
      baseline: oPeak,
      unit: "MiB",
      ratio: (s.rss?.hwm ?? NaN) / oPeak,
      target: "",
      met: null,
      serverCpu: [s.serverCpu, oStalled.serverCpu],
      genCpu: [s.genCpu, oStalled.genCpu],
      note: `${human(s.rate)} rows/s delivered (one pass ${human(oStalled.rate)}); ${heapNote(s)}`,
    });
    if (r) {
      rows.push({
        case: `variant ${v.name}: peak RSS, 1000 reading, vs one pass`,
        ours: r.rss?.hwm ?? NaN,
        baseline: oBasePeak,
        unit: "MiB",
        ratio: (r.rss?.hwm ?? NaN) / oBasePeak,
        target: "",
        met: null,
      });
      rows.push({
        case: `variant ${v.name}: rows/s delivered, 1000 reading, vs one pass`,
        ours: r.rate,
        baseline: oBase.rate,
        unit: "rows/s",
        ratio: r.rate / oBase.rate,
        target: "",
        met: null,
        serverCpu: [r.serverCpu, oBase.serverCpu],
        genCpu: [r.genCpu, oBase.genCpu],
      });
    }
  }
  return {
    title: "Memory with stalled subscribers (server/)",
    baseline:
      "the same server, same publisher, with 1000 reading subscribers (no stalled ones), in the same run; for the ways of sending, the server handing whole commits to every socket in one pass through the runtime's write buffers (before the fan-out turn), in the same run.",
    rows,
    notes: [
      `Rows are published flat out (groups of 1024 concurrent \`send\`s, fsync on) for ${
        windowS + timing.warmupMs / 1000
      } s after every subscriber got its first row; the stalled sockets (the load generator's raw TCP connections that never read after the handshake, as tests/harness/raw_ws.ts does) fill their kernel buffers, then their share of the server's send buffer (64 MiB shared by 1000 sockets: 64 KiB each), then their queue of up to max_backlog (8192) rows, after which the server sends each back to catching up from the log, where it waits for its socket without holding rows. Rows published: ${
        human(stalled.published)
      } rows/s with stalled subscribers, ${human(base.published)} rows/s without (one pass: ${
        human(oStalled.published)
      } and ${
        human(oBase.published)
      }). The stall timeout (30 s) is longer than the run, so no stalled subscriber is dropped: what is measured is what they cost while they hang on.`,
      `What the server held at the end of each window, 500 stalled: the default ${
        heapNote(stalled)
      } (subscribers ${stalled.heap?.states ?? "?"}); one pass ${heapNote(oStalled)} (${
        oStalled.heap?.states ?? "?"
      }); ${
        variants.map(({ v, stalled: x }) => `${v.name}: ${heapNote(x)}`).join("; ")
      }. With 1000 reading: the default ${heapNote(base)}; one pass ${heapNote(oBase)}.`,
      "Where the memory went in one pass: Deno's `send` copies the frame into a buffer of that socket's own, and (without `DENO_USE_WRITEV`) the socket's writer copies it again into a write buffer that is cleared but never shrunk, so every socket kept a buffer the size of the biggest commit it was ever sent (1000 × 175–350 KB), whatever the send buffer allowed; and one commit handed to 1000 sockets in one synchronous pass made 1000 copies before any was written. The default writes each frame straight from `send`'s copy (vectored writes) and hands a commit out at most 8 MiB of copies per turn of the event loop (the runtime writes and frees them between turns). Binary frames are copied per socket just the same (a `Uint8Array` is `to_vec`'d); no API of Deno's WebSocket lets sockets share one buffer, while `Deno.Conn.write` of one shared buffer keeps a reference (the raw reference row).",
    ],
  };
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
