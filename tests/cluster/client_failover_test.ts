// The project's own clients against a real cluster (a real etcd, three real
// `cli.ts serve --cluster` processes, lease 2 s): `publisher()` and
// `connect()` given every node's URL find the leader themselves, and carry
// on across a SIGKILL of the leader — every publish that resolved is in the
// final log once at the offsets it resolved with, one whose answer died with
// the leader (`answer_lost`, SPEC §9.3: only a producer's last seq is
// remembered) is in it once, and a subscription that moves between nodes
// sees every offset once.
import { assert, assertEquals } from "../harness/assert.ts";
import { startEtcd } from "../harness/etcd.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import { connect } from "../../client/connect.ts";
import { publisher } from "../../client/publisher.ts";
import { leaderOf, rowsShown, startServeNodes } from "../harness/serve_nodes.ts";

Deno.test("serve --cluster with publisher() and connect() given every node: the leader SIGKILLed mid-stream loses no resolved publish and shows no gap", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], { etcd: etcd.url });
    const leader = await leaderOf(nodes);
    const followers = nodes.filter((n) => n !== leader);
    // The first URL given is a follower's: the publisher follows its 307.
    const urls = [...followers, leader].map((n) => `${n.ws}/t`);
    const pub = await publisher(urls, {
      producer: "p1",
      retryTimeoutMs: 30_000,
      backoff: { minMs: 50, maxMs: 500 },
    });
    const hostOf = (url: string) => new URL(url).host;
    assertEquals(hostOf(pub.url), hostOf(leader.url), "the publisher found the leader");

    // A subscription that starts on the leader, to move when it dies.
    const sub = await connect<{ p: string; seq: number; i: number }>(
      [leader, ...followers].map((n) => `${n.ws}/t`),
      { reconnect: true, offset: 1, backoff: { minMs: 50, maxMs: 500 } },
    );
    const seen: number[] = [];
    const reading = (async () => {
      for await (const [offset] of sub) seen.push(offset!);
    })();

    const resolved = new Map<number, number>(); // i → offset
    let i = 0;
    let stop = false;
    const failures: string[] = [];
    const answerLost = new Set<number>();
    const sending = (async () => {
      const inFlight: Promise<void>[] = [];
      while (!stop) {
        const k = i++;
        inFlight.push(
          pub.send({ p: "p1", seq: k, i: k }).then(
            (offset) => void resolved.set(k, offset),
            (err) =>
              void (/answer_lost/.test(String(err))
                ? answerLost.add(k)
                : failures.push(`row ${k}: ${err}`)),
          ),
        );
        if (inFlight.length >= 16) await inFlight.shift();
      }
      await Promise.all(inFlight);
    })();

    await until(() => resolved.size >= 50, 20_000, "publishes before the kill");
    const before = resolved.size;
    await leader.kill();
    await until(() => resolved.size >= before + 50, 30_000, "publishes after the kill");
    assert(hostOf(pub.url) !== hostOf(leader.url), "the publisher moved to the new leader");
    stop = true;
    await sending;
    assertEquals(failures, [], "every publish resolved, or was stored with its answer lost");
    console.log(`${resolved.size} publishes resolved, ${answerLost.size} answers lost`);
    await pub.close();

    const survivors = nodes.filter((n) => n.running);
    let end = 0;
    await until(async () => {
      const heads = await Promise.all(survivors.map((n) => n.head()));
      end = heads[0]?.end ?? 0;
      return heads.every((h) => h !== null && h.end === end && h.commit_index === end);
    }, 20_000);
    // Each resolved publish is in the log once, at the offset it resolved with.
    const log = new Map(await rowsShown(survivors[0].url, end));
    assertEquals(log.size, end - 1);
    assertEquals(resolved.size + answerLost.size, i, "every row sent was answered");
    const offsetOf = new Map<number, number>();
    for (const [o, text] of log) {
      const row = JSON.parse(text) as { i: number };
      assert(!offsetOf.has(row.i), `row ${row.i} stored twice (${offsetOf.get(row.i)} and ${o})`);
      offsetOf.set(row.i, o);
    }
    for (const [k, offset] of resolved) assertEquals(offsetOf.get(k), offset, `row ${k}`);
    for (const k of answerLost) assert(offsetOf.has(k), `row ${k} (answer lost) was stored`);
    assertEquals(offsetOf.size, i, "every row sent is stored once");

    await until(() => seen.length >= end - 1, 20_000, "the subscription to read every row");
    sub.close();
    await reading;
    assertEquals(seen.slice(0, end - 1), Array.from({ length: end - 1 }, (_, k) => k + 1));
  } finally {
    await rmrf(root);
  }
});
