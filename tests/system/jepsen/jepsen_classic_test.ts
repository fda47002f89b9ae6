// The Jepsen-style test's seeds that once found a problem drawing from the
// classic kinds of fault (tests/harness/jepsen/seeds.ts tells what each
// found), each run every time; jepsen_test.ts runs a fresh seed and the
// others. A replay (`STREAMCAST_JEPSEN_SEED=N`) runs in jepsen_test.ts alone.
import { CLASSIC_SEEDS, jepsenTest, replaySeed } from "../../harness/jepsen/seeds.ts";

if (replaySeed === null) {
  for (const seed of CLASSIC_SEEDS) jepsenTest(seed, "classic");
}
