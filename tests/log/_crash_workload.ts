// The scripted workload of the crash-point test, and the checks of a disk
// state it may leave: several producers, pipelined commits, a resend while
// pending, seals by size and by request, journal rewrites; and, for the
// chunk worker, seals turned into chunks, merges, retention.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf } from "../harness/util.ts";
import { Log, type LogOptions, verifyLog } from "../../log/mod.ts";
import { Logger } from "../../common/logger.ts";
import { type LogIo, REAL_IO } from "../../log/disk/io.ts";
import { type DiskState, writeState } from "./_disk_model.ts";

/** What the publisher was told: stored, at these offsets. */
export interface Ack {
  producer: string;
  seq: number;
  first: number;
  last: number;
}

// What the logs report of the faults injected (a chunk step that failed, a
// journal cut back) is expected: kept, not printed.
const quiet = new Logger({ level: "error", write: () => {} });

/** The options of the workload's log (small: every kind of write happens in a few commits). */
export const PRODUCER_LOG: LogOptions = {
  timers: false,
  segmentBytes: 1024,
  beaconInterval: 1024,
  producerJournalBytes: 300,
  logger: quiet,
};

/** The options of the chunk workload's log: two seals make a merge; retention drops the oldest. */
export const CHUNK_LOG: LogOptions = {
  timers: false,
  segmentBytes: 1024,
  beaconInterval: 1024,
  chunks: { fanIn: 2, graceMs: 0, retainBytes: 400 },
  logger: quiet,
};

/**
 * Where the runs and the states checked are written: memory (/dev/shm) when
 * the machine has it, so that thousands of small folders cost little.
 */
export const SCRATCH: string | undefined = (() => {
  try {
    return Deno.statSync("/dev/shm").isDirectory ? "/dev/shm" : undefined;
  } catch {
    return undefined;
  }
})();

/** The real filesystem without its syncs: the checks need no durability, only speed. */
export const FAST_IO: LogIo = {
  ...REAL_IO,
  syncData: () => Promise.resolve(),
  syncDir: () => Promise.resolve(),
};

/** The rows of producer `p`'s frame `seq`: reproducible from the two alone. */
export function frameRows(p: string, seq: number): string[] {
  const n = 1 + (seq * 7 + p.charCodeAt(p.length - 1)) % 3;
  return Array.from({ length: n }, (_, i) => `{"p":"${p}","s":${seq},"i":${i}}`);
}

/** The rows of the `k`-th unnamed append. */
export function plainRows(k: number): string[] {
  return [`{"u":${k},"i":0}`, `{"u":${k},"i":1}`];
}

// Publishes frames as a publisher would: in order per producer; a frame
// whose commit failed (or that was refused after one that failed) is sent
// again, with the ones after it, from the lowest such seq.
class Driver {
  readonly log: Log;
  readonly onAck: (a: Ack) => void;
  readonly #inFlight: Promise<void>[] = [];
  // Per producer, the seqs sent and not answered as stored.
  readonly #open = new Map<string, Set<number>>();
  readonly #failed = new Map<string, number>();
  #plain = 0;

  constructor(log: Log, onAck: (a: Ack) => void) {
    this.log = log;
    this.onAck = onAck;
  }

