/**
 * compress=zstd-stream end to end (docs/SPEC.md §2.6.1), in the same run as its peers,
 * on 127.0.0.1: a server process publishing live at 500 rows/s, one row per
 * commit, to 1, 10, 100 and 1000 subscribers (one load-generator process with
 * the `ws` client, which negotiates permessage-deflate where offered):
 *
 * - bytes per row on the wire (read off each subscriber's TCP socket:
 *   WebSocket headers and the greeting included) for plain batched frames,
 *   `compress=zstd`, `compress=zstd-dict`, `compress=zstd-stream` and
 *   per-connection permessage-deflate (Node `ws`, context kept), trade rows
 *   and the nested row;
 * - server CPU per delivered row (the server process's CPU time over the rows
 *   its subscribers received) for the same five, trade rows.
 *
 * Targets: zstd-stream's bytes a row ≤ permessage-deflate's; its server CPU
 * per delivered row at 1000 subscribers ≤ 1.2× plain batched frames, and at
 * 10 subscribers ≤ 1× permessage-deflate's (the most at which the Node `ws`
 * server keeps up with the feed on this machine).
 *
 * The default run is one round of 3 s per contender (trade rows' CPU at 1,
 * 10, 100 and 1000 subscribers); `--quick` drops the 1000; the long version
 * (BENCH_ZSTD_STREAM_E2E_LONG=1) takes the median of three rounds of 6 s and
 * measures the nested row's CPU too.
 *
 * Run alone: deno run --config deno.dev.json -A bench/run.ts --only zstd_stream
 */
import { ensureNodeWs } from "../harness/contenders.ts";
import { type BenchRow, benchRow as row, type BenchSection } from "../harness/report.ts";
import { type Contender, live, type Run } from "./compress.ts";
import type { Kind } from "../harness/compress_rows.ts";

const CONTENDERS: Contender[] = ["plain", "zstd", "zstd-dict", "zstd-stream", "deflate"];

const perRowBytes = (x: Run) => x.bytes / Math.max(1, x.rows);
const perRowCpu = (x: Run) => x.serverCpuUs * 1000 / Math.max(1, x.rows);

// Subscribers at which zstd-stream's server CPU per delivered row has a target
// against permessage-deflate's: the most at which the Node `ws` server kept up
// with 500 rows/s here (see the section's notes).
const DEFLATE_TARGET_SUBS = 10;

// zstd-stream's server CPU per delivered row against permessage-deflate's, at
// `subs` subscribers (the target at DEFLATE_TARGET_SUBS, trade rows, while
// permessage-deflate delivered at least 90 % of its rows).
function vsDeflate(
  kind: Kind,
  subs: number,
  r: Record<Contender, Run>,
  share: (x: Run) => number,
  delivered: (x: Run) => string,
): BenchRow {
  const stream = perRowCpu(r["zstd-stream"]);
  const deflate = perRowCpu(r.deflate);
  const kept = share(r.deflate) >= 0.9;
  const target = kind === "trade" && subs === DEFLATE_TARGET_SUBS;
  const missed = target && !(kept && stream <= deflate);
  return {
    ...row(
      `${kind} row, ${subs} subscriber${subs > 1 ? "s" : ""}: zstd-stream vs permessage-deflate`,
      stream,
      deflate,
      "ns/delivered row",
      target ? "≤ 1×" : "",
      target ? kept && stream <= deflate : null,
      `zstd-stream ${delivered(r["zstd-stream"])}; permessage-deflate ${delivered(r.deflate)}` +
        (kept ? "" : " (it fell behind: its figure is not a cost per row)"),
    ),
    ...(missed
      ? {
        limit: kept
          ? `${(stream / deflate).toFixed(2)}× permessage-deflate's CPU per delivered row in ` +
            "one round on a shared 2-core machine; not profiled"
          : "permessage-deflate delivered under 90 % of its rows, so the two are not " +
            "compared at this count in this run",
      }
      : {}),
  };
}

