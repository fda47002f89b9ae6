/**
 * Runs every benchmark and writes docs/PERFORMANCE.md (and docs/fanout.svg).
 *
 * deno task bench            full run (about 12 minutes)
 * deno task bench --quick    short runs, for checking the benchmarks work (under 3 minutes)
 * deno task bench --only log_append            run some (comma-separated), print only
 * deno task bench --update --only publish,follow
 *                           run some and replace their sections (and their rows of the
 *                           targets table) in the existing docs/PERFORMANCE.md
 *
 * The Node contender of the fan-out benchmark needs `ws` (pinned in
 * deno.dev.json); the benchmark runs `deno install` when node_modules lacks it.
 */
import { type BenchRow, type BenchSection, human, renderSection } from "./harness/report.ts";

// Each benchmark by its path under bench/ (without .ts); --only names one by
// the last part of its path (its file name).
const BENCHES = [
  "micro/row_cost",
  "micro/filter",
  "micro/log_append",
  "micro/sync_floor",
  "e2e/ingest",
  "e2e/fanout",
  "e2e/memory",
  "e2e/replay",
  "e2e/since",
  "micro/key_index",
  "e2e/snapshot",
  "micro/client_parse",
  "micro/arrow",
  "micro/nested",
  "e2e/archive",
  "e2e/publish",
  "e2e/compress",
  "micro/zstd_stream_codec",
  "e2e/zstd_stream",
  "e2e/follow",
  "e2e/cluster",
  "e2e/iceberg",
  "e2e/nats_peer",
  "e2e/tail",
  "e2e/ack",
  "e2e/profile",
  "e2e/subscribers",
  "micro/row_grant",
];
const nameOf = (path: string): string => path.slice(path.lastIndexOf("/") + 1);

const quick = Deno.args.includes("--quick");
const only = Deno.args.includes("--only")
  ? new Set(Deno.args[Deno.args.indexOf("--only") + 1].split(","))
  : null;
const update = Deno.args.includes("--update");
if (update && !only) throw new Error("bench: --update needs --only NAME[,NAME…]");
if (only) {
  const unknown = [...only].filter((n) => !BENCHES.some((path) => nameOf(path) === n));
  if (unknown.length) throw new Error(`bench: no benchmark named ${unknown.join(", ")}`);
}
const loadavg = () => {
  try {
    return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  } catch {
    return "?";
  }
};
const t0 = performance.now();
const load0 = loadavg();
const sections: BenchSection[] = [];
const failed: string[] = [];

// One benchmark, tried twice: on a shared machine a peer or a load generator
// can fail to start once (each benchmark stops what it started, also when it
// throws). Failing twice, it is reported as failed and the run goes on, so
// one bad start does not cost the whole report.
async function runBench(path: string): Promise<BenchSection | BenchSection[]> {
  const name = nameOf(path);
  for (let attempt = 1;; attempt++) {
    try {
      const mod = await import(`./${path}.ts`);
      return await mod.run(quick);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      console.error(`bench: ${name} failed (attempt ${attempt} of 2): ${err}`);
      if (attempt < 2) continue;
      failed.push(name);
      return {
        title: `${name} (failed)`,
        baseline: "-",
        rows: [],
        notes: [`\`bench/${path}.ts\` failed twice in this run: ${why.split("\n")[0]}`],
      };
    }
  }
}
for (const path of BENCHES) {
  const name = nameOf(path);
  if (only && !only.has(name)) continue;
  const t = performance.now();
  console.error(`bench: ${name}${quick ? " (quick)" : ""} ...`);
  const out = await runBench(path);
  for (const section of Array.isArray(out) ? out : [out]) {
    console.error(renderSection(section));
    sections.push(section);
  }
  console.error(`bench: ${name} took ${((performance.now() - t) / 1000).toFixed(0)} s`);
}
const minutes = (performance.now() - t0) / 60_000;

const cpu = (() => {
  try {
    const info = Deno.readTextFileSync("/proc/cpuinfo");
    return /model name\s*:\s*(.*)/.exec(info)?.[1] ?? "unknown CPU";
  } catch {
    return "unknown CPU";
  }
})();