  send(p: string, seq: number): void {
    const open = this.#open.get(p) ?? new Set();
    this.#open.set(p, open);
    open.add(seq);
    const fail = (): void => {
      this.#failed.set(p, Math.min(this.#failed.get(p) ?? seq, seq));
    };
    let r;
    try {
      r = this.log.publish(frameRows(p, seq), { producer: p, seq });
    } catch {
      fail(); // the log refuses appends (a failure it could not recover from)
      return;
    }
    if (r.status === "stale") throw new Error(`${p} seq ${seq}: stale (last ${r.lastSeq})`);
    if (r.status === "blocked") return fail();
    const { first, last } = r;
    this.#inFlight.push(r.done.then(() => {
      open.delete(seq);
      this.onAck({ producer: p, seq, first, last });
    }, fail));
  }

  append(): void {
    const k = ++this.#plain;
    try {
      this.#inFlight.push(this.log.appendMany(plainRows(k)).then(() => {}, () => {}));
    } catch {
      // the log refuses appends
    }
  }

  // Lets the commit loop run `n` microtasks (the I/O of the model is synchronous).
  async ticks(n: number): Promise<void> {
    for (let i = 0; i < n; i++) await Promise.resolve();
  }

  // Waits for every answer; sends failed frames again (a few rounds at most:
  // a log that stopped refuses them all).
  async idle(): Promise<void> {
    for (let round = 0; round < 3; round++) {
      await Promise.all(this.#inFlight.splice(0));
      if (this.#failed.size === 0) return;
      const again = [...this.#failed];
      this.#failed.clear();
      for (const [p, from] of again) {
        for (const seq of [...this.#open.get(p)!].filter((s) => s >= from).sort((a, b) => a - b)) {
          this.send(p, seq);
        }
      }
    }
    await Promise.all(this.#inFlight.splice(0));
  }
}

/** Runs the producer workload on `log`, calling `onAck` for each answer "stored". */
export async function producerWorkload(log: Log, onAck: (a: Ack) => void): Promise<void> {
  const d = new Driver(log, onAck);
  // Three producers and an unnamed append in one commit.
  d.send("p1", 1);
  d.send("p2", 1);
  d.append();
  await d.idle();
  // Pipelined: the next commit is asked for while this one is being written,
  // and a pending seq is sent again (a duplicate, answered once durable).
  d.send("p1", 2);
  d.send("p3", 1);
  await d.ticks(3);
  d.send("p2", 2);
  d.send("p1", 3);
  d.send("p1", 3);
  await d.idle();
  // A seal asked for while a commit is pending, then one by size.
  d.send("p3", 2);
  const sealed = log.roll();
  d.send("p2", 3);
  await sealed;
  await d.idle();
  for (let s = 4; s <= 7; s++) {
    d.send("p1", s);
    d.send("p2", s);
    await d.ticks(2);
    d.send("p3", s - 1);
    d.append();
    await d.idle();
  }
}

/** The rows of the chunk workload's commit `seq`. */
export function chunkRows(_producer: string, seq: number): string[] {
  return [`{"c":${seq},"i":0}`, `{"c":${seq},"i":1}`];
}

/**
 * Runs the chunk workload on `log` (a log that keeps chunks), calling
 * `onAck` per commit: three seals, each chunked (chunk, time index,
 * manifest, segment deleted); the second makes a merge, whose sources go
 * once their grace is over; retention drops the oldest chunk.
 */
export async function chunkWorkload(log: Log, onAck: (a: Ack) => void): Promise<void> {
  // As a publisher: a commit that failed is sent again (a few times at most:
  // a log that stopped refuses every one).
  let failures = 0;
  for (let seq = 1; seq <= 6 && failures < 3;) {
    try {
      const r = log.publish(chunkRows("c", seq), { producer: "c", seq });
      if (r.status !== "stored" && r.status !== "duplicate") throw new Error(r.status);
      await r.done;
      onAck({ producer: "c", seq, first: r.first, last: r.last });
    } catch {
      failures++;
      continue;
    }
    if (seq % 2 === 0) await log.roll().catch(() => {});
    await log.chunks.settled(seq === 6);
    seq++;
  }
}

async function readAll(log: Log): Promise<{ offset: number; text: string }[]> {
  const out: { offset: number; text: string }[] = [];
  const r = log.reader(log.earliest ?? log.endOffset);
  const dec = new TextDecoder();
  while (true) {
    const b = await r.read();
    if (b.count === 0) break;
    for (let i = 0; i < b.count; i++) {
      out.push({
        offset: b.offsets[i],
        text: dec.decode(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i])),
      });
    }
  }
  r.close();
  return out;
}

/** How to judge a state: its log's options, the rows of a frame, what was acknowledged. */
export interface CheckSpec {
  options: LogOptions;
  rowsOf(producer: string, seq: number): string[];
  acked: readonly Ack[];
  /** No frame was in flight: the log holds exactly the acknowledged frames. */
  exact: boolean;
  /** Rows below the earliest held may have been dropped by retention. */
  retention: boolean;
}

/**
 * Writes `state` to a new folder and checks it as the log would be opened
 * after that crash: `verify` passes on it as left and as recovered; every
 * acknowledged frame is there once, at its offsets; every frame there is
 * whole and there once; a producer's last seq is a frame the log holds, and
 * its last acknowledged seq is answered again as a duplicate with its
 * offsets (or stale, when a later unacknowledged frame survived); new
 * publishes and appends work. Throws naming what failed.
 */
export async function checkState(state: DiskState, spec: CheckSpec): Promise<void> {
  const dir = Deno.makeTempDirSync({ dir: SCRATCH, prefix: "streamcast-crash-" });
  try {
    writeState(dir, state);
    if (state.has("log.json")) {
      const raw = await verifyLog(dir);
      assertEquals(raw.error?.message ?? null, null, "verify of the state the crash left");
    }
    const log = await Log.open(dir, { ...spec.options, io: FAST_IO });
    try {
      await log.chunks.settled(true);
      const rows = await readAll(log);
      const end = log.endOffset;
      const earliest = log.earliest ?? end;
      // Offsets held run from the earliest to the end without a gap.
      rows.forEach((r, i) => assertEquals(r.offset, earliest + i, "offsets held"));
      assertEquals(earliest + rows.length, end, "rows up to the end");
      const at = new Map(rows.map((r) => [r.offset, r.text]));
      // Every frame held is whole, at consecutive offsets, and held once.
      const frames = new Map<string, number>(); // "producer seq" → first offset
      for (const r of rows) {
        const v = JSON.parse(r.text) as { p?: string; c?: number; s?: number; i: number };
        const producer = v.p ?? (v.c !== undefined ? "c" : null);
        if (producer === null) continue; // an unnamed append: at least once
        const seq = v.s ?? v.c!;
        const key = `${producer} ${seq}`;
        if (v.i === 0) {
          assert(!frames.has(key), `${key} is held twice`);
          frames.set(key, r.offset);
          const want = spec.rowsOf(producer, seq);
          for (let i = 0; i < want.length; i++) {
            assertEquals(at.get(r.offset + i), want[i], `${key} row ${i} at ${r.offset + i}`);
          }
        } else {
          const first = frames.get(key);
          assert(first === r.offset - v.i, `${key} row ${v.i} at ${r.offset} is not whole`);
        }
      }
      // Every acknowledged frame is held at its offsets (unless retention dropped it).
      const last = new Map<string, Ack>();
      for (const a of spec.acked) {
        if (!(spec.retention && a.last < earliest)) {
          assertEquals(
            frames.get(`${a.producer} ${a.seq}`),
            a.first,
            `acknowledged ${a.producer} seq ${a.seq}`,
          );
        }
        if ((last.get(a.producer)?.seq ?? 0) < a.seq) last.set(a.producer, a);
      }
      if (spec.exact) {
        const acked = new Set(spec.acked.map((a) => `${a.producer} ${a.seq}`));
        for (const key of frames.keys()) {
          assert(acked.has(key), `${key} is held, never acknowledged`);
        }
      }
      // A producer's state is a frame the log holds; its last acknowledged
      // seq is answered again with its offsets.
      for (const [producer, a] of last) {
        const st = log.producers.state(producer);
        assert(st !== null && st.seq >= a.seq, `${producer}: state ${JSON.stringify(st)}`);
        if (!(spec.retention && st.last < earliest)) {
          assertEquals(frames.get(`${producer} ${st.seq}`), st.first, `${producer} state's frame`);
        }
        const again = log.publish(spec.rowsOf(producer, a.seq), { producer, seq: a.seq });
        if (st.seq === a.seq) {
          assert(again.status === "duplicate", `${producer} seq ${a.seq}: ${again.status}`);
          assertEquals([again.first, again.last], [a.first, a.last], `${producer} duplicate`);
        } else assertEquals(again.status, "stale", `${producer} seq ${a.seq} after ${st.seq}`);
      }
      assertEquals(log.endOffset, end, "resends stored nothing");
      // New publishes and appends work.
      for (const producer of ["p1", "p2", "p3", "c", "new"]) {
        const r = log.publish([`{"p":"${producer}","s":1000,"i":0}`], { producer, seq: 1000 });
        assert(r.status === "stored", `${producer} seq 1000: ${r.status}`);
        await r.done;
      }
      assertEquals(await log.appendMany(['{"u":1000,"i":0}']), end + 5, "an append after");
    } finally {
      await log.close();
    }
    assertEquals((await verifyLog(dir)).error?.message ?? null, null, "verify once recovered");
  } finally {
    await rmrf(dir);
  }
}
