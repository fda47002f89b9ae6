// Shared shape of benchmark results, and the median helper.

/** One measured case: our figure against a baseline measured in the same run. */
export interface BenchRow {
  /** What was measured. */
  case: string;
  /** Our figure. */
  ours: number;
  /** The baseline's figure, measured in the same run. */
  baseline: number;
  /** Unit of both figures, e.g. "rows/s" or "µs". */
  unit: string;
  /** ours / baseline (or baseline / ours for "lower is better" units). */
  ratio: number;
  /** The target, as text (e.g. "≥ 100k rows/s"), or "". */
  target: string;
  /** Whether the target is met (null when there is no target). */
  met: boolean | null;
  /** Free text: rendered as a footnote under the table, marked on the row's case. */
  note?: string;
  /** CPU of the server (or the measuring process), % of wall time, for ours then the baseline. */
  serverCpu?: [number, number?];
  /** CPU of the load generator, % of wall time, for ours then the baseline. */
  genCpu?: [number, number?];
  /** When the target is missed: by how much, and what limits it. */
  limit?: string;
}

/**
 * A row whose ratio is `ours / base` (higher is better for both), with a
 * target and a note when given.
 */
export function benchRow(
  name: string,
  ours: number,
  base: number,
  unit: string,
  target = "",
  met: boolean | null = null,
  note?: string,
): BenchRow {
  return {
    case: name,
    ours,
    baseline: base,
    unit,
    ratio: ours / base,
    target,
    met,
    ...(note ? { note } : {}),
  };
}

/** A section of docs/PERFORMANCE.md. */
export interface BenchSection {
  /** Section title. */
  title: string;
  /** What the baseline is. */
  baseline: string;
  /** Measured rows. */
  rows: BenchRow[];
  /** Extra paragraphs. */
  notes?: string[];
}

/** Median of numbers. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Formats a number with a k/M suffix. */
export function human(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(1)} k`;
  if (n >= 100) return n.toFixed(0);
  return n.toFixed(2);
}

function cpuCell(c: [number, number?] | undefined): string {
  if (!c || !Number.isFinite(c[0])) return "-";
  const f = (x: number) => `${x.toFixed(0)} %`;
  return c[1] === undefined || !Number.isFinite(c[1]) ? f(c[0]) : `${f(c[0])} (${f(c[1])})`;
}

function num(n: number, unit: string): string {
  return Number.isFinite(n) ? `${human(n)} ${unit}` : "failed";
}

/** Renders a section as Markdown. */
export function renderSection(s: BenchSection): string {
  const lines = [`## ${s.title}`, "", `Baseline: ${s.baseline}`, ""];
  if (s.rows.length === 0) {
    for (const n of s.notes ?? []) lines.push(n, "");
    return lines.join("\n");
  }
  const cpu = s.rows.some((r) => r.serverCpu || r.genCpu);
  lines.push(
    "| case | ours | baseline | ratio | target | met |" +
      (cpu ? " server CPU (baseline's) | generator CPU (baseline's) |" : ""),
    "|---|---|---|---|---|---|" + (cpu ? "---|---|" : ""),
  );
  // Rows with a note get a marker [n]; the notes follow the table as footnotes.
  const footnotes: string[] = [];
  for (const r of s.rows) {
    let mark = "";
    if (r.note) {
      footnotes.push(`[${footnotes.length + 1}] ${r.note}`);
      mark = ` [${footnotes.length}]`;
    }
    lines.push(
      `| ${r.case}${mark} | ${num(r.ours, r.unit)} | ${num(r.baseline, r.unit)} | ` +
        `${Number.isFinite(r.ratio) ? r.ratio.toFixed(2) + "×" : "-"} | ${r.target || "-"} | ${
          r.met === null ? "-" : r.met ? "yes" : "**no**"
        } |` + (cpu ? ` ${cpuCell(r.serverCpu)} | ${cpuCell(r.genCpu)} |` : ""),
    );
  }
  if (footnotes.length > 0) {
    lines.push("");
    for (const f of footnotes) lines.push(`- ${f}`);
  }
  const missed = s.rows.filter((r) => r.met === false);
  if (missed.length > 0) {
    lines.push("", "Targets not met:", "");
    for (const r of missed) lines.push(`- ${r.case}: ${r.limit ?? "(no analysis)"}`);
  }
  for (const n of s.notes ?? []) lines.push("", n);
  return lines.join("\n") + "\n";
}
