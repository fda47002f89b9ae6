/**
 * The seeds of the Jepsen-style test (tests/system/jepsen/): those that once
 * found a problem, each run every time, what a replayed seed draws its
 * faults from, and the test each seed is, as the environment sets it
 * (see jepsen_test.ts there for the variables).
 *
 * @module
 */

import { DISK_MIB, jepsenRun, type Kinds } from "./run.ts";

/** Replays one seed alone (the same faults at the same moments of the run). */
export const SEED_VARIABLE = "STREAMCAST_JEPSEN_SEED";
/** How long faults go on, seconds (40 by default). */
export const SECONDS_VARIABLE = "STREAMCAST_JEPSEN_SECONDS";
/** The size of each node's disk in a run with a full disk, MiB. */
export const DISK_VARIABLE = "STREAMCAST_JEPSEN_DISK_MIB";
/** Which kinds of fault a replayed seed draws from: classic, all or fourth. */
export const FAULTS_VARIABLE = "STREAMCAST_JEPSEN_FAULTS";

/**
 * Seeds that once found a problem, drawing from the classic kinds of fault:
 * each runs every time (tests/system/jepsen/jepsen_classic_test.ts). They
 * found these bugs. A
 * deposed leader answered a publish whose fsync completed after it stepped
 * down, once the next leader's rows filled the offsets it had given it
 * (acknowledged rows lost: 3664698107, 2864350693; fixed by
 * `Replication.committed`). A publish socket with several frames refused
 * at a step-down was never closed: only the first refusal
 * flushed its answers (the producers hung: 128391271, 2157140864,
 * 3529604593; fixed in `server/publish/session.ts`). With the Iceberg
 * table's `--seal-every 1`, 3664698107 and 128391271 found a third: the seal
 * timer rolled a follower's log while its tail was cut in place (the active
 * file closed), and the log refused every later write (fixed in `Log.tick`).
 * 1652135988 found a fourth: subscribers of one node saw a row that the
 * final log holds elsewhere. A rejoining node compared the leader's history
 * with its own at its last term only, and kept rows of an earlier term past
 * where the leader's copy of that term ended — counted as held, and shown
 * (fixed in `truncationPoint`: every term of both histories is compared).
 * 2864350693 found a fifth: a leader whose lease ran out between creating
 * the table's next version and writing its version hint left the hint
 * behind, and the next leader, with no rows to add, never moved it —
 * readers following the hint saw the table 100 rows short (fixed in
 * `TableWriter`: opening a table writes a lagging hint forward). 2157140864
 * found a sixth: a leader reopened with rows the cluster had not committed
 * forgot the rows published after them when the commit index crossed both
 * at once, and framed the next commit's rows with the offsets of rows it had
 * never handed to the fan-out — subscribers saw rows at the wrong offsets
 * (fixed in `Appender`: it knows the offset of its first pending row).
 */
export const CLASSIC_SEEDS: readonly number[] = [
  3664698107,
  2864350693,
  128391271,
  2157140864,
  3529604593,
  1652135988,
];

/**
 * Seeds that once found a problem, drawing from every kind of fault: each
 * runs every time. 2121 found a wiped leader, restarted within its lease,
 * leading the next term with an empty log: it had founded the stream, so it
 * did not count as joining; named in the in-sync set, it won the election,
 * took publishes at offsets already acknowledged, and the followers,
 * refusing to cut committed rows, never followed it — no acknowledgement
 * again. A node back without the rows counts as joining whoever founded the
 * stream.
 */
export const REGRESSION_SEEDS: readonly number[] = [2121];

