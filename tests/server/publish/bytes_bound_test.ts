// Publish memory bounded by bytes: per socket, frames taken into the window
// hold at most max_in_flight_bytes (one frame always may); per server, frames
// taken from every socket and POST bodies hold at most max_publish_server_bytes.
// Beyond either, frames wait unread and bodies are not read; answers free room.
import { assert, assertEquals } from "../../harness/assert.ts";
import { until } from "../../harness/util.ts";
import { publisher } from "../../../client/mod.ts";
import { REAL_IO } from "../../../log/disk/io.ts";
import type { LogIo } from "../../../log/mod.ts";
import { startFixture } from "../../harness/publish_in_process.ts";
import { RawPub } from "./_raw_pub.ts";

// Commits that wait until the test opens the gate: what is taken stays in flight.
function gatedIo(): { io: LogIo; open(): void; close(): void } {
  let gate: Promise<void> | null = null;
  let release = () => {};
  return {
    io: {
      ...REAL_IO,
      write: async (file, bytes) => {
        if (gate !== null && file.seekSync(0, Deno.SeekMode.Current) > 0) await gate;
        await REAL_IO.write(file, bytes);
      },
    },
    close() {
      gate = new Promise((r) => (release = r));
    },
    open() {
      gate = null;
      release();
    },
  };
}

async function refusals(http: string, reason: string): Promise<number> {
  const text = await (await fetch(`${http}/_/metrics`)).text();
  const line = text.split("\n").find((l) =>
    l.startsWith("streamcast_publish_refusals_total{") && l.includes(`reason="${reason}"`)
  );
  return Number(line?.split(" ").at(-1) ?? 0);
}

// A frame of about `n` bytes of text: one row.
const frame = (seq: number, n: number) => ({ sym: "x".repeat(n - 40), px: seq });
const frameBytes = (seq: number, n: number) =>
  JSON.stringify({ seq, rows: [frame(seq, n)] }).length;

Deno.test("publish socket: frames in flight are bounded by max_in_flight_bytes; the rest wait unread", async () => {
  const g = gatedIo();
  const f = await startFixture({
    logOptions: { io: g.io },
    maxPublishInflightBytes: 1000,
    maxPublishBytes: 4096,
  });
  try {
    const p = await RawPub.open(`${f.ws}/t/publish?producer=b1`);
    assertEquals(p.greeting!.max_in_flight_bytes, 1000);
    assertEquals(frameBytes(1, 400) <= 400, true);
    g.close();
    for (let seq = 1; seq <= 6; seq++) p.send(seq, [frame(seq, 400)]);
    // Two frames of ~400 bytes fit in 1000: the first commits (its write
    // waits at the gate), the second is taken into the next commit.
    await until(() => f.stream.log!.nextOffset === 3, 5000, "two frames taken");
    await new Promise((r) => setTimeout(r, 100)); // nothing more is taken while the gate is shut
    assertEquals(f.stream.log!.nextOffset, 3);
    assertEquals(p.answers.length, 0);
    g.open();
    await p.wait(6);
    assertEquals(p.answers.map((a) => a.seq), [1, 2, 3, 4, 5, 6]);
    assertEquals(p.answers.map((a) => a.first), [1, 2, 3, 4, 5, 6]);
    // One frame larger than the window goes alone.
    p.send(7, [frame(7, 3000)]);
    await p.wait(7);
    assertEquals(p.answers[6].first, 7);
    // A publisher that does not keep to the window: past the larger of the
    // window and the largest frame (4096) held, the socket is closed.
    // (Decided while frame 8 is in flight; the socket closes once it is answered.)
    g.close();
    for (let seq = 8; seq <= 40; seq++) p.send(seq, [frame(seq, 900)]);
    await until(async () => (await refusals(f.http, "too_many_in_flight")) === 1, 5000, "refused");
    g.open();
    await until(() => p.closed !== null, 5000, "closed");
    assertEquals(p.closed!.code, 1008);
    assert(p.closed!.reason.includes("too_many_in_flight"), p.closed!.reason);
    assertEquals(p.answers.at(-1)?.seq, 8);
  } finally {
    g.open();
    await f.close();
  }
});

Deno.test("publish: frames of every socket and POST bodies together are bounded by max_publish_server_bytes", async () => {
  const g = gatedIo();
  const f = await startFixture({
    logOptions: { io: g.io },
    maxPublishServerBytes: 1000,
    maxPublishBytes: 4096,
  });
  try {
    const a = await RawPub.open(`${f.ws}/t/publish?producer=s1`);
    const b = await RawPub.open(`${f.ws}/t/publish?producer=s2`);
    g.close();
    for (let seq = 1; seq <= 3; seq++) {
      a.send(seq, [frame(seq, 400)]);
      b.send(seq, [frame(seq, 400)]);
    }
    // ~400-byte frames: two fit in the server's 1000, whichever sockets they come from.
    await until(() => f.stream.log!.nextOffset === 3, 5000, "two frames taken");
    await new Promise((r) => setTimeout(r, 100));
    assertEquals(f.stream.log!.nextOffset, 3);
    // A POST waits too: its body is not read while the budget is full.
    const body = JSON.stringify(frame(9, 400));
    let posted = false;
    const post = fetch(`${f.http}/t`, { method: "POST", body }).then(async (res) => {
      posted = true;
      return { status: res.status, body: await res.json() };
    });
    await new Promise((r) => setTimeout(r, 100));
    assertEquals([posted, f.stream.log!.nextOffset], [false, 3]);
    g.open();
    await a.wait(3);
    await b.wait(3);
    const got = await post;
    assertEquals([got.status, got.body.count], [200, 1]);
    assertEquals(f.stream.log!.endOffset, 8);
    for (const p of [a, b]) {
      assertEquals(p.answers.map((x) => "first" in x), [true, true, true]);
      await p.close();
    }
  } finally {
    g.open();
    await f.close();
  }
});

Deno.test("publisher keeps to the greeting's max_in_flight_bytes: large frames pipelined, never closed", async () => {
  const f = await startFixture({ maxPublishInflightBytes: 2000 });
  try {
    const pub = await publisher(`${f.ws}/t`, { producer: "w" });
    assertEquals(pub.greeting!.max_in_flight_bytes, 2000);
    const all = [];
    for (let k = 1; k <= 40; k++) all.push(pub.publish([frame(k, 900)]));
    const got = await Promise.all(all);
    assertEquals(got.map((a) => a.first), Array.from({ length: 40 }, (_, i) => i + 1));
    await pub.close();
  } finally {
    await f.close();
  }
});
