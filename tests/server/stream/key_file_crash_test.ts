// The key file under crashes, enumerated, not sampled: a keyed workload (rows
// appended, segments sealed — each seal saves the key file — and explicit
// saves between commits) runs once through the model of the disk behind the
// log's I/O seam (tests/log/_disk_model.ts). Before every change on disk —
// each step of writing the key file (its temporary file opened, written,
// synced, renamed over the old one, the folder synced) and every change of
// the log itself — the disk a power loss and a process crash there would
// leave is taken, and for each write to the key file, a sample of torn
// prefixes. Each state is opened as a restart would (the log, then the index
// from the key file plus the rows after it, or from the log when the file is
// missing or damaged), and the rebuilt index must equal the reference model:
// each key's latest row among the rows the recovered log holds. Then each
// write and sync of the key file is failed in turn (ENOSPC, EIO): the save
// fails, the stream goes on, and the end state is checked the same way.
//
// The seed of the torn-write sample is fresh each run and printed.
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, rng } from "../../harness/util.ts";
import { Log } from "../../../log/mod.ts";
import { Logger } from "../../../common/logger.ts";
import { compileSchema } from "../../../schema/compile.ts";
import { KeyColumns } from "../../../server/stream/key_columns.ts";
import { KeyIndex } from "../../../server/stream/key_index.ts";
import { KeyKeeper } from "../../../server/stream/key_keeper.ts";
import { decodeKeyFile, KEY_FILE } from "../../../server/stream/key_file.ts";
import {
  type DiskFault,
  DiskModel,
  type DiskOp,
  type DiskState,
  stateKey,
  writeState,
} from "../../log/_disk_model.ts";

const SEED = crypto.getRandomValues(new Uint32Array(1))[0];
console.log(`key file crash points: fresh seed ${SEED}`);

const SCHEMA = compileSchema({
  type: "object",
  properties: { sym: { type: "string" }, n: { type: "integer" } },
  required: ["sym", "n"],
});
const QUIET = new Logger({ level: "error" });
const OPTIONS = { timers: false, chunks: false, segmentBytes: 600, logger: QUIET } as const;

function keeperOf(log: Log): KeyKeeper {
  const keeper = new KeyKeeper(log, new KeyIndex(KeyColumns.of(SCHEMA, ["sym"]), 1000, 1));
  // Commits' rows are read from the log (null), as a stream's are when the appender lacks them.
  log.listen({
    committed: (first, end) => keeper.committed(first, end, null),
    sealed: () => keeper.sealed(),
  });
  return keeper;
}

// The workload: commits of a few rows over 8 keys; a save after some of them.
async function workload(log: Log, keeper: KeyKeeper): Promise<void> {
  const rand = rng(7);
  for (let c = 0; c < 12; c++) {
    const rows = Array.from(
      { length: 1 + Math.floor(rand() * 4) },
      (_, i) => JSON.stringify({ sym: `k${Math.floor(rand() * 8)}`, n: c * 10 + i }),
    );
    await log.appendMany(rows);
    if (c % 3 === 2) await keeper.save();
  }
}

// Each key's latest row among every row `log` holds, as snapshot lines.
async function reference(log: Log): Promise<string[]> {
  const latest = new Map<string, string>();
  const reader = log.reader(log.firstOffset);
  try {
    while (reader.offset < log.endOffset) {
      const b = await reader.read();
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) {
        const json = new TextDecoder().decode(
          b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]),
        );
        const sym = JSON.parse(json).sym;
        latest.delete(sym);
        latest.set(sym, `[${b.offsets[i]},${json}]`);
      }
    }
  } finally {
    reader.close();
  }
  return [...latest.values()];
}

// Opens `state` as a restart would and checks the rebuilt index; whether the key file was used.
async function check(state: DiskState, label: string): Promise<boolean> {
  const dir = Deno.makeTempDirSync({ prefix: "streamcast-keycrash-" });
  try {
    writeState(dir, state);
    const log = await Log.open(dir, OPTIONS);
    try {
      const keeper = keeperOf(log);
      await keeper.start();
      assertEquals(keeper.index.end, log.endOffset, label);
      assertEquals(keeper.index.snapshot(null).lines, await reference(log), label);
      let used = false;
      const file = state.get(KEY_FILE);
      if (file !== undefined) {
        try {
          used = decodeKeyFile(file, log.streamId, ["sym"]).end < log.endOffset;
        } catch {
          // A damaged file: the index was rebuilt from the log.
        }
      }
      return used;
    } finally {
      await log.close();
    }
  } finally {
    await rmrf(dir);
  }
}

