// SIGKILL of the server with frames in flight, and of a producer mid-stream:
// after restarts and resends, every acknowledged row is present exactly once
// and no row is present twice.
import { assert, assertEquals } from "../../harness/assert.ts";
import { until } from "../../harness/util.ts";
import { CLI, withTimeout } from "../../harness/serve.ts";
import { type Published, publisher, PublishError } from "../../../client/mod.ts";
import { endOffset, readAll, startPublishServer } from "../../harness/publish_child.ts";

const ROWS = 25;
const rowsOf = (seq: number) =>
  Array.from({ length: ROWS }, (_, i) => ({ sym: `s${seq}`, px: seq * 1000 + i }));

Deno.test("publish: the server SIGKILLed with frames in flight; the publisher resends; every row once", async () => {
  const s = await startPublishServer();
  try {
    const pub = await publisher(`${s.ws}/t`, {
      producer: "kill-1",
      backoff: { minMs: 50, maxMs: 250 },
    });
    const FRAMES = 400;
    const acked = new Map<number, Published>();
    // Frames whose answer was lost with the kill and that the server has
    // stored later seqs past: it says so (answer_lost), never "stored".
    const lost = new Set<number>();
    const all: Promise<unknown>[] = [];
    for (let seq = 1; seq <= FRAMES; seq++) {
      all.push(
        pub.publish(rowsOf(seq)).then((a) => acked.set(a.seq, a), (err) => {
          if (!(err instanceof PublishError && err.error === "answer_lost")) throw err;
          assertEquals(err.seq, seq);
          lost.add(seq);
        }),
      );
    }
    await until(() => acked.size >= 30, 20_000, "30 acks");
    assert(acked.size < FRAMES, "the kill must come with frames in flight");
    const before = new Map(acked);
    await s.restart();
    await withTimeout(Promise.all(all), 60_000, "every frame answered");
    await pub.close();
    const total = FRAMES * ROWS;
    assertEquals(await endOffset(s.http), total + 1);
    const got = await readAll(s.ws, total);
    assertEquals(got.map((g) => g.offset), Array.from({ length: total }, (_, i) => i + 1));
    const rows = got.map((g) => JSON.parse(g.line)[1] as { sym: string; px: number });
    const seen = new Map<number, number>();
    for (const r of rows) seen.set(r.px, (seen.get(r.px) ?? 0) + 1);
    for (let seq = 1; seq <= FRAMES; seq++) {
      for (let i = 0; i < ROWS; i++) assertEquals(seen.get(seq * 1000 + i), 1, `row ${seq}/${i}`);
    }
    // Every frame is answered once: acknowledged where its ack said (before
    // and after the kill), or — its answer lost — named as such.
    assertEquals(acked.size + lost.size, FRAMES);
    for (const a of acked.values()) {
      assertEquals(rows.slice(a.first - 1, a.last), rowsOf(a.seq), `frame ${a.seq}`);
    }
    for (const a of before.values()) assertEquals(acked.get(a.seq), a);
    for (const seq of lost) assert(!before.has(seq) && !acked.has(seq), `frame ${seq}`);
  } finally {
    await s.stop();
  }
});

Deno.test("publish: cli.ts publish SIGKILLed mid-stream, rerun with its --producer: every line once, in order", async () => {
  const s = await startPublishServer();
  try {
    const LINES = 6000;
    const lines = Array.from(
      { length: LINES },
      (_, i) => JSON.stringify({ sym: `l${i + 1}`, px: i + 1 }),
    );
    const run = (input: string[], slow = false) => {
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", CLI, "publish", `${s.ws}/t`, "--producer", "cli-1", "--batch", "20"],
        stdin: "piped",
        stdout: "null",
        stderr: "piped",
        env: { NO_COLOR: "1" },
      }).spawn();
      const w = child.stdin.getWriter();
      const enc = new TextEncoder();
      const fed = (async () => {
        // Slowly for the run that is killed, so that the kill comes mid-stream.
        const step = slow ? 100 : input.length;
        for (let i = 0; i < input.length; i += step) {
          await w.write(enc.encode(input.slice(i, i + step).join("\n") + "\n"));
          if (slow) await new Promise((r) => setTimeout(r, 20));
        }
      })();
      return { child, w, fed };
    };
    // The first run gets the first half, and is killed once rows are arriving.
    const first = run(lines.slice(0, 3000), true);
    await until(async () => (await endOffset(s.http)) > 500, 30_000, "rows from the first run");
    first.child.kill("SIGKILL");
    await first.fed.catch(() => {});
    await first.w.close().catch(() => {});
    await first.child.status;
    await first.child.stderr.cancel();
    const stored = (await endOffset(s.http)) - 1;
    assert(stored > 0 && stored < 3000, `${stored} rows after the kill`);
    const second = run(lines);
    await second.fed;
    await second.w.close();
    const status = await withTimeout(second.child.status, 60_000, "the rerun");
    const err = await new Response(second.child.stderr).text();
    assertEquals(status.code, 0, err);
    assert(err.includes(`holds through line`), err);
    const got = await readAll(s.ws, LINES);
    assertEquals(got.length, LINES);
    assertEquals(
      got.map((g) => JSON.parse(g.line)[1].px),
      Array.from({ length: LINES }, (_, i) => i + 1),
    );
  } finally {
    await s.stop();
  }
});