function targetRows(): string[] {
  const targets: [string, BenchRow][] = [];
  for (const s of sections) {
    for (const r of s.rows) if (r.met !== null) targets.push([s.title, r]);
  }
  const fmt = (n: number, unit: string) => (Number.isFinite(n) ? `${human(n)} ${unit}` : "failed");
  return targets.map(([title, r]) =>
    `| ${r.target} | ${title}: ${r.case} | ${fmt(r.ours, r.unit)} | ${fmt(r.baseline, r.unit)} | ${
      Number.isFinite(r.ratio) ? r.ratio.toFixed(2) + "×" : "-"
    } | ${r.met ? "yes" : "**no**"} |`
  );
}

function summary(): string {
  return ["| target | case | ours | baseline | ratio | met |", "|---|---|---|---|---|---|"]
    .concat(targetRows()).join("\n");
}

/**
 * Replaces each rerun section of an existing report (from its `## title` to the next `## `),
 * or inserts it before the hand-written comparison at the end; swaps that section's rows of
 * the targets table; and says in the header what was rerun, when.
 */
function spliceReport(old: string): string {
  let text = old;
  const handWritten = text.search(/^## This run against the previous report/m);
  for (const s of sections) {
    const rendered = renderSection(s).trimEnd() + "\n\n";
    const start = text.indexOf(`\n## ${s.title}\n`);
    if (start >= 0) {
      const next = text.indexOf("\n## ", start + 1);
      text = text.slice(0, start + 1) + rendered + (next >= 0 ? text.slice(next + 1) : "");
    } else {
      const at = text.search(/^## This run against the previous report/m);
      text = at >= 0 && handWritten >= 0
        ? text.slice(0, at) + rendered + text.slice(at)
        : text.trimEnd() + "\n\n" + rendered;
    }
  }
  const lines = text.split("\n");
  const titles = sections.map((s) => s.title);
  const tableStart = lines.findIndex((l) => l.startsWith("| target "));
  let tableEnd = tableStart;
  while (tableEnd + 1 < lines.length && lines[tableEnd + 1].startsWith("|")) tableEnd++;
  const kept = lines.slice(tableStart + 2, tableEnd + 1).filter((l) =>
    !titles.some((t) => l.includes(`| ${t}: `))
  );
  lines.splice(tableStart + 2, tableEnd - tableStart - 1, ...kept, ...targetRows());
  const note = `Sections rerun on ${new Date().toISOString().slice(0, 10)} with ` +
    `\`deno task bench --update --only ${[...only!].join(",")}\` (${
      minutes.toFixed(1)
    } minutes, load average ${load0} → ${loadavg()}): ${titles.join("; ")}.`;
  const targetsAt = lines.findIndex((l) => l === "## Targets");
  lines.splice(targetsAt, 0, note, "");
  return lines.join("\n");
}

const header = `# Performance

Generated by \`deno task bench${quick ? " --quick" : ""}\` on ${
  new Date().toISOString().slice(0, 10)
} in ${
  minutes.toFixed(1)
} minutes: Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} cores (${cpu}). This machine is shared and noisy (load average ${load0} when the run started, ${loadavg()} when it ended, from other work on the machine), so every figure is reported next to a baseline measured in the same run, and the ratio is what to compare across runs. CPU columns give each process's CPU time (\`process.cpuUsage\`) as a percentage of wall time over the measured window, 100 % being one core; the baseline's in parentheses.${
  quick ? "\n\n**Quick run: short measurements, for checking only.**" : ""
}${failed.length ? `\n\n**Failed in this run (twice each): ${failed.join(", ")}.**` : ""}

## Targets

${summary()}
`;
if (!only || update) {
  const path = new URL("../docs/PERFORMANCE.md", import.meta.url).pathname;
  await Deno.writeTextFile(
    path,
    update
      ? spliceReport(await Deno.readTextFile(path))
      : [header, ...sections.map(renderSection)].join("\n"),
  );
  // Tables as `deno fmt` lays them out, so `deno fmt --check` passes.
  await new Deno.Command(Deno.execPath(), { args: ["fmt", "-q", path] }).output();
  console.error(`bench: wrote docs/PERFORMANCE.md (${minutes.toFixed(1)} minutes)`);
}

// The report is written and every benchmark has stopped the processes it
// started; a peer's client library left holding a timer or socket must not
// keep the finished run alive. A benchmark that failed twice: exit 1.
Deno.exit(failed.length === 0 ? 0 : 1);
