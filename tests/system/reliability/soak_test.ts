// SOAK (bounded): STREAMCAST_SOAK_SECONDS long (default 120; CI keeps the
// default so the whole suite stays under 15 minutes). Steady ingest into a
// real `cli.ts serve` while 8 virtual subscribers join, pause, leave and
// resume from their last offset (see _soak.ts). At the end every subscriber's
// rows are a contiguous, byte-exact run of the log, the log reads back and
// verifies, and the server's RSS never went over 256 MiB.
import { assert, assertEquals } from "../../harness/assert.ts";
import { runSoak } from "../../harness/soak/soak.ts";

const SECONDS = Number(Deno.env.get("STREAMCAST_SOAK_SECONDS") ?? 120);
const RSS_LIMIT_MIB = 256;

Deno.test(`soak: ${SECONDS} s of ingest with subscribers joining, pausing, leaving and resuming`, async () => {
  const r = await runSoak({ seconds: SECONDS, seed: 7, log: (l) => console.log(l) });
  console.log(
    `soak: ${r.rows} rows in ${r.seconds} s; ${r.sessions} sessions, ${r.pauses} pauses, ` +
      `${r.drops} dropped connections, ${r.tooSlow} closed 4429; ${r.rowsDelivered} rows ` +
      `delivered; server RSS max ${r.rssMaxMiB.toFixed(1)} MiB, at the end ` +
      `${
        r.rssEndMiB.toFixed(1)
      } MiB; server fds ${r.fdsStart} at the start, ${r.fdsEnd} at the end`,
  );
  for (const [name, m] of Object.entries(r.memory)) {
    console.log(
      `soak: ${name}: RSS slope over the last two thirds ${
        m.rssSlopeMiBPerMin.toFixed(2)
      } MiB/min ` +
        `(heap used ${m.heapUsedSlopeMiBPerMin.toFixed(2)}, external ${
          m.externalSlopeMiBPerMin.toFixed(2)
        } MiB/min; heap used at the end ${m.heapUsedLastMiB.toFixed(1)} MiB)`,
    );
  }
  assertEquals(r.failures, [], `soak failures:\n${r.failures.join("\n")}`);
  assertEquals(r.serverExit, 0, "the server stops cleanly on SIGTERM");
  assert(r.rssMaxMiB < RSS_LIMIT_MIB, `server RSS reached ${r.rssMaxMiB.toFixed(1)} MiB`);
  assert(r.fdsEnd <= r.fdsStart + 8, `server fds ${r.fdsStart} -> ${r.fdsEnd}`);
});
