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
  /** Free text. */
  note?: string;
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

/** Renders a section as Markdown. */
export function renderSection(s: BenchSection): string {
  const lines = [`## ${s.title}`, "", `Baseline: ${s.baseline}`, ""];
  lines.push("| case | ours | baseline | ratio | target | met |", "|---|---|---|---|---|---|");
  for (const r of s.rows) {
    lines.push(
      `| ${r.case} | ${human(r.ours)} ${r.unit} | ${human(r.baseline)} ${r.unit} | ` +
        `${r.ratio.toFixed(2)}× | ${r.target || "-"} | ${
          r.met === null ? "-" : r.met ? "yes" : "**no**"
        } |`,
    );
  }
  for (const n of s.notes ?? []) lines.push("", n);
  return lines.join("\n") + "\n";
}