/**
 * Seeds that once found a problem, drawing from every kind of fault and a
 * full disk, with streams created and deleted and the keyed stream read
 * through row-level grants: each runs every time. 9 fills the leader's disk
 * first: `publisher()` had frames in flight when its first was refused
 * disk_full, took the seqs back, and sent new frames from there; the
 * refusals of the frames in flight, answered after those, took the seqs
 * back again, so its next frame reused a seq the new ones had stored and was
 * answered as a duplicate with another row's offset (fixed in
 * `client/publisher.ts`: only the first failure after the seqs were taken
 * back takes them back). 1630043667 wipes the disk of stream c14's first
 * leader right after it created it, before any follower joined the in-sync
 * set, which named it alone: no node could lead c14 again and a row posted
 * to it was never stored (fixed in `cluster/in_sync.ts`: a stream's set is
 * fresh until it holds R nodes, nothing commits before, and while it is any
 * node may lead). The window is tens of milliseconds: the seed replays it
 * only now and then; tests/cluster/commit_tracker_test.ts holds the rule.
 * In a later run it also found a hole in a socket producer's seqs: a
 * window 120..127 refused whole for the leader's full disk, sent again on
 * a new connection 8 ms before the disk had room, had 120 refused once more
 * and 121..127 stored, because the producer's block had moved up to 127;
 * the next greeting's last_seq 127 made the publisher drop 120 (fixed in
 * `log/producer/table.ts`: the block stays at the lowest refused seq;
 * tests/log/producers_test.ts holds the rule).
 */
export const FOURTH_SEEDS: readonly number[] = [9, 1630043667];

function envNumber(name: string, fallback: number): number {
  const v = Deno.env.get(name);
  if (v === undefined || v === "") return fallback;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new RangeError(`${name} must be a non-negative integer, got ${v}`);
  }
  return n;
}

// What a replay of `seed` draws from unless told: what it found its bug with.
const defaultKinds = (seed: number): Kinds =>
  CLASSIC_SEEDS.includes(seed) ? "classic" : REGRESSION_SEEDS.includes(seed) ? "all" : "fourth";

/** The kinds of fault `seed` draws from: `STREAMCAST_JEPSEN_FAULTS`, else what it found its bug with. */
export function envKinds(seed: number): Kinds {
  const v = Deno.env.get(FAULTS_VARIABLE);
  if (v === undefined || v === "") return defaultKinds(seed);
  if (v !== "all" && v !== "classic" && v !== "fourth") {
    throw new RangeError(`${FAULTS_VARIABLE} must be "all", "classic" or "fourth", got ${v}`);
  }
  return v;
}

/** The seed `STREAMCAST_JEPSEN_SEED` replays alone, or null to run the kept seeds and a fresh one. */
export const replaySeed: number | null = Deno.env.get(SEED_VARIABLE)
  ? envNumber(SEED_VARIABLE, 0) >>> 0
  : null;

/**
 * Registers the test of `seed` drawing faults of `kinds` (`fresh`: a seed
 * drawn for this run): a 3-node cluster under those faults, failing with
 * the problems found and the line that replays it.
 */
export function jepsenTest(seed: number, kinds: Kinds, fresh = false): void {
  const seconds = envNumber(SECONDS_VARIABLE, 40);
  const diskMib = envNumber(DISK_VARIABLE, DISK_MIB);
  const kind = fresh ? "fresh seed" : "seed";
  const faults = kinds === "classic"
    ? " (classic faults)"
    : kinds === "fourth"
    ? " (with a full disk, stream churn, row-level grants)"
    : "";
  // The replay line names the kinds only where the default would not give them.
  const again = kinds === defaultKinds(seed)
    ? `${SEED_VARIABLE}=${seed}`
    : `${SEED_VARIABLE}=${seed} ${FAULTS_VARIABLE}=${kinds}`;
  Deno.test(`jepsen: a 3-node cluster under faults, ${kind} ${seed}${faults}`, async () => {
    console.log(`jepsen: ${kind} ${seed}${faults} (replay with ${again}), faults for ${seconds} s`);
    const report = await jepsenRun(seed, seconds, { kinds, diskMib });
    console.log(
      `jepsen: seed ${seed}: ${report.faults} faults, ${report.rows} rows in the final log\n` +
        report.history.toString(),
    );
    if (report.problems.length > 0) {
      throw new Error(
        `jepsen seed ${seed} (replay with ${again}): ` +
          `${report.problems.length} problems; node folders and stderr kept at ${report.kept}\n` +
          report.problems.slice(0, 40).join("\n"),
      );
    }
  });
}
