// Crash safety of the real server (docs/SPEC.md §1.5): `cli.ts serve --stdin` on a
// durable stream with small segments (so sealing and chunking happen all the
// time) is fed continuously and SIGKILLed at a random moment, 20 times, with
// 2-3 subscribers attached (live single frames, batch frames from an old
// offset, sometimes single frames from the start). After every restart on
// the same root:
// - the log is offsets 1..end-1 with no gap, its rows in feed order with no
//   duplicate, and everything the previous restart found is still there;
// - every row any subscriber ever received is in the log at its offset,
//   byte-identical (read back by subscribing at offset 1 with frames=batch);
// - the next row fed gets the greeting's end_offset (offsets continue);
// - `cli.ts verify ROOT/NAME` exits 0.
// Seeded: STREAMCAST_KILL_SEED (the seed is in every failure message).
import { assert, assertEquals } from "../../harness/assert.ts";
import { rng, until } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";
import type { ServeProc } from "../../harness/serve.ts";
import {
  lineMsg,
  lineOffset,
  NAME,
  rowText,
  serveChild,
  sleep,
  verifyCli,
  workspace,
} from "../../harness/soak/workload.ts";

const SEED = Number(Deno.env.get("STREAMCAST_KILL_SEED") ?? 4242);
const ROUNDS = 20;
const FLAGS = ["--segment-bytes", "16384", "--seal-every", "1", "--max-replay", "none"];

