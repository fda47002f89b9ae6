// The mirrors' soak (bounded): STREAMCAST_SOAK_SECONDS long (default
// 45 here; bench/e2e/soak_mirrors.ts runs it for 30 minutes). A primary fed on
// stdin and by a WebSocket and an HTTP publisher, two followers, and
// subscribers (single, batch, batch+zstd, and the client library's
// zstd-with-dictionary; unfiltered and two `where=` filters) visiting all
// three servers, stalling, leaving and coming back (see tests/harness/soak/soak_mirrors.ts). At
// the end every acked frame is in the log once at its offsets, each
// subscriber got exactly its filtered share of the log from where it
// started, both followers equal the primary, all three verify, and no server
// process's RSS went over 256 MiB. Seeded: a fresh seed each run, printed;
// STREAMCAST_SOAK_SEED replays one.
import { assert, assertEquals } from "../../harness/assert.ts";
import { runMirrorsSoak } from "../../harness/soak/soak_mirrors.ts";

const SECONDS = Number(Deno.env.get("STREAMCAST_SOAK_SECONDS") ?? 45);
const SEED_ENV = Deno.env.get("STREAMCAST_SOAK_SEED");
const SEED = SEED_ENV ? Number(SEED_ENV) >>> 0 : crypto.getRandomValues(new Uint32Array(1))[0];
const RSS_LIMIT_MIB = 256;

Deno.test(`soak (mirrors): ${SECONDS} s of stdin and publishers into a primary with two followers and subscribers moving between them`, async () => {
  console.log(`soak2: seed ${SEED} (replay with STREAMCAST_SOAK_SEED=${SEED})`);
  const r = await runMirrorsSoak({ seconds: SECONDS, seed: SEED, log: (l) => console.log(l) });
  console.log(
    `soak2: ${r.rows} rows (${r.stdinRows} from stdin, ${r.publishedFrames} published frames); ` +
      `${r.sessions} sessions (primary/follower 1/follower 2: ${r.visits.join("/")}), ` +
      `${r.pauses} pauses, ${r.drops} drops, ${r.tooSlow} closed 4429, ${r.rowsDelivered} rows ` +
      `delivered, ${r.publishRetries} publish retries`,
  );
  for (const [name, m] of Object.entries(r.memory)) {
    console.log(
      `soak2: ${name}: RSS ${m.rssFirstMiB.toFixed(0)} -> ${m.rssLastMiB.toFixed(0)} MiB (max ${
        m.rssMaxMiB.toFixed(0)
      }), slope ${m.rssSlopeMiBPerMin.toFixed(2)} MiB/min`,
    );
  }
  assertEquals(r.failures, [], `seed ${SEED}: soak failures:\n${r.failures.join("\n")}`);
  assertEquals(r.exits, [0, 0, 0], `seed ${SEED}: every server stops cleanly on SIGTERM`);
  for (const [name, m] of Object.entries(r.memory)) {
    assert(m.rssMaxMiB < RSS_LIMIT_MIB, `${name}: RSS reached ${m.rssMaxMiB.toFixed(1)} MiB`);
  }
  assert(r.rowsDelivered > 0 && r.publishedFrames > 0, "rows flowed");
});
