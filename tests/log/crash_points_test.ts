// Crash points enumerated, not sampled (docs/SPEC.md §9.4): a scripted workload runs
// once through a model of the disk (_disk_model.ts); before EVERY change it
// makes — each write, sync, cut, rename, remove, folder sync — the test takes
// what a power loss there would leave (only what was synced) and what a
// process crash there would leave (everything so far), and for each write
// every torn prefix of it (every byte boundary of a small write, a seeded
// sample of a large one). Each state is opened as the log would be after
// that crash and checked (_crash_workload.ts checkState). Then every write,
// sync and folder sync of the workload is failed in turn — ENOSPC after
// just over half of a write, EIO — in a fresh run that carries on, and the end state
// is checked the same way, with nothing in flight: the log holds exactly
// what was acknowledged; so is the disk as a crash right after the first
// acknowledgement that followed the fault would leave it. The same for the chunk worker's steps (chunk, time
// index, manifest, merge, retention, segment deletion).
//
// The seed of the torn-write sample is fresh each run (STREAMCAST_CRASH_SEED
// picks one) and printed; seeds that once failed are kept in FIXED_SEEDS.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, rng } from "../harness/util.ts";
import { Log, type LogOptions } from "../../log/mod.ts";
import { type DiskFault, DiskModel, type DiskOp, type DiskState, stateKey } from "./_disk_model.ts";
import {
  type Ack,
  checkState,
  CHUNK_LOG,
  chunkRows,
  chunkWorkload,
  frameRows,
  PRODUCER_LOG,
  producerWorkload,
  SCRATCH,
} from "./_crash_workload.ts";

/** Seeds of the torn-write sample that once found a failure. */
const FIXED_SEEDS: number[] = [];
/**
 * A write of up to this many bytes to a file read in place after a crash (a
 * segment, the producer journal) is torn at every byte boundary.
 */
const SMALL_WRITE = 512;
/**
 * Tears sampled (beside the first and last byte) from a larger write, and
 * from a write to a temporary file, which nothing reads before the rename
 * that follows its sync.
 */
const SAMPLED_TEARS = 12;
/** States checked at once (each in its own folder): the checks mostly wait on the filesystem. */
const CONCURRENCY = 6;

const seedEnv = Deno.env.get("STREAMCAST_CRASH_SEED");
const SEED = seedEnv !== undefined
  ? Number(seedEnv)
  : crypto.getRandomValues(new Uint32Array(1))[0];

type Workload = (log: Log, onAck: (a: Ack) => void) => Promise<void>;

interface Run {
  ops: DiskOp[];
  acks: Ack[];
  /** Before each op: what a power loss and a process crash would leave, and the acks so far. */
  before: { power: DiskState; process: DiskState; acked: number }[];
  end: { power: DiskState; process: DiskState };
  /** With a fault: the disk right after the first acknowledgement that followed it, if one did. */
  afterFault: { power: DiskState; process: DiskState; acked: number } | null;
}

// Runs `workload` once through a fresh model (with `fault`, if given).
async function run(
  options: LogOptions,
  workload: Workload,
  fault: DiskFault | null,
  snapshots: boolean,
): Promise<Run & { model: DiskModel }> {
  const root = Deno.makeTempDirSync({ dir: SCRATCH, prefix: "streamcast-crash-run-" });
  try {
    const model = new DiskModel(root);
    model.fault = fault;
    const acks: Ack[] = [];
    const before: Run["before"] = [];
    if (snapshots) {
      model.beforeOp = () =>
        before.push({
          power: model.powerLoss(),
          process: model.processCrash(),
          acked: acks.length,
        });
    }
    // A fault that stops the log from opening: it is opened again, as a
    // restart would (the fault is spent).
    const log = await Log.open(root, { ...options, io: model }).catch((err) => {
      if (model.faulted === null) throw err;
      return Log.open(root, { ...options, io: model });
    });
    let afterFault: Run["afterFault"] = null;
    await workload(log, (a) => {
      acks.push(a);
      if (model.faulted !== null && afterFault === null) {
        afterFault = {
          power: model.powerLoss(),
          process: model.processCrash(),
          acked: acks.length,
        };
      }
    });
    await log.close();
    assertEquals(model.differences(), [], "every change on disk went through the seam");
    return {
      model,
      ops: model.ops,
      acks,
      before,
      end: { power: model.powerLoss(), process: model.processCrash() },
      afterFault,
    };
  } finally {
    await rmrf(root);
  }
}

// The byte counts at which the write `op` is torn (see SMALL_WRITE).
function tears(op: DiskOp, seed: number): number[] {
  const n = op.bytes!.length;
  const temporary = /\.tmp(-\*)?$/.test(op.name);
  if (n <= SMALL_WRITE && !temporary) return Array.from({ length: n }, (_, j) => j);
  const rand = rng(seed);
  const at = new Set([0, 1, n - 1]);
  while (at.size < Math.min(n, SAMPLED_TEARS + 3)) at.add(1 + Math.floor(rand() * (n - 2)));
  return [...at].sort((a, b) => a - b);
}

