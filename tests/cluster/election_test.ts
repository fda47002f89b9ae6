// Leader election through a real etcd (tests/harness/etcd.ts): one leader among
// contenders, a term that only grows, a lease that lapses when its holder is
// paused (a child process, SIGSTOP) or cut off (etcd killed), a new
// election when etcd is back, and no lease left in etcd by an election
// closed while its lease was being granted.
import { assert, assertEquals } from "../harness/assert.ts";
import { until } from "../harness/util.ts";
import { startEtcd } from "../harness/etcd.ts";
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { Election } from "../../cluster/election.ts";
import { LeaderWatch } from "../../cluster/leader_watch.ts";
import { readInSync, writeInSync } from "../../cluster/in_sync.ts";
import { Logger } from "../../common/logger.ts";

const quiet = new Logger({ level: "error" });

function contenders(etcd: EtcdClient, stream: string, names: string[], ttlSeconds: number) {
  return names.map((node) =>
    new Election(etcd, {
      stream,
      node,
      url: `http://${node}.test:8800`,
      ttlSeconds,
      logger: quiet,
      retryMaxMs: 200,
    })
  );
}

function leaders(es: Election[]): Election[] {
  return es.filter((e) => e.leadership !== null);
}

Deno.test("election among 3 contenders: one leader at a time, a new term at each election", async () => {
  await using etcd = await startEtcd();
  const client = new EtcdClient(etcd.url);
  const names = ["n1", "n2", "n3"];
  const es = contenders(client, "trades", names, 5); // resignations revoke: the TTL only guards
  const watch = new LeaderWatch(client, "trades", { pollMs: 500 });
  const seen: (number | null)[] = [];
  watch.onChange = (l) => seen.push(l?.term ?? null);
  watch.start();
  for (const e of es) e.start();
  const terms: number[] = [];
  try {
    let alive = [...es];
    while (alive.length > 0) {
      await until(() => leaders(alive).length === 1, 15_000, "one leader");
      const [winner] = leaders(alive);
      assertEquals(leaders(es).length, 1, "never two leaders");
      const l = winner.leadership!;
      terms.push(l.term);
      if (terms.length === 1) {
        // The first leader found the set empty and wrote itself; the others
        // caught up (nothing to copy yet): it adds them, so they may lead.
        const set = await readInSync(client, winner.keys);
        assertEquals(set?.nodes, [names[es.indexOf(winner)]]);
        const w = await writeInSync(client, winner.keys, l, set, names);
        assertEquals(w.written, true);
      }
      // Observers learn the leader's URL and term.
      assert(await watch.until((x) => x?.term === l.term));
      assertEquals(watch.current?.url, `http://${names[es.indexOf(winner)]}.test:8800`);
      assertEquals((await client.get(winner.keys.term))?.value, String(l.term));
      await winner.close(); // resigns: revokes its lease
      alive = alive.filter((e) => e !== winner);
    }
    assertEquals(terms, [1, 2, 3], "every election begins the next term");
    assert(await watch.until((x) => x === null));
    assertEquals(seen.filter((t) => t !== null), [1, 2, 3]);
    const set = await readInSync(client, es[0].keys);
    assertEquals(set?.nodes, names);
    assertEquals(set?.term, 3, "each election writes its term into the set");
  } finally {
    for (const e of es) await e.close();
    await watch.close();
  }
});

interface ChildLine {
  t: number;
  leader: boolean;
  term: number | null;
}

// A campaigning child process (tests/cluster/_campaign_child.ts) and its lines.
function campaignChild(urls: string, stream: string, node: string, ttl: number) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("./_campaign_child.ts", import.meta.url).pathname,
      urls,
      stream,
      node,
      String(ttl),
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines: ChildLine[] = [];
  const reading = (async () => {
    let buf = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        lines.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
      }
    }
  })();
  let paused = false;
  return {
    lines,
    pause() {
      Deno.kill(child.pid, "SIGSTOP");
      paused = true;
    },
    resume() {
      Deno.kill(child.pid, "SIGCONT");
      paused = false;
    },
    async stop() {
      if (paused) this.resume();
      try {
        child.kill("SIGTERM");
      } catch {
        // exited already
      }
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await child.status;
      clearTimeout(timer);
      await reading;
    },
  };
}

