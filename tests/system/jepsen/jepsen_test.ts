// A cluster under faults in the manner of Jepsen (docs/SPEC.md §11.11): three real
// `cli.ts serve --cluster` nodes and a real etcd, producers with producer ids
// over HTTP, the publish socket and `publisher(urls)`, subscribers on every
// node (raw WebSocket and `connect(urls)` with zstd-stream, some filtered),
// and, one at a time at moments drawn from a seed, a node SIGKILLed or
// SIGSTOPped past its lease (the leader or a follower), etcd SIGSTOPped or
// SIGKILLed, one node cut from etcd, one node's etcd answers lost (a proxy
// lets etcd apply each request and drops the answer — every answer, each
// with a probability, each write's, or one write's — for a while, another
// node sometimes SIGSTOPped meanwhile so that it has to write), or one
// node's disk wiped (the node stopped, its root emptied, started again with
// the same name and flags), or one node's disk filled (below) — each
// healed before the next. Then:
// every acknowledged row once at its offset (an `answer_lost` row once), no
// subscriber saw a row the final log lacks, a row twice or a gap (filtered
// ones exactly the matching rows), every node's log the same, the stream's
// Iceberg table (in the S3 archive the nodes share, committed by whichever
// node leads) holding each row of the final log once, read by DuckDB and
// icebird, and `verify` passing on each node's folder.
//
// Each run takes a fresh seed, printed; the seeds that once failed run every
// time, those of the classic kinds in jepsen_classic_test.ts (a file of its
// own, so that a parallel run spreads them over two workers), the others
// here (tests/harness/jepsen/seeds.ts holds them and their stories).
// `STREAMCAST_JEPSEN_SEED=N` replays seed N alone (the same faults at the
// same moments of the run; the timing of the processes around them is the
// machine's). Faults go on for `STREAMCAST_JEPSEN_SECONDS` (default 40: about
// 60–90 s a run with the start and the checks); set it to minutes to run it
// as a benchmark of endurance — with `STREAMCAST_JEPSEN_DISK_MIB` (default
// 256) giving the fourth kind's nodes disks that hold the longer logs.
//
// A fresh seed draws its faults from every kind, a full disk among them
// (the fourth kind: each node's root a small tmpfs the test mounts, one of
// them filled and freed), and its run also creates and deletes streams while
// the faults go on, turns signed tokens on and reads a keyed stream through
// row-level grants (tests/harness/jepsen/run.ts). The seeds found before
// that draw as they did then, so that each draws the very faults it failed
// with: those found before lost answers and wiped disks existed from the
// classic kinds alone (their nodes reaching etcd through the TCP proxy
// alone), the next ones from every kind but a full disk.
// `STREAMCAST_JEPSEN_FAULTS=classic` (or `all`, or `fourth`) says which for a
// replayed seed; by default a seed of `CLASSIC_SEEDS` replays classic, one
// of `REGRESSION_SEEDS` all, any other fourth.
import {
  envKinds,
  FOURTH_SEEDS,
  jepsenTest,
  REGRESSION_SEEDS,
  replaySeed,
} from "../../harness/jepsen/seeds.ts";

if (replaySeed !== null) jepsenTest(replaySeed, envKinds(replaySeed));
else {
  const fresh = crypto.getRandomValues(new Uint32Array(1))[0];
  jepsenTest(fresh, envKinds(fresh), true);
  for (const seed of FOURTH_SEEDS) jepsenTest(seed, "fourth");
  for (const seed of REGRESSION_SEEDS) jepsenTest(seed, "all");
}
