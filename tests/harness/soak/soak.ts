// The soak: a real `cli.ts serve` ingesting steadily from stdin, with small
// segments (sealing, chunking and merging all the time), while virtual
// subscribers join, read, pause (stop reading the socket), leave (politely or
// by dropping the connection) and come back from their next offset with the
// stream id. Every row is reproducible from its offset (the feed is seq 1, 2,
// 3, ... into a fresh log), so each subscriber checks every line it gets on
// the fly — offset in sequence, bytes exactly the row — and at the end the log
// itself is read back and checked the same way. Used by soak_test.ts (bounded)
// and bench/e2e/soak.ts (as long as you like).
import { rng } from "../util.ts";
import { Log, verifyLog } from "../../../log/mod.ts";
import { closePayload, frame, RawConn } from "./raw_frames.ts";
import {
  fdCount,
  NAME,
  portOf,
  rowText,
  rssMiB,
  serveChild,
  sleep,
  workspace,
} from "./workload.ts";
import { type MemorySample, MemorySampler, type MemoryTrend } from "./memory_samples.ts";

/** Options of {@linkcode runSoak}. */
export interface SoakOptions {
  /** How long to ingest and churn subscribers. */
  seconds: number;
  /** Virtual subscribers. @default 8 */
  subscribers?: number;
  /** Rows fed per second. @default 1000 */
  rowsPerSecond?: number;
  /** Seed of every random choice. @default 7 */
  seed?: number;
  /** Progress lines (every ~10 s). @default nothing */
  log?: (line: string) => void;
  /** Keep every memory sample in the report. @default false */
  samples?: boolean;
}

/** What a soak found. */
export interface SoakReport {
  seconds: number;
  rows: number;
  /** Problems found; empty when all is well. */
  failures: string[];
  rssMaxMiB: number;
  rssEndMiB: number;
  fdsStart: number;
  fdsEnd: number;
  sessions: number;
  pauses: number;
  drops: number;
  tooSlow: number;
  rowsDelivered: number;
  serverExit: number;
  /**
   * Memory of every server process (by name): RSS, heap and external, with
   * their slopes over the last two thirds of the run (MiB/min).
   */
  memory: Record<string, MemoryTrend>;
  /** Every memory sample, when asked for with `samples`. */
  memorySamples?: Record<string, MemorySample[]>;
}

interface VirtualSub {
  id: number;
  next: number | null;
  delivered: number;
  failed: string | null;
}

const dec = new TextDecoder();