interface Run {
  ops: DiskOp[];
  before: { power: DiskState; process: DiskState }[];
  end: { power: DiskState; process: DiskState };
  faulted: DiskOp | null;
}

async function run(fault: DiskFault | null): Promise<Run> {
  const root = Deno.makeTempDirSync({ prefix: "streamcast-keycrash-run-" });
  try {
    const model = new DiskModel(root);
    model.fault = fault;
    const before: Run["before"] = [];
    model.beforeOp = () => before.push({ power: model.powerLoss(), process: model.processCrash() });
    const log = await Log.open(root, { ...OPTIONS, io: model });
    const keeper = keeperOf(log);
    await keeper.start();
    await workload(log, keeper);
    await keeper.close();
    await log.close();
    return {
      ops: model.ops,
      before,
      end: { power: model.powerLoss(), process: model.processCrash() },
      faulted: model.faulted,
    };
  } finally {
    await rmrf(root);
  }
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

const isKeyFile = (op: DiskOp) => op.name.startsWith(KEY_FILE) || op.kind === "syncdir";

Deno.test("key file: a crash at every step of saving it leaves an index rebuilt equal to the model", async () => {
  const base = await run(null);
  const saves = base.ops.filter((op) => op.kind === "rename" && op.name === `${KEY_FILE}.tmp-*`)
    .length;
  assert(saves >= 4, `the workload saved the key file (${saves} times)`);
  const states = new Map<string, { state: DiskState; label: string }>();
  const add = (label: string, state: DiskState) => states.set(stateKey(state), { state, label });
  const rand = rng(SEED);
  base.ops.forEach((op, k) => {
    const b = base.before[k];
    const at = `op ${k} (${op.kind} ${op.name})`;
    add(`${at}: power loss`, b.power);
    add(`${at}: process crash`, b.process);
    if (op.kind === "write" && isKeyFile(op)) {
      const n = op.bytes!.length;
      for (const j of new Set([1, n >> 1, n - 1, 1 + Math.floor(rand() * (n - 1))])) {
        add(`${at}: process crash, ${j} of ${n} bytes written`, torn(b.process, op, j));
      }
    }
  });
  add("end: power loss", base.end.power);
  add("end: process crash", base.end.process);
  let fromFile = 0;
  for (const { state, label } of states.values()) {
    if (await check(state, `${label} (seed ${SEED})`)) fromFile++;
  }
  console.log(
    `${base.ops.length} changes, ${saves} saves, ${states.size} states, ${fromFile} from a key file`,
  );
  // Some states rebuilt from a key file and the rows after it, not the whole log.
  assert(fromFile > 0, "some crash states used the key file");
});

Deno.test("key file: a failed write or sync of it fails that save only; the index is rebuilt equal to the model", async () => {
  const base = await run(null);
  const counts = new Map<string, number>();
  const faults: DiskFault[] = [];
  for (const op of base.ops) {
    if (!op.name.startsWith(KEY_FILE) || (op.kind !== "write" && op.kind !== "sync")) continue;
    const n = (counts.get(`${op.kind}:${op.name}`) ?? 0) + 1;
    counts.set(`${op.kind}:${op.name}`, n);
    for (const error of ["ENOSPC", "EIO"] as const) {
      faults.push({ kind: op.kind, name: op.name, nth: n, error });
    }
  }
  assert(faults.length > 0, "the workload wrote the key file");
  for (const fault of faults) {
    const r = await run(fault);
    assert(r.faulted !== null, `the fault ${JSON.stringify(fault)} was injected`);
    const label = `fault ${JSON.stringify(fault)}`;
    await check(r.end.power, `${label}: end, power loss`);
    await check(r.end.process, `${label}: end, process crash`);
  }
});