/** Reads the whole log through the server: subscribe at 1 with frames=batch. */
async function readLog(
  s: ServeProc,
  logDir: string,
  rows: number,
  ctx: string,
): Promise<string[]> {
  if (rows === 0) return [];
  const sub = await TestSub.open(`${s.ws}/${NAME}?offset=1&frames=batch`);
  try {
    assert(sub.closed === null, `${ctx}: replay refused: ${JSON.stringify(sub.closed)}`);
    try {
      await sub.waitLines(rows, 30_000);
    } catch {
      // An incomplete replay: say where it stopped, what it missed, what the log
      // folder holds and what the server said.
      const last = sub.lines.length > 0 ? lineOffset(sub.lines[sub.lines.length - 1]) : 0;
      const gaps: string[] = [];
      let expect = 1;
      for (const line of sub.lines) {
        const o = lineOffset(line);
        if (o !== expect) gaps.push(`${expect}..${o - 1}`);
        expect = o + 1;
      }
      if (expect <= rows) gaps.push(`${expect}..${rows} (the tail)`);
      const segs = [...Deno.readDirSync(logDir)].map((e) => e.name).filter((n) =>
        n.endsWith(".seg")
      ).sort().map((n) => Number(n.slice(0, 20)));
      const manifest = (await (await fetch(`${s.url}/${NAME}/manifest`)).json()) as {
        chunks: { first: number; last: number }[];
      };
      const head = await (await fetch(`${s.url}/${NAME}/head`)).text();
      const metrics = (await (await fetch(`${s.url}/_/metrics`)).text())
        .split("\n").filter((l) => /subscribers\{|drops_total\{|replay_rows/.test(l)).join("\n");
      throw new Error(
        `${ctx}: replay from 1 incomplete: ${sub.lines.length} of ${rows} rows after 30 s ` +
          `(last offset ${last}, closed ${JSON.stringify(sub.closed)}); offsets missing: ` +
          `${gaps.join(", ") || "none"}; segments now start at ${segs.join(",")}; chunks now ` +
          `${manifest.chunks?.map((c) => `${c.first}..${c.last}`).join(",")}; head ${head}` +
          `${metrics}\nserver stderr:\n${s.stderr()}`,
      );
    }
    assert(sub.lines.length >= rows, `${ctx}: replay closed after ${sub.lines.length} rows`);
    await sleep(30);
    assertEquals(sub.lines.length, rows, `${ctx}: replay sent more rows than end_offset - 1`);
    return [...sub.lines];
  } finally {
    await sub.close();
  }
}

interface Attached {
  sub: TestSub;
  kind: string;
  /** First offset it must receive (from the greeting for a live one). */
  start: number;
}

Deno.test("kill loop: SIGKILLed 20 times during ingest, the server keeps every row a subscriber saw, continues offsets and verifies", async () => {
  const w = await workspace();
  const rand = rng(SEED);
  const received = new Map<number, string>(); // offset -> line, across every subscriber and round
  let previous: string[] = []; // the log as the last restart found it
  let fed = 0; // highest seq written to a server's stdin
  let kills = 0;
  const t0 = Date.now();
  const stats = { rowsAtEnd: 0, received: 0, replayMs: 0 };
  try {
    for (let round = 0; round <= ROUNDS; round++) {
      const ctx = `seed ${SEED} round ${round}`;
      const s: ServeProc = await serveChild(w, FLAGS);
      const attached: Attached[] = [];
      let feeding = true;
      let feeder: Promise<void> = Promise.resolve();
      try {
        const head = await (await fetch(`${s.url}/${NAME}/head`)).json();
        const end = head.end_offset as number;
        // 1. The log as the restarted server serves it.
        const r0 = Date.now();
        const log = await readLog(s, w.logDir, end - 1, ctx);
        stats.replayMs += Date.now() - r0;
        let lastSeq = 0;
        for (let i = 0; i < log.length; i++) {
          assertEquals(
            lineOffset(log[i]),
            i + 1,
            `${ctx}: the log has a gap or disorder at ${i + 1}`,
          );
          const msg = JSON.parse(lineMsg(log[i]));
          assert(
            msg.seq > lastSeq,
            `${ctx}: row seq ${msg.seq} at offset ${
              i + 1
            } after ${lastSeq} (duplicate or reordered)`,
          );
          assert(msg.seq <= fed, `${ctx}: row seq ${msg.seq} was never fed`);
          assertEquals(
            lineMsg(log[i]),
            rowText(msg.seq),
            `${ctx}: row at ${i + 1} is not the row fed`,
          );
          lastSeq = msg.seq;
        }
        for (let i = 0; i < previous.length; i++) {
          assertEquals(
            log[i],
            previous[i],
            `${ctx}: offset ${i + 1} changed or vanished since the last restart`,
          );
        }
        for (const [offset, line] of received) {
          assert(
            offset < end,
            `${ctx}: a subscriber got offset ${offset} but the log ends at ${end}`,
          );
          assertEquals(
            log[offset - 1],
            line,
            `${ctx}: offset ${offset} differs from what a subscriber got`,
          );
        }
        previous = log;
        // 2. The log checks out on disk.
        const v = await verifyCli(w.logDir);
        assertEquals(v.code, 0, `${ctx}: cli.ts verify failed:\n${v.out}`);
        if (round === ROUNDS) {
          stats.rowsAtEnd = end - 1;
          assertEquals((await s.signal("SIGTERM")).code, 0, `${ctx}: clean stop`);
          break;
        }
        // 3. Offsets continue: the next row fed is end_offset.
        const live = await TestSub.open(`${s.ws}/${NAME}`);
        assertEquals(live.greeting?.end_offset, end, `${ctx}: greeting end_offset`);
        attached.push({ sub: live, kind: "live single", start: end });
        fed++;
        await s.write(rowText(fed) + "\n");
        await live.waitLines(1, 10_000);
        assertEquals(
          live.lines[0],
          `[${end},${rowText(fed)}]`,
          `${ctx}: the first row after a restart`,
        );
        // 4. More subscribers: batch from an old offset; sometimes single from the start.
        const old = Math.max(1, end - Math.floor(rand() * 400));
        const batch = await TestSub.open(`${s.ws}/${NAME}?offset=${old}&frames=batch`);
        attached.push({ sub: batch, kind: `batch from ${old}`, start: old });
        if (rand() < 0.5) {
          const all = await TestSub.open(`${s.ws}/${NAME}?offset=1`);
          attached.push({ sub: all, kind: "single from 1", start: 1 });
        }
        // 5. Feed continuously; kill at a random moment.
        feeder = (async () => {
          while (feeding) {
            const n = 1 + Math.floor(rand() * 12);
            let text = "";
            for (let k = 0; k < n; k++) text += rowText(fed + k + 1) + "\n";
            try {
              await s.write(text);
            } catch {
              return; // the server is gone
            }
            fed += n;
            await sleep(1 + Math.floor(rand() * 4));
          }
        })();
        await sleep(150 + rand() * 650);
        s.proc.kill("SIGKILL");
        kills++;
        feeding = false;
        await feeder;
        await Promise.all(attached.map((a) => until(() => a.sub.closed !== null, 10_000, "close")));
        // Each subscriber's own sequence is contiguous from where it started.
        for (const a of attached) {
          const lines = a.sub.lines;
          for (let i = 0; i < lines.length; i++) {
            const o = lineOffset(lines[i]);
            assertEquals(o, a.start + i, `${ctx}: ${a.kind} subscriber got ${o} at position ${i}`);
            const seen = received.get(o);
            assert(
              seen === undefined || seen === lines[i],
              `${ctx}: two subscribers saw different rows at ${o}`,
            );
            received.set(o, lines[i]);
          }
        }
      } finally {
        feeding = false;
        await feeder;
        for (const a of attached) await a.sub.close();
        await s.stop();
      }
    }
    stats.received = received.size;
    console.log(
      `kill loop: ${kills} SIGKILLs, ${stats.rowsAtEnd} rows in the log at the end, ` +
        `${stats.received} distinct rows seen by subscribers, ${fed} fed, ` +
        `${((Date.now() - t0) / 1000).toFixed(1)} s (replays ${stats.replayMs} ms)`,
    );
    assertEquals(kills, ROUNDS);
    assert(stats.received > 0, "subscribers saw rows");
  } finally {
    await w.rm();
  }
});
