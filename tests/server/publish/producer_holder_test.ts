// With --tokens a producer id belongs to the token's holder: another holder
// sending the same id is another producer with its own last_seq, and
// --max-producers counts per holder, so one holder flooding ids forgets only
// its own. Through a real `serve` process, across a restart.
import { assertEquals } from "../../harness/assert.ts";
import { startPublishServer } from "../../harness/publish_child.ts";
import { RawPub } from "./_raw_pub.ts";

const ALICE = "alice-token-0123456789";
const BOB = "bob-token-0123456789ab";

async function post(
  http: string,
  token: string,
  producer: string,
  seq: number,
  px: number,
): Promise<[number, Record<string, unknown>]> {
  const res = await fetch(`${http}/t`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "streamcast-producer": producer,
      "streamcast-seq": String(seq),
    },
    body: JSON.stringify({ sym: "x", px }) + "\n",
  });
  return [res.status, await res.json()];
}

async function greeting(ws: string, token: string, producer: string) {
  const p = await RawPub.open(`${ws}/t/publish?producer=${producer}&access_token=${token}`);
  await p.close();
  return p.greeting!;
}

Deno.test("publish with tokens: two holders sending one producer id are two producers; a flood by one forgets only its own; it survives a restart", async () => {
  const s = await startPublishServer(["--max-producers", "4"], false, async (root) => {
    await Deno.writeTextFile(
      `${root}/tokens.json`,
      JSON.stringify({
        tokens: [
          { name: "alice", token: ALICE, streams: ["t"], publish: ["t"] },
          { name: "bob", token: BOB, streams: ["t"], publish: ["t"] },
        ],
      }),
    );
    return ["--tokens", `${root}/tokens.json`];
  });
  try {
    assertEquals(await post(s.http, ALICE, "feed", 1, 1), [200, { first: 1, last: 1, count: 1 }]);
    assertEquals(await post(s.http, ALICE, "feed", 2, 2), [200, { first: 2, last: 2, count: 1 }]);
    // Bob's seq 2 under the same id is stored: it is not alice's seq 2.
    assertEquals(await post(s.http, BOB, "feed", 2, 3), [200, { first: 3, last: 3, count: 1 }]);
    // Bob jumping far ahead does not make alice's next seq stale.
    assertEquals(await post(s.http, BOB, "feed", 1_000_000, 4), [
      200,
      { first: 4, last: 4, count: 1 },
    ]);
    assertEquals(await post(s.http, ALICE, "feed", 3, 5), [200, { first: 5, last: 5, count: 1 }]);
    // Each sees its own last_seq, under the id it sent.
    const a = await greeting(s.ws, ALICE, "feed");
    const b = await greeting(s.ws, BOB, "feed");
    assertEquals([a.producer, a.last_seq, b.producer, b.last_seq], ["feed", 3, "feed", 1_000_000]);
    // Bob floods ids, past --max-producers (4): he forgets his own, never alice's.
    for (let i = 0; i < 12; i++) {
      assertEquals((await post(s.http, BOB, `flood-${i}`, 1, 100 + i))[0], 200);
    }
    assertEquals(await post(s.http, ALICE, "feed", 3, 5), [
      200,
      { first: 5, last: 5, count: 1, duplicate: true },
    ]);
    assertEquals(await post(s.http, ALICE, "feed", 2, 2), [409, {
      error: "stale_seq",
      last_seq: 3,
    }]);
    // Bob's "feed" was his oldest: forgotten, it starts anew.
    assertEquals((await greeting(s.ws, BOB, "feed")).last_seq, 0);
    assertEquals((await greeting(s.ws, BOB, "flood-11")).last_seq, 1);

    await s.restart();
    assertEquals(await post(s.http, ALICE, "feed", 3, 5), [
      200,
      { first: 5, last: 5, count: 1, duplicate: true },
    ]);
    assertEquals((await greeting(s.ws, ALICE, "feed")).last_seq, 3);
    assertEquals((await greeting(s.ws, BOB, "feed")).last_seq, 0);
    assertEquals((await greeting(s.ws, BOB, "flood-11")).last_seq, 1);
    assertEquals((await greeting(s.ws, BOB, "flood-7")).last_seq, 0);
    // A socket publish keeps to the holder's own sequence too.
    const p = await RawPub.open(`${s.ws}/t/publish?producer=feed&access_token=${BOB}`);
    p.send(1, [{ sym: "x", px: 9 }]);
    await p.wait(1);
    await p.close();
    assertEquals(p.answers, [{ seq: 1, first: 18, last: 18 }]);
    assertEquals((await greeting(s.ws, ALICE, "feed")).last_seq, 3);
  } finally {
    await s.stop();
  }
});