/** Runs the zstd-stream end-to-end benchmarks. */
export async function run(quick: boolean): Promise<BenchSection[]> {
  await ensureNodeWs();
  const long = Deno.env.get("BENCH_ZSTD_STREAM_E2E_LONG") === "1";
  const seconds = long ? 6 : quick ? 2 : 3;
  const rounds = long ? 3 : 1;
  const bytesRows: BenchRow[] = [];
  for (const kind of ["trade", "nested"] as Kind[]) {
    const r: Partial<Record<Contender, Run>> = {};
    for (const c of CONTENDERS) {
      r[c] = await live(c, kind, 1, 500, 1, seconds);
      console.error(`bench: zstd_stream_e2e bytes ${kind} ${c}: ${JSON.stringify(r[c])}`);
    }
    const deflate = perRowBytes(r.deflate!);
    const stream = perRowBytes(r["zstd-stream"]!);
    const zs = r["zstd-stream"]!;
    bytesRows.push({
      ...row(
        `${kind} row: zstd-stream vs permessage-deflate`,
        stream,
        deflate,
        "B/row",
        kind === "trade" ? "≤ 1.0×" : "",
        kind === "trade" ? stream <= deflate : null,
        `plain ${perRowBytes(r.plain!).toFixed(1)}, zstd ${perRowBytes(r.zstd!).toFixed(1)}, ` +
          `zstd + dictionary ${perRowBytes(r["zstd-dict"]!).toFixed(1)} B/row`,
      ),
      ...(kind === "trade" && stream > deflate
        ? {
          limit: `${(stream / deflate).toFixed(2)}× permessage-deflate's bytes a row in one ` +
            `round of ${seconds} s; zstd-stream made ${zs.zstdFrames} compressions for ` +
            `${zs.published} rows (commits merge when an fsync is slow, so the rows a ` +
            "message vary with the machine's load from run to run); not profiled",
        }
        : {}),
    });
    for (const c of ["plain", "zstd", "zstd-dict", "deflate"] as Contender[]) {
      bytesRows.push(
        row(
          `${kind} row: ${c === "deflate" ? "permessage-deflate" : c} vs zstd-stream`,
          perRowBytes(r[c]!),
          stream,
          "B/row",
        ),
      );
    }
  }
  const cpuRows: BenchRow[] = [];
  const deflateRows: BenchRow[] = [];
  const counts = quick ? [1, 10, 100] : [1, 10, 100, 1000];
  for (const kind of (long ? ["trade", "nested"] : ["trade"]) as Kind[]) {
    for (const subs of counts) {
      // Rounds of the five in turn; each contender's median round (by CPU per
      // delivered row), so a burst of load elsewhere on the machine hits all alike.
      const all: Partial<Record<Contender, Run[]>> = {};
      for (let k = 0; k < rounds; k++) {
        for (const c of CONTENDERS) {
          const x = await live(c, kind, subs, 500, 1, seconds);
          console.error(`bench: zstd_stream_e2e cpu ${kind} ${subs} ${c}: ${JSON.stringify(x)}`);
          (all[c] ??= []).push(x);
        }
      }
      const r = {} as Record<Contender, Run>;
      for (const c of CONTENDERS) {
        const xs = [...all[c]!].sort((a, b) => perRowCpu(a) - perRowCpu(b));
        r[c] = xs[xs.length >> 1];
      }
      const plain = perRowCpu(r.plain);
      const share = (x: Run) => x.rows / Math.max(1, x.published * subs);
      const delivered = (x: Run) =>
        `delivered ${(100 * share(x)).toFixed(0)} % of ${x.published * subs} rows`;
      deflateRows.push(vsDeflate(kind, subs, r, share, delivered));
      for (const c of ["zstd-stream", "zstd", "zstd-dict", "deflate"] as Contender[]) {
        const target = c === "zstd-stream" && subs === 1000 && kind === "trade";
        const x = r[c];
        const missed = target && perRowCpu(x) / plain > 1.2;
        cpuRows.push({
          ...row(
            `${kind} row, ${subs} subscriber${subs > 1 ? "s" : ""}: ` +
              `${c === "deflate" ? "permessage-deflate" : c} vs plain batch`,
            perRowCpu(x),
            plain,
            "ns/delivered row",
            target ? "≤ 1.2×" : "",
            target ? perRowCpu(x) / plain <= 1.2 : null,
            `${delivered(x)}; plain ${delivered(r.plain)}` +
              (c === "deflate" ? "" : `; ${x.zstdFrames} compressions for ${x.published} rows`),
          ),
          ...(missed
            ? {
              limit: `${(perRowCpu(x) / plain).toFixed(2)}× in one round of ${seconds} s on a ` +
                "shared 2-core machine, the load generator on the same cores; plain zstd " +
                `(binary frames too, compressed once a commit) ${
                  (perRowCpu(r.zstd) / plain).toFixed(2)
                }× in the same run. The group's compressions are once a commit (the note's ` +
                "count), a few µs each; what else a delivered row costs was not profiled",
            }
            : {}),
        });
      }
    }
  }
  const notes = [
    "Live 500 rows/s, one row per commit (`Stream.send` per row, paced by timers). Bytes are " +
    "read off each subscriber's TCP socket (the `ws` client's bytesRead): WebSocket headers " +
    "and the greeting count. permessage-deflate: Node `ws` with perMessageDeflate " +
    "{threshold: 0} (context kept per connection), the `ws` client negotiating it. " +
    "zstd-dict: the stream's raw-content dictionary, built from 1000 rows stored before the " +
    "subscribers come. The load generator decodes each distinct message once (every member " +
    "of a group is sent the same bytes) so that it keeps up; with 1000 subscribers it is one " +
    "process on the same 2 cores as the server, which caps what is delivered.",
  ];
  return [
    {
      title: "compress=zstd-stream end to end: bytes per row on the wire (live, 1 row per commit)",
      baseline: "permessage-deflate per connection (Node `ws`, context kept), same run",
      rows: bytesRows,
      notes,
    },
    {
      title:
        "compress=zstd-stream end to end: server CPU per delivered row (live, 1 row per commit)",
      baseline: "plain batched text frames (frames=batch), same server, same run",
      rows: cpuRows,
    },
    {
      title: "compress=zstd-stream end to end: server CPU per delivered row against " +
        "permessage-deflate (live, 1 row per commit)",
      baseline: "permessage-deflate per connection (Node `ws` server, context kept), the same " +
        "feed and subscriber counts, same run",
      rows: deflateRows,
      notes: [
        "The runs of the section above, compared the other way: zstd-stream's server CPU per " +
        "delivered row against permessage-deflate's — compressing once a commit for every " +
        "member of a group against compressing once a commit for each connection (SPEC.md " +
        "§2.6.1). streamcast's server does not offer permessage-deflate (Deno's WebSocket server " +
        "does not negotiate it), so the peer is a Node `ws` server " +
        "(bench/harness/compress_node.mjs) sending the same batched frames; the server CPU is each " +
        "process's own (`process.cpuUsage`, zlib's worker threads included). " +
        `The target is at ${DEFLATE_TARGET_SUBS} subscribers: the most at which ` +
        "permessage-deflate delivered every row at 500 rows/s on this machine when the counts " +
        "were chosen (at 30 its server was at 100 % of a core and delivered 78 %; at 100 and " +
        "1000 it delivers a small share, so its CPU per delivered row there is what it spent " +
        "falling behind, not a cost per row). Each row's note gives both delivered shares; a " +
        "comparison where permessage-deflate delivered under 90 % has no target.",
      ],
    },
  ];
}

if (import.meta.main) {
  const { renderSection } = await import("../harness/report.ts");
  for (const s of await run(Deno.args.includes("--quick"))) console.log(renderSection(s));
}
