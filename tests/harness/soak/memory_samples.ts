// Memory of server processes over a long run: RSS from /proc every second,
// and the JavaScript heap (used, total) and external memory from the
// server's own /_/metrics (streamcast_process_memory_bytes) every few
// seconds, so heap growth (a leak in JavaScript) can be told from RSS growth
// outside the heap (native buffers, allocator fragmentation); optionally
// /proc/PID/smaps every so often (smaps.ts: malloc's main heap, its other
// arenas, the rest of the anonymous memory). The report gives each
// process's slope over the last two thirds of the run, or over its last
// minutes (MiB/min, least squares), which is what a soak's "flat" means.
import { smapsOf } from "./smaps.ts";

// VmRSS and RssAnon of `pid`, MiB (NaN once it is gone).
function rssOf(pid: number): { rss: number; rssAnon: number } {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)\\s*kB`).exec(status)?.[1] ?? NaN);
    return { rss: kb("VmRSS") / 1024, rssAnon: kb("RssAnon") / 1024 };
  } catch {
    return { rss: NaN, rssAnon: NaN };
  }
}

/** One sample of one process. */
export interface MemorySample {
  /** Seconds since the sampler started. */
  t: number;
  /** VmRSS, MiB. */
  rss: number;
  /** Heap used / heap total / external, MiB (from /metrics; NaN when not read). */
  heapUsed: number;
  heapTotal: number;
  external: number;
  /** The background thread's heap used / total (the chunk and Iceberg workers), MiB (NaN: none, or not read). */
  backgroundHeapUsed: number;
  backgroundHeapTotal: number;
  /** glibc malloc's own account from /metrics, MiB: in use and free in its arenas (NaN: not read). */
  mallocInUse: number;
  mallocFree: number;
  /** RssAnon from /proc (the rest of RSS is mapped files: the binary, libraries). */
  rssAnon: number;
  /** From smaps (NaN when not read): malloc's main heap, its other arenas, other anonymous memory, MiB. */
  mallocHeap: number;
  mallocArenas: number;
  otherAnon: number;
}

/** A sample at `t` s with RSS and RssAnon read and nothing else yet (NaN). */
export function rssSample(t: number, rss: number, rssAnon: number): MemorySample {
  return {
    t,
    rss,
    rssAnon,
    heapUsed: NaN,
    heapTotal: NaN,
    external: NaN,
    backgroundHeapUsed: NaN,
    backgroundHeapTotal: NaN,
    mallocInUse: NaN,
    mallocFree: NaN,
    mallocHeap: NaN,
    mallocArenas: NaN,
    otherAnon: NaN,
  };
}

/** What the samples of one process say. */
export interface MemoryTrend {
  samples: number;
  rssFirstMiB: number;
  rssMaxMiB: number;
  rssLastMiB: number;
  /** The minutes the slopes are taken over (the end of the run's samples). */
  windowMinutes: number;
  /** Least-squares slope of RSS over the window, MiB/min. */
  rssSlopeMiBPerMin: number;
  /** Mean RSS over the first and over the last fifth of the window, MiB. */
  rssWindowStartMiB: number;
  rssWindowEndMiB: number;
  /** Slopes over the window of RssAnon and, from smaps, of malloc's main heap, its other arenas and the other anonymous memory (NaN when not sampled). */
  rssAnonSlopeMiBPerMin: number;
  mallocHeapSlopeMiBPerMin: number;
  mallocArenasSlopeMiBPerMin: number;
  otherAnonSlopeMiBPerMin: number;
  /** The same for the JavaScript heap used, and for external memory (from /metrics). */
  heapUsedSlopeMiBPerMin: number;
  externalSlopeMiBPerMin: number;
  heapUsedLastMiB: number;
  externalLastMiB: number;
  /** The background thread's heap used: slope and last (NaN without one). */
  backgroundHeapUsedSlopeMiBPerMin: number;
  backgroundHeapUsedLastMiB: number;
}

interface Tracked {
  pid: number;
  metricsUrl: string | null;
  token: (() => Promise<string>) | null;
  samples: MemorySample[];
}

const MIB = 1024 * 1024;

/** Least-squares slope of `ys` against `xs` (NaN for fewer than 2 points). */
export function slope(xs: number[], ys: number[]): number {
  const pts = xs.map((x, i) => [x, ys[i]]).filter(([x, y]) => Number.isFinite(x + y));
  if (pts.length < 2) return NaN;
  const mx = pts.reduce((s, p) => s + p[0], 0) / pts.length;
  const my = pts.reduce((s, p) => s + p[1], 0) / pts.length;
  let num = 0;
  let den = 0;
  for (const [x, y] of pts) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? NaN : num / den;
}

/** Parses streamcast_process_memory_bytes{kind=…} out of a /metrics text, MiB. */
export function memoryFromMetrics(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^streamcast_process_memory_bytes\{kind="(\w+)"\} (\S+)$/gm)) {
    out[m[1]] = Number(m[2]) / MIB;
  }
  return out;
}

/** The mean memory of one process over one step of a run, MiB (NaN: not sampled in it). */
export interface MemoryLevel {
  /** The step's start, minutes since the sampler started. */
  fromMinute: number;
  rss: number;
  rssAnon: number;
  mallocHeap: number;
  mallocArenas: number;
  otherAnon: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  /** The background thread's JavaScript heap reserved (its isolate is not the main thread's). */
  backgroundHeapTotal: number;
  /** glibc malloc's in use and free, across its arenas. */
  mallocInUse: number;
  mallocFree: number;
}

/**
 * The means of one process's samples over consecutive `stepMinutes` steps:
 * where a slope says whether memory rises, the levels say whether it rises
 * steadily or has levelled off. Samples read back from JSON carry `null`
 * for a value not sampled; it counts as not sampled.
 */
export function memoryLevels(samples: MemorySample[], stepMinutes: number): MemoryLevel[] {
  const out: MemoryLevel[] = [];
  const keys = [
    "rss",
    "rssAnon",
    "mallocHeap",
    "mallocArenas",
    "otherAnon",
    "heapUsed",
    "heapTotal",
    "external",
    "backgroundHeapTotal",
    "mallocInUse",
    "mallocFree",
  ] as const;
  const end = samples.at(-1)?.t ?? 0;
  for (let from = 0; from * 60 <= end; from += stepMinutes) {
    const part = samples.filter((s) => s.t >= from * 60 && s.t < (from + stepMinutes) * 60);
    if (part.length === 0) continue;
    const level = { fromMinute: from } as MemoryLevel;
    for (const k of keys) {
      const vs = part.map((s) => s[k] ?? NaN).filter(Number.isFinite);
      level[k] = vs.length ? vs.reduce((a, b) => a + b, 0) / vs.length : NaN;
    }
    out.push(level);
  }
  return out;
}

/** Samples the memory of named server processes until stopped. */
export class MemorySampler {
  #procs = new Map<string, Tracked>();
  #t0 = performance.now();
  #timer: ReturnType<typeof setInterval> | undefined;
  #ticks = 0;
  #busy = false;

  /**
   * Starts sampling: RSS every `everyMs`, /metrics every `metricsEvery`
   * ticks, smaps every `smapsEvery` ticks (0: never).
   */
  start(everyMs = 1000, metricsEvery = 5, smapsEvery = 0): void {
    this.#timer = setInterval(() => void this.#tick(metricsEvery, smapsEvery), everyMs);
  }

  /**
   * Tracks process `pid` under `name`; `baseUrl` (http://host:port) for its
   * /_/metrics, read with a bearer token from `token` when the server wants one.
   */
  add(
    name: string,
    pid: number,
    baseUrl: string | null = null,
    token: (() => Promise<string>) | null = null,
  ): void {
    this.#procs.set(name, {
      pid,
      token,
      metricsUrl: baseUrl === null ? null : `${baseUrl}/_/metrics`,
      samples: [],
    });
  }

  async #tick(metricsEvery: number, smapsEvery: number): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    const withSmaps = smapsEvery > 0 && this.#ticks % smapsEvery === 0;
    const withMetrics = this.#ticks++ % metricsEvery === 0;
    try {
      const t = (performance.now() - this.#t0) / 1000;
      await Promise.all([...this.#procs.values()].map(async (p) => {
        const { rss, rssAnon } = rssOf(p.pid);
        if (!Number.isFinite(rss)) return;
        const s = rssSample(t, rss, rssAnon);
        const smaps = withSmaps ? smapsOf(p.pid) : null;
        if (smaps) {
          s.mallocHeap = smaps.heap;
          s.mallocArenas = smaps.arenas;
          s.otherAnon = smaps.otherAnon;
        }
        if (withMetrics && p.metricsUrl) {
          try {
            const headers: Record<string, string> = p.token
              ? { authorization: `Bearer ${await p.token()}` }
              : {};
            const m = memoryFromMetrics(
              await (await fetch(p.metricsUrl, { headers, signal: AbortSignal.timeout(2000) }))
                .text(),
            );
            s.heapUsed = m.heap_used ?? NaN;
            s.heapTotal = m.heap_total ?? NaN;
            s.external = m.external ?? NaN;
            s.backgroundHeapUsed = m.background_heap_used ?? NaN;
            s.backgroundHeapTotal = m.background_heap_total ?? NaN;
            s.mallocInUse = m.malloc_in_use ?? NaN;
            s.mallocFree = m.malloc_free ?? NaN;
          } catch {
            // the server is busy or stopping: RSS alone this time
          }
        }
        p.samples.push(s);
      }));
    } finally {
      this.#busy = false;
    }
  }

  /** Stops sampling. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Every sample of every process. */
  samples(): Record<string, MemorySample[]> {
    return Object.fromEntries([...this.#procs].map(([n, p]) => [n, p.samples]));
  }

  /**
   * The trend of each process over its last `lastMinutes` of samples, or
   * (without) over the last two thirds of them.
   */
  report(lastMinutes?: number): Record<string, MemoryTrend> {
    const out: Record<string, MemoryTrend> = {};
    for (const [name, p] of this.#procs) {
      const all = p.samples;
      const tEnd = all.at(-1)?.t ?? 0;
      const tail = lastMinutes === undefined
        ? all.slice(Math.floor(all.length / 3))
        : all.filter((s) => s.t >= tEnd - lastMinutes * 60);
      const xs = tail.map((s) => s.t / 60);
      const along = (k: keyof MemorySample) => slope(xs, tail.map((s) => s[k]));
      const lastOf = (k: "heapUsed" | "external" | "backgroundHeapUsed") =>
        [...all].reverse().find((s) => Number.isFinite(s[k]))?.[k] ?? NaN;
      const span = tail.length > 0 ? tEnd - tail[0].t : 0;
      const meanRss = (from: number, to: number) => {
        const part = tail.filter((s) => s.t >= from && s.t <= to).map((s) => s.rss);
        return part.length ? part.reduce((a, b) => a + b, 0) / part.length : NaN;
      };
      const t0 = tail[0]?.t ?? 0;
      out[name] = {
        samples: all.length,
        rssFirstMiB: all[0]?.rss ?? NaN,
        rssMaxMiB: all.reduce((m, s) => Math.max(m, s.rss), 0),
        rssLastMiB: all.at(-1)?.rss ?? NaN,
        windowMinutes: span / 60,
        rssSlopeMiBPerMin: along("rss"),
        rssWindowStartMiB: meanRss(t0, t0 + span / 5),
        rssWindowEndMiB: meanRss(tEnd - span / 5, tEnd),
        rssAnonSlopeMiBPerMin: along("rssAnon"),
        mallocHeapSlopeMiBPerMin: along("mallocHeap"),
        mallocArenasSlopeMiBPerMin: along("mallocArenas"),
        otherAnonSlopeMiBPerMin: along("otherAnon"),
        heapUsedSlopeMiBPerMin: along("heapUsed"),
        externalSlopeMiBPerMin: along("external"),
        heapUsedLastMiB: lastOf("heapUsed"),
        externalLastMiB: lastOf("external"),
        backgroundHeapUsedSlopeMiBPerMin: along("backgroundHeapUsed"),
        backgroundHeapUsedLastMiB: lastOf("backgroundHeapUsed"),
      };
    }
    return out;
  }
}
