// `cli.ts verify` checks the producer journal a real server wrote: a good one
// passes (and a torn last append is no finding); a flipped byte, seqs going
// back, and records of rows the log does not hold fail naming the record.
import { assert, assertEquals } from "../harness/assert.ts";
import { join } from "node:path";
import { publisher } from "../../client/mod.ts";
import { encodeRecords, parseJournal, PRODUCERS_FILE } from "../../log/producer/journal.ts";
import type { ProducerRecord } from "../../log/producer/journal.ts";
import { CLI } from "../harness/serve.ts";
import { verifyLog } from "../../log/mod.ts";
import { startPublishServer } from "../harness/publish_child.ts";

async function verify(dir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "verify", dir],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

function journalOf(records: readonly ProducerRecord[]): Uint8Array {
  const body = encodeRecords(records);
  return new Uint8Array([0x53, 0x43, 0x50, 0x4a, 0, 0, 0, 1, ...body]);
}

Deno.test("verify checks producers.log: a good journal passes, damage and inconsistency name the record", async () => {
  const s = await startPublishServer();
  const dir = join(s.root, "data", "t");
  const path = join(dir, PRODUCERS_FILE);
  try {
    for (const producer of ["p-1", "p-2", "p-3"]) {
      const pub = await publisher(`${s.ws}/t`, { producer });
      for (let k = 0; k < 3; k++) {
        await pub.sendMany([{ sym: producer, px: k }, { sym: producer, px: k }]);
      }
      await pub.close();
    }
    await s.proc.stop(); // SIGKILL: the journal as a crash leaves it
    const good = await Deno.readFile(path);
    const { records } = parseJournal(good, path);
    assertEquals(records.length, 9);
    assertEquals(records.at(-1)!.last, 18);

    const ok = await verify(dir);
    assertEquals(ok.code, 0, ok.stderr);
    assert(ok.stdout.includes("producers.log: 9 records  3 producers"), ok.stdout);
    assert(ok.stdout.includes("ok: 18 rows checked"), ok.stdout);

    // A torn last append (cut short) is what open cuts: no finding.
    const torn = encodeRecords([{ producer: "p-1", seq: 4, first: 19, last: 20 }]);
    await Deno.writeFile(path, new Uint8Array([...good, ...torn.subarray(0, torn.length - 3)]));
    const t = await verify(dir);
    assertEquals(t.code, 0, t.stderr);
    assert(/torn tail \d+ B/.test(t.stdout), t.stdout);

    // A flipped byte in the body of record 5: later records would be cut off.
    const at5 = 8 + records.slice(0, 4).reduce((n, r) => n + encodeRecords([r]).length, 0);
    const flipped = good.slice();
    flipped[at5 + 12] ^= 0x01;
    await Deno.writeFile(path, flipped);
    const bad = await verify(dir);
    assertEquals(bad.code, 1, bad.stdout);
    assert(bad.stderr.includes(`at byte ${at5} in ${path}`), bad.stderr);
    assert(bad.stderr.includes("record 5: checksum mismatch"), bad.stderr);

    // Checksums fine, seqs going back for a producer.
    const back = records.map((r) => ({ ...r }));
    back[8] = { ...back[8], seq: 1 }; // p-3's third record claims seq 1 after its seq 2
    await Deno.writeFile(path, journalOf(back));
    const b = await verify(dir);
    assertEquals(b.code, 1, b.stdout);
    assert(
      b.stderr.includes(
        'record 9 (producer "p-3" seq 1) follows its seq 2 (rows 15..16): seqs must increase per producer',
      ),
      b.stderr,
    );
    assert(b.stderr.includes(`in ${path}`), b.stderr);

    // Checksums fine, a record of rows the log does not hold (past its end, a gap before).
    await Deno.writeFile(
      path,
      journalOf([...records, { producer: "p-1", seq: 9, first: 40, last: 41 }]),
    );
    const past = await verify(dir);
    assertEquals(past.code, 1, past.stdout);
    assert(
      past.stderr.includes(
        'record 10 (producer "p-1" seq 9) holds rows 40..41, but the log ends at 18: rows 19..39',
      ),
      past.stderr,
    );

    // Rows of an unfinished commit at the end (from the log's end on) are what open drops: fine.
    await Deno.writeFile(
      path,
      journalOf([...records, { producer: "p-2", seq: 4, first: 19, last: 20 }]),
    );
    const pending = await verify(dir);
    assertEquals(pending.code, 0, pending.stderr);
    assert(pending.stdout.includes("1 of an unacknowledged commit"), pending.stdout);
  } finally {
    await s.stop();
  }
});

Deno.test("verify beside a live server with producers publishing finds nothing", async () => {
  const s = await startPublishServer();
  const dir = join(s.root, "data", "t");
  try {
    const pubs = await Promise.all(
      ["live-1", "live-2", "live-3"].map((producer) => publisher(`${s.ws}/t`, { producer })),
    );
    let stop = false;
    const pumping = pubs.map(async (pub, k) => {
      let i = 0;
      while (!stop) {
        await pub.sendMany(
          Array.from({ length: 1 + (i % 7) }, (_, j) => ({ sym: `k${k}`, px: i * 10 + j })),
        );
        i++;
      }
    });
    let runs = 0;
    let journalled = 0;
    const until = Date.now() + 3_000;
    while (Date.now() < until) {
      const report = await verifyLog(dir);
      assertEquals(report.error, null, `verify run ${runs + 1}: ${report.error?.message}`);
      journalled = report.producers?.records ?? 0;
      runs++;
    }
    stop = true;
    await Promise.all(pumping);
    for (const pub of pubs) await pub.close();
    assert(runs >= 3, `${runs} verify runs`);
    assert(journalled > 10, `the journal grew while verified (${journalled} records)`);
  } finally {
    await s.stop();
  }
});