Deno.test("a leader paused past its lease (SIGSTOP) is replaced within lease + 5 s, and on SIGCONT knows from its own clock it is not leader", async () => {
  await using etcd = await startEtcd();
  const client = new EtcdClient(etcd.url);
  const ttl = 3;
  const child = campaignChild(etcd.url, "trades", "n1", ttl);
  const [n2] = contenders(client, "trades", ["n2"], ttl);
  try {
    await until(() => child.lines.at(-1)?.leader === true, 15_000, "the child to lead");
    const term = child.lines.at(-1)!.term!;
    // The leader caught n2 up (emulated): n2 joins the in-sync set, under the
    // leader's lease, so that it may lead.
    const leaderKv = (await client.get(n2.keys.leader))!;
    const set = await readInSync(client, n2.keys);
    const added = await writeInSync(
      client,
      n2.keys,
      { term, leaseId: leaderKv.lease, valid: () => true },
      set,
      ["n1", "n2"],
    );
    assertEquals(added.written, true);
    n2.start();
    await until(() => child.lines.filter((l) => l.leader).length > 5, 5000, "the child leading on");
    assertEquals(n2.leadership, null, "n2 does not lead while n1's lease is alive");

    const stoppedAt = performance.now();
    child.pause();
    await until(
      () => n2.leadership !== null,
      ttl * 1000 + 5000,
      "n2 to lead after the lease lapsed",
    );
    const tookMs = performance.now() - stoppedAt;
    console.log(`n2 leads ${Math.round(tookMs)} ms after SIGSTOP of the leader (TTL ${ttl} s)`);
    assert(n2.leadership!.term > term, "a new term");

    const resumedAt = Date.now();
    child.resume();
    await until(
      () => child.lines.filter((l) => l.t >= resumedAt).length >= 10,
      10_000,
      "lines after SIGCONT",
    );
    const after = child.lines.filter((l) => l.t >= resumedAt);
    assertEquals(after[0].leader, false, "the first thing it says after SIGCONT: not leader");
    assertEquals(after.filter((l) => l.leader), [], "and never leader again while n2 leads");
    assert(n2.leadership !== null);
  } finally {
    await child.stop();
    await n2.close();
  }
});

Deno.test("etcd killed: the leader stops leading when its lease clock runs out; an election follows when etcd is back", async () => {
  await using etcd = await startEtcd();
  const client = new EtcdClient(etcd.url);
  const ttl = 3;
  const es = contenders(client, "trades", ["n1", "n2"], ttl);
  for (const e of es) e.start();
  try {
    await until(() => leaders(es).length === 1, 15_000, "a leader");
    const first = leaders(es)[0].leadership!;
    const set = await readInSync(client, es[0].keys);
    assertEquals((await writeInSync(client, es[0].keys, first, set, ["n1", "n2"])).written, true);

    assert(first.valid(), "leading when etcd is killed");
    const killedAt = performance.now();
    await etcd.kill();
    await until(() => !first.valid(), ttl * 1000 + 1000, "the leader to stop leading");
    console.log(
      `leader stopped ${Math.round(performance.now() - killedAt)} ms after etcd was killed`,
    );
    assert(first.ended.aborted, "its leadership has ended");
    assertEquals(leaders(es), [], "nobody leads while etcd is away");

    const won = Promise.race(es.map((e) => e.elected()));
    await etcd.start();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const next = (await Promise.race([
      won,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("no leader 30 s after etcd was back")), 30_000);
      }),
    ]).finally(() => clearTimeout(timer)))!;
    assertEquals(leaders(es).map((e) => e.leadership), [next]);
    assert(next.term > first.term, `term ${next.term} after ${first.term}`);
    assertEquals((await client.get(es[0].keys.term))?.value, String(next.term));
  } finally {
    for (const e of es) await e.close();
  }
});

Deno.test("election: a leader that resigns frees the stream at once and campaigns again", async () => {
  await using etcd = await startEtcd();
  const client = new EtcdClient(etcd.url);
  const ttl = 10;
  const es = contenders(client, "s", ["n1", "n2"], ttl);
  try {
    for (const e of es) e.start();
    await until(() => leaders(es).length === 1, 15_000, "one leader");
    const [first] = leaders(es);
    const resigned = first.leadership!;
    // Both may lead: the first leader adds the other to the in-sync set.
    const set = await readInSync(client, first.keys);
    assert((await writeInSync(client, first.keys, resigned, set, ["n1", "n2"])).written);
    await first.resign();
    assertEquals(resigned.valid(), false);
    assert(resigned.ended.aborted);
    // Not a lease TTL later: the next term is won at once, by either node.
    await until(() => leaders(es).length === 1, ttl * 800, "a leader of the next term");
    const [next] = leaders(es);
    assertEquals(next.leadership!.term, resigned.term + 1);
    // The one that resigned campaigns still: it leads once the other goes.
    if (next !== first) {
      await next.close();
      await until(() => first.leadership !== null, 15_000, "the first node to lead again");
      assertEquals(first.leadership!.term, resigned.term + 2);
    }
  } finally {
    for (const e of es) await e.close();
  }
});

Deno.test("election closed while its lease is being granted revokes that lease once it comes", async () => {
  await using etcd = await startEtcd();
  // A bound past the pause below: the grant is answered, not given up.
  const client = new EtcdClient(etcd.url, { timeoutMs: 30_000 });
  const [e] = contenders(client, "s", ["n1"], 5);
  etcd.pause();
  let closed: Promise<void>;
  try {
    e.start(); // its first act: the grant, sent to the paused etcd
    closed = e.close();
  } finally {
    etcd.resume();
  }
  await closed;
  const { leases } = await client.call<{ leases?: unknown[] }>("/v3/lease/leases", {});
  assertEquals(leases ?? [], [], "a lease granted to the closed election is left in etcd");
});
