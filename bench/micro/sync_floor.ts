/**
 * The disk's part of one commit, two ways: a 200-byte row appended to a file
 * that grows (as the log's active segment does) and then `syncData`, against
 * the same write and `syncData` into blocks written before (a file
 * pre-zeroed to its full size, written from its start). On ext4 a sync
 * after an append also commits the file's new size and blocks to the
 * filesystem's journal; into written blocks it flushes the data alone. The
 * log does not pre-zero its segments today: this measures what doing so
 * would take off every commit's sync.
 *
 * In rounds, the two in turn (the order reversed every other round); each
 * figure is the median over rounds, the ratio the median of the rounds'.
 *
 * Run alone: deno run -A bench/micro/sync_floor.ts [--quick]
 */
import { type BenchRow, type BenchSection, median, renderSection } from "../harness/report.ts";

const ROW = new TextEncoder().encode("x".repeat(199) + "\n");
const QS = [["p50", 0.5], ["p99", 0.99], ["p99.9", 0.999]] as const;
type Kind = "append" | "prezeroed";

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

// `n` commits of one row each into a fresh file; each commit's syncData in ms, sorted.
async function commits(dir: string, kind: Kind, n: number): Promise<number[]> {
  const path = `${dir}/${kind}`;
  const f = await Deno.open(path, { read: true, write: true, create: true, truncate: true });
  try {
    if (kind === "prezeroed") {
      const zeros = new Uint8Array(ROW.length * n + 4096);
      let done = 0;
      while (done < zeros.length) done += f.writeSync(zeros.subarray(done));
      await f.sync();
      await f.seek(0, Deno.SeekMode.Start);
    }
    const took: number[] = [];
    for (let i = 0; i < n; i++) {
      let done = 0;
      while (done < ROW.length) done += f.writeSync(ROW.subarray(done));
      const t0 = performance.now();
      await f.syncData();
      took.push(performance.now() - t0);
    }
    return took.sort((a, b) => a - b);
  } finally {
    f.close();
    await Deno.remove(path);
  }
}

/** The section: p50, p99 and p99.9 of one commit's sync, pre-zeroed against appended. */
export async function run(quick = false): Promise<BenchSection> {
  const rounds = quick ? 2 : 4;
  const n = quick ? 500 : 2000;
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-sync-" });
  const got: Record<Kind, number[][]> = { append: [], prezeroed: [] };
  try {
    for (let r = 0; r < rounds; r++) {
      const order: Kind[] = r % 2 === 0 ? ["append", "prezeroed"] : ["prezeroed", "append"];
      for (const kind of order) got[kind].push(await commits(dir, kind, n));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  const rows: BenchRow[] = QS.map(([name, q]) => {
    const per = (kind: Kind) => got[kind].map((s) => quantile(s, q));
    const ours = median(per("prezeroed"));
    const baseline = median(per("append"));
    const ratio = median(per("prezeroed").map((x, i) => x / per("append")[i]));
    return {
      case: `${name} of a one-row commit's syncData: into pre-zeroed blocks vs appended`,
      ours,
      baseline,
      unit: "ms",
      ratio,
      target: "",
      met: null,
    };
  });
  return {
    title: "The disk's part of a commit: appended against pre-zeroed (bench/micro/sync_floor.ts)",
    baseline: "the same 200-byte write + syncData appended to a growing file, in the same run.",
    rows,
    notes: [
      `${rounds} rounds of ${n} one-row commits each way, in turn; a fresh file a run, in the ` +
      `temporary folder's filesystem. Lower is better: a ratio under 1× is what pre-zeroed ` +
      `segments would take off each sync.`,
    ],
  };
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
