// Disk use of server data folders over a long run: every so often, the
// bytes of every file under each folder (apparent sizes, summed), split into
// chunks (and their time indexes), segments and the rest (manifests, key
// snapshots, producer journals, cluster state). The report gives each
// folder's least-squares slope over the last minutes of the run (MiB/min),
// which is what "disk use flat" means for a soak with retention on.
import { join } from "node:path";
import { slope } from "./memory_samples.ts";

/** One sample of one folder, MiB. */
export interface DiskSample {
  /** Seconds since the sampler started. */
  t: number;
  total: number;
  /** Chunk files and their time indexes (`chunks/`). */
  chunks: number;
  /** Segment files (`*.seg`). */
  segments: number;
  /** Everything else. */
  other: number;
  /** Files counted. */
  files: number;
}

/** What the samples of one folder say. */
export interface DiskTrend {
  samples: number;
  firstMiB: number;
  maxMiB: number;
  lastMiB: number;
  /** The minutes the slopes are taken over (the end of the run's samples). */
  windowMinutes: number;
  /** Least-squares slopes over the window, MiB/min. */
  totalSlopeMiBPerMin: number;
  chunksSlopeMiBPerMin: number;
  segmentsSlopeMiBPerMin: number;
  otherSlopeMiBPerMin: number;
  /** Mean total over the first and the last fifth of the window, MiB. */
  windowStartMiB: number;
  windowEndMiB: number;
}

const MIB = 1024 * 1024;

// Adds up the files under `dir` (a file deleted while walked is skipped: the
// server deletes chunks and segments all the time).
async function walk(dir: string, into: DiskSample, inChunks: boolean): Promise<void> {
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(dir));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory) {
      await walk(path, into, inChunks || e.name === "chunks");
      continue;
    }
    if (!e.isFile) continue;
    let size: number;
    try {
      size = (await Deno.stat(path)).size / MIB;
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) continue;
      throw err;
    }
    into.total += size;
    into.files++;
    if (inChunks) into.chunks += size;
    else if (e.name.endsWith(".seg")) into.segments += size;
    else into.other += size;
  }
}

/** The disk use of folder `dir` now, at `t` s. */
export async function diskSample(dir: string, t: number): Promise<DiskSample> {
  const s: DiskSample = { t, total: 0, chunks: 0, segments: 0, other: 0, files: 0 };
  await walk(dir, s, false);
  return s;
}

/** The trend of `samples` over their last `lastMinutes`. */
export function diskTrend(samples: DiskSample[], lastMinutes: number): DiskTrend {
  const tEnd = samples.at(-1)?.t ?? 0;
  const tail = samples.filter((s) => s.t >= tEnd - lastMinutes * 60);
  const xs = tail.map((s) => s.t / 60);
  const along = (k: "total" | "chunks" | "segments" | "other") => slope(xs, tail.map((s) => s[k]));
  const span = tail.length > 0 ? tEnd - tail[0].t : 0;
  const t0 = tail[0]?.t ?? 0;
  const mean = (from: number, to: number) => {
    const part = tail.filter((s) => s.t >= from && s.t <= to).map((s) => s.total);
    return part.length ? part.reduce((a, b) => a + b, 0) / part.length : NaN;
  };
  return {
    samples: samples.length,
    firstMiB: samples[0]?.total ?? NaN,
    maxMiB: samples.reduce((m, s) => Math.max(m, s.total), 0),
    lastMiB: samples.at(-1)?.total ?? NaN,
    windowMinutes: span / 60,
    totalSlopeMiBPerMin: along("total"),
    chunksSlopeMiBPerMin: along("chunks"),
    segmentsSlopeMiBPerMin: along("segments"),
    otherSlopeMiBPerMin: along("other"),
    windowStartMiB: mean(t0, t0 + span / 5),
    windowEndMiB: mean(tEnd - span / 5, tEnd),
  };
}

/** Samples the disk use of named folders until stopped. */
export class DiskSampler {
  #dirs = new Map<string, { dir: string; samples: DiskSample[] }>();
  #t0 = performance.now();
  #timer: ReturnType<typeof setInterval> | undefined;
  #busy = false;

  /** Tracks folder `dir` under `name`. */
  add(name: string, dir: string): void {
    this.#dirs.set(name, { dir, samples: [] });
  }

  /** Starts sampling every `everyMs` (a walk still going skips a tick). */
  start(everyMs = 10_000): void {
    void this.#tick();
    this.#timer = setInterval(() => void this.#tick(), everyMs);
  }

  async #tick(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      const t = (performance.now() - this.#t0) / 1000;
      for (const d of this.#dirs.values()) d.samples.push(await diskSample(d.dir, t));
    } finally {
      this.#busy = false;
    }
  }

  /** Stops sampling. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Every sample of every folder. */
  samples(): Record<string, DiskSample[]> {
    return Object.fromEntries([...this.#dirs].map(([n, d]) => [n, d.samples]));
  }

  /** The trend of each folder over its last `lastMinutes` of samples. */
  report(lastMinutes: number): Record<string, DiskTrend> {
    return Object.fromEntries(
      [...this.#dirs].map(([n, d]) => [n, diskTrend(d.samples, lastMinutes)]),
    );
  }
}

/** The mean disk use of one folder over one step of a run, MiB. */
export interface DiskLevel {
  /** The step's start, minutes since the sampler started. */
  fromMinute: number;
  total: number;
  chunks: number;
  segments: number;
  other: number;
}

/**
 * The means of one folder's samples over consecutive `stepMinutes` steps:
 * whether disk use still rises or has levelled off (a slope alone does not
 * tell a rise that stopped from one that goes on).
 */
export function diskLevels(samples: DiskSample[], stepMinutes: number): DiskLevel[] {
  const out: DiskLevel[] = [];
  const end = samples.at(-1)?.t ?? 0;
  for (let from = 0; from * 60 <= end; from += stepMinutes) {
    const part = samples.filter((s) => s.t >= from * 60 && s.t < (from + stepMinutes) * 60);
    if (part.length === 0) continue;
    const mean = (k: "total" | "chunks" | "segments" | "other") =>
      part.reduce((a, s) => a + s[k], 0) / part.length;
    out.push({
      fromMinute: from,
      total: mean("total"),
      chunks: mean("chunks"),
      segments: mean("segments"),
      other: mean("other"),
    });
  }
  return out;
}
