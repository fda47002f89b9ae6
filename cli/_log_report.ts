// The report `inspect` and `verify` print: a log's manifest, chunks, producer
// journal and segments, one line each.
import type { LogReport } from "../log/mod.ts";

function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1 << 30) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  return `${(n / (1 << 30)).toFixed(2)} GiB`;
}

function fmtTime(us: number | null): string {
  return us ? new Date(us / 1000).toISOString() : "-";
}

/** Prints `r` line by line through `out`. */
export function printReport(r: LogReport, out: (s: string) => void): void {
  out(`log ${r.dir}  stream "${r.name}"  id ${r.streamId}`);
  out(`segments: ${r.segments.length}  chunks: ${r.manifest?.chunks.length ?? 0}  rows: ${r.rows}`);
  if (r.manifest) {
    const m = r.manifest;
    const bytes = m.chunks.reduce((n, c) => n + c.bytes, 0);
    out(
      `manifest: generation ${m.generation}  through ${m.through}  ${fmtBytes(bytes)} in chunks` +
        (m.retired.length ? `  ${m.retired.length} retired` : ""),
    );
    for (const c of m.chunks) {
      out(
        `  chunk ${c.sha256.slice(0, 16)}…  offsets ${c.first}..${c.last}  rows ${c.rows}  ` +
          `${fmtBytes(c.bytes)}  ${fmtTime(c.first_ts)} .. ${fmtTime(c.last_ts)}`,
      );
    }
  }
  if (r.producers) {
    const p = r.producers;
    out(
      `producers.log: ${p.records} records  ${p.producers} producers` +
        (p.pending ? `  ${p.pending} of an unacknowledged commit (open drops them)` : "") +
        (p.tailBytes ? `  torn tail ${p.tailBytes} B (open cuts it)` : ""),
    );
  }
  for (const s of r.segments) {
    const range = s.lastOffset === null ? "empty" : `${s.firstOffset}..${s.lastOffset}`;
    out(
      `  ${s.file}  ${s.sealed ? "sealed" : "active"}  offsets ${range}  rows ${s.rows}  ` +
        `${fmtBytes(s.bytes)}  beacons ${s.beacons}` +
        (s.tailBytes ? `  unfinished tail ${s.tailBytes} B` : "") +
        (s.lastTimeUs ? `  last append ${fmtTime(s.lastTimeUs)}` : ""),
    );
  }
}