/** Runs the soak and reports; never throws for what it finds (see `failures`). */
export async function runSoak(o: SoakOptions): Promise<SoakReport> {
  const rand = rng(o.seed ?? 7);
  const rate = o.rowsPerSecond ?? 1000;
  const say = o.log ?? (() => {});
  const w = await workspace();
  const s = await serveChild(w, ["--segment-bytes", "262144", "--seal-every", "5"]);
  const pid = s.proc.pid;
  const port = portOf(s.url);
  const failures: string[] = [];
  const report: SoakReport = {
    seconds: o.seconds,
    rows: 0,
    failures,
    rssMaxMiB: 0,
    rssEndMiB: 0,
    fdsStart: fdCount(pid),
    fdsEnd: 0,
    sessions: 0,
    pauses: 0,
    drops: 0,
    tooSlow: 0,
    rowsDelivered: 0,
    serverExit: -1,
    memory: {},
  };
  const memory = new MemorySampler();
  memory.add("server", pid, s.url);
  memory.start();
  let fed = 0;
  let feeding = true;
  const sampler = setInterval(() => {
    const r = rssMiB(pid);
    if (r > report.rssMaxMiB) report.rssMaxMiB = r;
  }, 1000);
  try {
    await s.write(rowText(++fed) + "\n");
    const head0 = await (await fetch(`${s.url}/${NAME}/head`)).json();
    const streamId = head0.stream_id as string;
    const perTick = Math.max(1, Math.round(rate / 100));
    const feeder = (async () => {
      while (feeding) {
        let text = "";
        for (let k = 0; k < perTick; k++) text += rowText(++fed) + "\n";
        await s.write(text);
        await sleep(10);
      }
    })();
    const t0 = Date.now();
    const deadline = t0 + o.seconds * 1000;
    const progress = setInterval(() => {
      say(
        `soak: ${((Date.now() - t0) / 1000).toFixed(0)} s, ${fed} rows fed, ` +
          `${report.rowsDelivered} delivered, RSS ${rssMiB(pid).toFixed(1)} MiB`,
      );
    }, 10_000);

    // One connection of a virtual subscriber, until `until` (or, with
    // `to`, until it has every row below `to`).
    const session = async (v: VirtualSub, until: number, to: number | null): Promise<void> => {
      const frames = rand() < 0.5 ? "batch" : "single";
      const q = v.next === null
        ? `?frames=${frames}`
        : `?offset=${v.next}&stream_id=${streamId}&frames=${frames}`;
      const { c, answer } = await RawConn.upgrade(port, `/${NAME}${q}`);
      report.sessions++;
      const where = `subscriber ${v.id} (${q})`;
      try {
        if (answer.status !== 101) throw new Error(`${where}: upgrade answered ${answer.status}`);
        const g = await c.readFrame(10_000);
        if (!g) throw new Error(`${where}: no greeting`);
        if (g.opcode === 8) {
          throw new Error(
            `${where}: refused ${(g.data[0] << 8) | g.data[1]} ${dec.decode(g.data.subarray(2))}`,
          );
        }
        const greeting = JSON.parse(dec.decode(g.data));
        if (v.next === null) v.next = greeting.end_offset as number;
        else if (
          greeting.replay === null ? v.next !== greeting.end_offset : greeting.replay[0] !== v.next
        ) {
          throw new Error(`${where}: greeting replay ${JSON.stringify(greeting.replay)}`);
        }
        const take = (text: string) => {
          for (const line of text.split("\n")) {
            const want = `[${v.next},${rowText(v.next!)}]`;
            if (line !== want) {
              throw new Error(
                `${where}: got ${line.slice(0, 60)}… where ${want.slice(0, 60)}… was due`,
              );
            }
            v.next!++;
            v.delivered++;
            report.rowsDelivered++;
          }
        };
        const pauseAt = rand() < 0.4 ? Date.now() + rand() * 3000 : Infinity;
        let paused = false;
        while (to !== null ? v.next! < to : Date.now() < until) {
          if (!paused && Date.now() >= pauseAt) {
            // Stop reading: the server's buffers fill, it falls back to the log.
            paused = true;
            report.pauses++;
            c.pause();
            await sleep(1000 + rand() * 7000);
            c.resume();
          }
          const f = await c.readFrame(
            to !== null ? 30_000 : Math.max(1, Math.min(until, pauseAt) - Date.now()),
          );
          if (!f) {
            if (to !== null) {
              throw new Error(`${where}: no rows for 30 s while catching up to ${to}`);
            }
            continue; // the session's time is up (or the pause is due)
          }
          if (f.opcode === 1) take(dec.decode(f.data));
          else if (f.opcode === 8) {
            const code = f.data.length >= 2 ? (f.data[0] << 8) | f.data[1] : 0;
            const reason = dec.decode(f.data.subarray(2));
            if (code !== 4429) {
              throw new Error(`${where}: closed by the server with ${code} ${reason}`);
            }
            // Too slow: resume where the server says, which must be our next offset.
            report.tooSlow++;
            const resume = JSON.parse(reason).resume;
            if (resume !== v.next) {
              throw new Error(`${where}: 4429 resume ${resume}, next is ${v.next}`);
            }
            return;
          }
        }
        if (to === null && rand() < 0.5) {
          // Leave by dropping the connection: rows in flight are simply not seen.
          report.drops++;
          return;
        }
        await c.write(frame(8, closePayload(1000)));
        // Rows sent before the server saw our close still count, in order.
        const e = await c.ending(10_000, (f) => {
          if (f.opcode === 1) take(dec.decode(f.data));
        });
        if (!(e.kind === "close" && e.code === 1000)) {
          throw new Error(`${where}: our close 1000 was answered by ${JSON.stringify(e)}`);
        }
      } finally {
        c.close();
      }
    };

    const subs: VirtualSub[] = Array.from(
      { length: o.subscribers ?? 8 },
      (_, id) => ({ id, next: id % 2 === 0 ? 1 : null, delivered: 0, failed: null }),
    );
    await Promise.all(subs.map(async (v) => {
      try {
        while (Date.now() < deadline) {
          await session(v, Math.min(deadline, Date.now() + 1000 + rand() * 5000), null);
          await sleep(rand() < 0.3 ? 0 : 200 + rand() * 3000);
        }
      } catch (err) {
        v.failed = err instanceof Error ? err.message : String(err);
      }
    }));
    // (With no subscribers, ingest alone for the whole time.)
    while (Date.now() < deadline) await sleep(100);
    clearInterval(progress);
    // Memory is judged over the churn, not the final catch-up and stop.
    memory.stop();
    feeding = false;
    await feeder;
    report.rows = fed;
    let end = 0;
    for (const stop = Date.now() + 10_000; end !== fed + 1 && Date.now() < stop; await sleep(50)) {
      end = (await (await fetch(`${s.url}/${NAME}/head`)).json()).end_offset as number;
    }
    if (end !== fed + 1) failures.push(`the log ends at ${end}; ${fed} rows were fed`);
    // Everyone catches up to the end, then leaves.
    await Promise.all(subs.map(async (v) => {
      if (v.failed) return;
      try {
        await session(v, Infinity, end);
        if (v.next !== end) v.failed = `subscriber ${v.id} ended at ${v.next}, not ${end}`;
      } catch (err) {
        v.failed = err instanceof Error ? err.message : String(err);
      }
    }));
    for (const v of subs) if (v.failed) failures.push(v.failed);
    await sleep(300);
    report.fdsEnd = fdCount(pid);
    report.rssEndMiB = rssMiB(pid);
    report.serverExit = (await s.signal("SIGTERM", 30_000)).code;
    // The log itself: every row in place, byte-exact, and it verifies.
    const log = await Log.open(w.logDir, { chunks: true, timers: false });
    try {
      const r = log.reader(1);
      let expect = 1;
      try {
        while (true) {
          const b = await r.read();
          if (b.count === 0) break;
          for (let i = 0; i < b.count; i++) {
            const got = dec.decode(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]));
            if (b.offsets[i] !== expect || got !== rowText(expect)) {
              failures.push(
                `the log holds ${got.slice(0, 60)} at ${b.offsets[i]}; row ${expect} was due`,
              );
              break;
            }
            expect++;
          }
        }
      } finally {
        r.close();
      }
      if (expect !== end) failures.push(`the log reads back ${expect - 1} rows, not ${end - 1}`);
    } finally {
      await log.close();
    }
    const v = await verifyLog(w.logDir);
    if (v.error) failures.push(`verify: ${v.error.message}`);
    if (/request failed|Uncaught|panicked|failed:/.test(s.stderr())) {
      failures.push(`server stderr:\n${s.stderr()}`);
    }
    return report;
  } finally {
    feeding = false;
    clearInterval(sampler);
    memory.stop();
    report.memory = memory.report();
    if (o.samples) report.memorySamples = memory.samples();
    await s.stop();
    await w.rm();
  }
}