// Runs `check` on every item, `CONCURRENCY` at a time; the first failure
// stops the others from starting and is thrown.
async function each<T>(items: readonly T[], check: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed: unknown = null;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (failed === null && next < items.length) {
      const item = items[next++];
      try {
        await check(item);
      } catch (err) {
        failed ??= err;
      }
    }
  }));
  if (failed !== null) throw failed;
}

function torn(state: DiskState, op: DiskOp, j: number): DiskState {
  const out = new Map(state);
  const old = out.get(op.path) ?? new Uint8Array(0);
  const data = new Uint8Array(Math.max(old.length, op.pos! + j));
  data.set(old, 0);
  data.set(op.bytes!.subarray(0, j), op.pos!);
  out.set(op.path, data);
  return out;
}

interface Tally {
  points: number;
  states: number;
  faults: number;
}

async function enumerate(
  what: string,
  options: LogOptions,
  workload: Workload,
  rowsOf: (p: string, seq: number) => string[],
  retention: boolean,
  seed: number,
): Promise<Tally> {
  const base = await run(options, workload, null, true);
  assert(base.acks.length > 0, "the workload acknowledged frames");
  // Each crash point's state, the latest acks kept for a state seen again
  // (acks only grow, so the check with them is the stronger).
  const states = new Map<string, { state: DiskState; acked: number; label: string }>();
  let points = 0;
  const add = (label: string, state: DiskState, acked: number) => {
    points++;
    states.set(`${stateKey(state)}#`, { state, acked, label });
  };
  base.ops.forEach((op, k) => {
    const b = base.before[k];
    const at = `${what} op ${k} (${op.kind} ${op.name})`;
    add(`${at}: power loss`, b.power, b.acked);
    if (op.kind === "write") {
      for (const j of tears(op, seed + k)) {
        add(
          `${at}: process crash, ${j} of ${op.bytes!.length} bytes written`,
          torn(b.process, op, j),
          b.acked,
        );
      }
    } else add(`${at}: process crash`, b.process, b.acked);
  });
  add(`${what} end: power loss`, base.end.power, base.acks.length);
  add(`${what} end: process crash`, base.end.process, base.acks.length);
  await each([...states.values()], async ({ state, acked, label }) => {
    try {
      await checkState(state, {
        options,
        rowsOf,
        acked: base.acks.slice(0, acked),
        exact: false,
        retention,
      });
    } catch (err) {
      throw new Error(`${label} (seed ${seed}): ${err instanceof Error ? err.message : err}`, {
        cause: err,
      });
    }
  });
  // Faults: every write, sync and folder sync in turn, each error, in a fresh run.
  const faults: { fault: DiskFault; label: string }[] = [];
  const seen = new Map<string, number>();
  for (const op of base.ops) {
    if (op.kind !== "write" && op.kind !== "sync" && op.kind !== "syncdir") continue;
    const key = `${op.kind}:${op.name}`;
    const nth = (seen.get(key) ?? 0) + 1;
    seen.set(key, nth);
    for (const error of ["ENOSPC", "EIO"] as const) {
      faults.push({
        fault: { kind: op.kind, name: op.name, nth, error },
        label: `${what}: ${error} at op ${op.index} (${op.kind} ${op.name}, #${nth})`,
      });
    }
  }
  await each(faults, async ({ fault, label }) => {
    try {
      const r = await run(options, workload, fault, false);
      assert(r.model.faulted !== null, "the fault was injected");
      for (const state of [r.end.process, r.end.power]) {
        await checkState(state, { options, rowsOf, acked: r.acks, exact: true, retention });
      }
      // A crash soon after: what the fault left must not cost a later acknowledgement.
      const after = r.afterFault;
      if (after !== null) {
        for (const state of [after.process, after.power]) {
          const acked = r.acks.slice(0, after.acked);
          await checkState(state, { options, rowsOf, acked, exact: false, retention });
        }
      }
    } catch (err) {
      throw new Error(`${label}: ${err instanceof Error ? err.message : err}`, { cause: err });
    }
  });
  return { points, states: states.size, faults: faults.length };
}

for (const seed of [SEED, ...FIXED_SEEDS]) {
  Deno.test(`crash points: producers, pipelined commits, journal rewrites, seals (seed ${seed})`, async () => {
    console.log(`crash points seed ${seed} (STREAMCAST_CRASH_SEED=${seed} repeats it)`);
    const t0 = performance.now();
    const t = await enumerate("producers", PRODUCER_LOG, producerWorkload, frameRows, false, seed);
    console.log(
      `producers: ${t.points} crash points (${t.states} distinct disk states) and ${t.faults} ` +
        `injected faults checked in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
  });

  Deno.test(`crash points: the chunk worker's chunk, time index, manifest, merge, retention and segment deletion (seed ${seed})`, async () => {
    const t0 = performance.now();
    const t = await enumerate("chunks", CHUNK_LOG, chunkWorkload, chunkRows, true, seed);
    console.log(
      `chunks: ${t.points} crash points (${t.states} distinct disk states) and ${t.faults} ` +
        `injected faults checked in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
  });
}
