/**
 * One-row publish latency, closed loop, every contender in the same run: a
 * client in this process sends one row, waits for its durable ack, then sends
 * the next; p50, p99 and p99.9 of the round trip. The contenders:
 *
 * - the floors: one 200-byte write + fdatasync in this process (the disk);
 *   two files written and synced at once (a segment and its producer
 *   journal: the disk's part of one server's commit), alone and while
 *   another process does the same without pause (../harness/sync_loop.ts:
 *   the disk's part of a cluster whose two nodes share one disk); and a
 *   round trip to a bare Deno WebSocket echo server
 *   (../harness/echo_server.ts);
 * - a single `cli.ts serve --publish` (fsync on): the WebSocket publisher
 *   (`publisher()`, a producer id, one row a frame) and a one-row `POST`
 *   (keep-alive, a producer id and seq);
 * - a cluster of two `serve --cluster` nodes and one etcd on this machine
 *   (lease 2 s, fsync on) at R = 1 and R = 2: the same two, to the leader;
 * - NATS JetStream (one nats-server, file store): one publish at a time,
 *   awaiting its PubAck (no per-ack fsync in nats-server 2.9);
 * - NATS JetStream clusters of three nats-servers with a stream of R = 2 and
 *   of R = 3 replicas, published to on the server that leads the stream
 *   (../harness/jetstream_publish.ts), as streamcast's clients talk to the
 *   leader.
 *
 * In rounds, the contenders in order and then in reverse (ABBA); each
 * figure is the median over rounds, each ratio the median of the rounds'
 * ratios. The first round trips of each contender are a warm-up, dropped.
 * Over each contender's timed run a pause probe (../harness/pause_probe.ts)
 * counts the machine's own pauses, reported in the notes beside the figures.
 *
 * Run alone: deno run --config deno.dev.json -A bench/e2e/ack.ts [--quick] [--rounds N] [--n N]
 */
import { stopChild, waitListening } from "../harness/listening.ts";
import { connect as natsConnect } from "nats";
import { publisher } from "../../client/publisher.ts";
import { startEtcd } from "../../tests/harness/etcd.ts";
import { leaderOf, post, startServeNodes } from "../../tests/harness/serve_nodes.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";
import { startNats, startNatsCluster } from "../harness/nats.ts";
import { addStream, streamLeader } from "../harness/jetstream_publish.ts";
import { type BenchRow, type BenchSection, median } from "../harness/report.ts";
import {
  type MachinePauses,
  medianPauses,
  PAUSE_MIN_MS,
  pausePhrase,
  PauseProbe,
} from "../harness/pause_probe.ts";

const here = new URL(".", import.meta.url).pathname;
const CLI = new URL("../../cli.ts", import.meta.url).pathname;
const ECHO = `${here}../harness/echo_server.ts`;
const SYNC_LOOP = `${here}../harness/sync_loop.ts`;
const WARMUP = 100;
const LEASE_S = 2;

type Case =
  | "fdatasync"
  | "disk_one"
  | "disk_two"
  | "echo"
  | "single_ws"
  | "single_post"
  | "r1_ws"
  | "r1_post"
  | "r2_ws"
  | "r2_post"
  | "nats"
  | "js_r2"
  | "js_r3";
/** p50, p99 and p99.9 of one contender's round trips, ms. */
type Lat = { p50: number; p99: number; p999: number };
/** One contender's timed run: its round trips' figures and the machine's pauses over it. */
type Run = Lat & { machine: MachinePauses };

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))];
}

/**
 * Times `n` + WARMUP calls of `one(i)` one after the other; the warm-up's are
 * dropped. A pause probe runs over all of them (warm-up included: starting it
 * between the two would put its process's start-up in the timed part).
 */
async function timed(n: number, one: (i: number) => Promise<unknown>): Promise<Run> {
  await using probe = await PauseProbe.start();
  const ms: number[] = [];
  for (let i = 0; i < n + WARMUP; i++) {
    const t = performance.now();
    await one(i);
    if (i >= WARMUP) ms.push(performance.now() - t);
  }
  const machine = await probe.stop();
  return { p50: pct(ms, 0.5), p99: pct(ms, 0.99), p999: pct(ms, 0.999), machine };
}

/** A child process that prints "listening on http://127.0.0.1:PORT" on stderr; stopped by closing its stdin, then SIGTERM. */
async function spawnListening(args: string[]) {
  const child = new Deno.Command(Deno.execPath(), {
    args,
    stdin: "piped",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let text = "";
  const drained = (async () => {
    for await (const c of child.stderr.pipeThrough(new TextDecoderStream())) text += c;
  })().catch(() => {});
  const stop = async () => {
    await child.stdin.close().catch(() => {});
    await stopChild(child, "SIGTERM", [drained]);
  };
  const port = await waitListening(() => text, args.join(" "), stop);
  return { port, stop };
}

const rows = tradeRows(5);

/** The WebSocket publisher's and the POST's round trips against a server at `url` (http://). */
async function publishBoth(url: string, n: number, tag: string): Promise<[Run, Run]> {
  const pub = await publisher(`${url.replace(/^http/, "ws")}/t`, { producer: `ws-${tag}` });
  const ws = await timed(n, (i) => pub.send(rows(i)));
  await pub.close();
  const producer = `post-${tag}`;
  const http = await timed(n, async (i) => {
    const a = await post(url, JSON.stringify(rows(i)) + "\n", { producer, seq: i + 1 });
    if (a?.status !== 200) throw new Error(`POST to ${url} answered ${JSON.stringify(a)}`);
  });
  return [ws, http];
}

async function single(n: number): Promise<[Run, Run]> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-ack-" });
  await Deno.writeTextFile(`${dir}/t.json`, JSON.stringify(SCHEMA));
  const s = await spawnListening([
    "run",
    "-A",
    CLI,
    "serve",
    "--stream",
    `t=${dir}/t.json`,
    "--publish",
    "t",
    "--root",
    `${dir}/data`,
    "--log-level",
    "warn",
    "--port",
    "0",
  ]);
  try {
    return await publishBoth(`http://127.0.0.1:${s.port}`, n, "single");
  } finally {
    await s.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

async function cluster(etcd: string, replicas: number, n: number): Promise<[Run, Run]> {
  const root = await Deno.makeTempDir({ prefix: "streamcast-bench-ack-cluster-" });
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2"], {
      etcd,
      replicas,
      leaseSeconds: LEASE_S,
      extra: [
        "--cluster-prefix",
        `/bench-ack-${crypto.randomUUID().slice(0, 8)}`,
        "--log-level",
        "error",
      ],
    }, SCHEMA);
    const leader = await leaderOf(nodes, 30_000);
    // Both nodes in the set first (R = 1 too: the leader ships to the follower all the same).
    const deadline = Date.now() + 30_000;
    while ((await leader.head())?.in_sync.length !== 2 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    return await publishBoth(leader.url, n, `r${replicas}`);
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

async function fdatasync(n: number): Promise<Run> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-ack-disk-" });
  const f = await Deno.open(`${dir}/f`, { write: true, create: true });
  const bytes = new Uint8Array(200).fill(97);
  try {
    return await timed(n, async () => {
      f.writeSync(bytes);
      await f.syncData();
    });
  } finally {
    f.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * The disk's part of one commit: 200 bytes written to each of two files and
 * both synced at once (a segment and its producer journal), as one server
 * does; with `busy`, while another process does the same without pause, as
 * the second node of a cluster on the same disk does.
 */
async function twoFiles(n: number, busy: boolean): Promise<Run> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-ack-disk-" });
  const files = await Promise.all(
    ["segment", "journal"].map((f) => Deno.open(`${dir}/${f}`, { write: true, create: true })),
  );
  const bytes = new Uint8Array(200).fill(97);
  const other = busy ? await startSyncLoop() : null;
  try {
    return await timed(n, async () => {
      for (const f of files) f.writeSync(bytes);
      await Promise.all(files.map((f) => f.syncData()));
    });
  } finally {
    await other?.stop();
    for (const f of files) f.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** ../harness/sync_loop.ts running, until `stop()`. */
async function startSyncLoop(): Promise<{ stop(): Promise<void> }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-config", "-A", SYNC_LOOP],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("ready\n")) {
    const { value, done } = await reader.read();
    if (done) {
      await child.status;
      throw new Error(`${SYNC_LOOP} exited before it was ready`);
    }
    text += value;
  }
  const drained = (async () => {
    while (!(await reader.read()).done) { /* nothing more is printed */ }
  })();
  return {
    // Its stdin's end stops it (it removes its folder then); SIGKILL after 10 s.
    stop: () => stopChild(child, () => child.stdin.close(), [drained]),
  };
}

async function echo(n: number): Promise<Run> {
  const s = await spawnListening(["run", "-A", ECHO]);
  try {
    const ws = new WebSocket(`ws://127.0.0.1:${s.port}/`);
    await new Promise((r, j) => (ws.onopen = r, ws.onerror = j));
    let got: () => void = () => {};
    ws.onmessage = () => got();
    const text = JSON.stringify(rows(0));
    const lat = await timed(n, () => {
      const p = new Promise<void>((r) => (got = r));
      ws.send(text);
      return p;
    });
    ws.close();
    return lat;
  } finally {
    await s.stop();
  }
}

async function nats(n: number): Promise<Run | null> {
  const srv = await startNats();
  if ("missing" in srv) return null;
  const nc = await natsConnect({ servers: srv.url });
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: "ACK", subjects: ["ack.>"], storage: "file" as never });
    const js = nc.jetstream();
    const enc = new TextEncoder();
    return await timed(n, (i) => js.publish("ack.rows", enc.encode(JSON.stringify(rows(i)))));
  } finally {
    await nc.close();
    await srv.stop();
  }
}

/** One message at a time to a JetStream stream of `replicas` replicas on three servers, published to its leader. */
async function jetStreamCluster(replicas: number, n: number): Promise<Run> {
  const cluster = await startNatsCluster(3);
  try {
    const admin = await natsConnect({ servers: cluster.urls });
    let url: string;
    try {
      await addStream(admin, replicas);
      url = await streamLeader(admin, cluster);
    } finally {
      await admin.close();
    }
    const nc = await natsConnect({ servers: url });
    try {
      const js = nc.jetstream();
      const enc = new TextEncoder();
      return await timed(n, (i) => js.publish("trades", enc.encode(JSON.stringify(rows(i)))));
    } finally {
      await nc.close();
    }
  } finally {
    await cluster.stop();
  }
}

/** Every contender once a round, forwards then backwards. */
export async function measureAcks(
  rounds: number,
  n: number,
  log: (line: string) => void = () => {},
): Promise<Partial<Record<Case, Run>>[]> {
  const etcd = await startEtcd();
  const steps: [string, () => Promise<Partial<Record<Case, Run>>>][] = [
    ["fdatasync", async () => ({ fdatasync: await fdatasync(n) })],
    ["two files", async () => ({ disk_one: await twoFiles(n, false) })],
    ["two files, another process too", async () => ({ disk_two: await twoFiles(n, true) })],
    ["echo", async () => ({ echo: await echo(n) })],
    ["single", async () => {
      const [ws, http] = await single(n);
      return { single_ws: ws, single_post: http };
    }],
    ["R = 1", async () => {
      const [ws, http] = await cluster(etcd.url, 1, n);
      return { r1_ws: ws, r1_post: http };
    }],
    ["R = 2", async () => {
      const [ws, http] = await cluster(etcd.url, 2, n);
      return { r2_ws: ws, r2_post: http };
    }],
    ["nats", async () => {
      const lat = await nats(n);
      return lat ? { nats: lat } : {};
    }],
    ["JetStream R = 2", async () => ({ js_r2: await jetStreamCluster(2, n) })],
    ["JetStream R = 3", async () => ({ js_r3: await jetStreamCluster(3, n) })],
  ];
  const out: Partial<Record<Case, Run>>[] = [];
  try {
    for (let r = 0; r < rounds; r++) {
      const got: Partial<Record<Case, Run>> = {};
      for (const [name, step] of r % 2 === 0 ? steps : [...steps].reverse()) {
        const did = await step();
        Object.assign(got, did);
        log(
          `round ${r + 1}/${rounds} ${name}: ${
            Object.entries(got).map(([k, v]) =>
              `${k} ${v.p50.toFixed(2)}/${v.p99.toFixed(2)}/${v.p999.toFixed(2)}`
            ).join(", ")
          } ms (p50/p99/p99.9); machine: ${
            Object.entries(did).map(([k, v]) => `${k} ${pausePhrase(v.machine)}`).join(", ")
          }`,
        );
      }
      out.push(got);
    }
  } finally {
    await etcd.stop();
  }
  return out;
}

const NAMES: Record<Case, string> = {
  fdatasync: "floor: a 200-byte write + fdatasync",
  disk_one: "floor: two files written and synced at once (one server's commit)",
  disk_two:
    "floor: two files synced at once, another process doing the same (two nodes on one disk)",
  echo: "floor: a bare Deno WebSocket echo",
  single_ws: "one server: WebSocket publish ack",
  single_post: "one server: one-row POST",
  r1_ws: "cluster R = 1: WebSocket publish ack",
  r1_post: "cluster R = 1: one-row POST",
  r2_ws: "cluster R = 2: WebSocket publish ack",
  r2_post: "cluster R = 2: one-row POST",
  nats: "NATS JetStream R = 1: publish, PubAck",
  js_r2: "NATS JetStream R = 2 (3 servers): publish to the stream leader, PubAck",
  js_r3: "NATS JetStream R = 3 (3 servers): publish to the stream leader, PubAck",
};

/** The section: each contender's p50/p99, and the ratios §28 sets targets on. */
function section(rounds: Partial<Record<Case, Run>>[], n: number): BenchSection {
  const rows: BenchRow[] = [];
  const fig = (c: Case, q: keyof Lat) => median(rounds.map((r) => r[c]![q]));
  const ratio = (a: Case, b: Case, q: keyof Lat) => median(rounds.map((r) => r[a]![q] / r[b]![q]));
  const add = (a: Case, b: Case, q: keyof Lat, target?: number) => {
    if (!rounds.every((r) => r[a] && r[b])) return;
    const x = ratio(a, b, q);
    const r1 = rounds.every((r) => r.r1_ws) ? ratio("r1_ws", "single_ws", q).toFixed(2) : null;
    const disk = rounds.every((r) => r.disk_one && r.disk_two)
      ? ratio("disk_two", "disk_one", q).toFixed(2)
      : null;
    rows.push({
      case: `${q}: ${NAMES[a]} vs ${NAMES[b]}`,
      ours: fig(a, q),
      baseline: fig(b, q),
      unit: "ms",
      ratio: x,
      target: target ? `≤ ${target}×` : "",
      met: target ? x <= target : null,
      ...(target && x > target
        ? {
          limit: a === "r2_ws"
            ? `${x.toFixed(2)}× one server's (${fig(a, q).toFixed(2)} ms against ${
              fig(b, q).toFixed(2)
            })${r1 ? `; R = 1 in the same rounds is at ${r1}×, so it is not R that costs it` : ""}${
              disk
                ? `; the disk alone, two nodes' syncs at once against one server's, is at ${disk}×`
                : ""
            }. On the path of one ack: two hops and the slower of two nodes each syncing its segment and its journal at once, on one disk shared by both nodes, with two node processes, etcd and the client on two vCPUs (the machine's pauses are in the notes).`
            : `${x.toFixed(2)}× (${fig(a, q).toFixed(2)} ms against ${fig(b, q).toFixed(2)})`,
        }
        : {}),
    });
  };
  for (const q of ["p50", "p99", "p999"] as const) {
    add("single_post", "single_ws", q, q === "p99" ? 2 : undefined);
    add("single_ws", "fdatasync", q);
    add("disk_two", "disk_one", q);
    add("r2_ws", "disk_two", q);
    add("single_ws", "disk_one", q);
    add("single_ws", "echo", q);
    add("single_ws", "nats", q);
    add("single_post", "nats", q);
    add("r2_ws", "single_ws", q, q === "p999" ? undefined : 1.5);
    add("r2_ws", "js_r2", q);
    add("r2_ws", "js_r3", q);
    add("js_r2", "nats", q);
    add("r1_ws", "single_ws", q);
    add("r2_post", "single_post", q);
    add("r1_post", "single_post", q);
  }
  const each = (Object.keys(NAMES) as Case[]).filter((c) => rounds.every((r) => r[c])).map((c) =>
    `${NAMES[c]} ${fig(c, "p50").toFixed(2)} / ${fig(c, "p99").toFixed(2)} / ${
      fig(c, "p999").toFixed(2)
    } ms`
  );
  const machine = (Object.keys(NAMES) as Case[]).filter((c) => rounds.every((r) => r[c])).map((
    c,
  ) => `${NAMES[c]} ${pausePhrase(medianPauses(rounds.map((r) => r[c]!.machine)))}`);
  return {
    title: "One-row publish latency against the floors, a cluster and NATS (closed loop)",
    baseline:
      "the contender named after “vs”, measured in the same run (rounds in ABBA order; ratios are medians of each round's)",
    rows,
    notes: [
      `p50 / p99 / p99.9 of each (medians over ${rounds.length} rounds of ${n} round trips after ${WARMUP} of warm-up): ${
        each.join("; ")
      }.`,
      `A client in this process sends one trade row, waits for its durable ack (fsync on), then sends the next. WebSocket: \`publisher()\` with a producer id, one row a frame. POST: one NDJSON row with a producer id and seq, keep-alive. The cluster: two \`serve --cluster\` nodes and one etcd on this machine, lease ${LEASE_S} s, both nodes in the in-sync set before the first row. A commit waits for every member of the in-sync set (R is the least size of the set, as Kafka's min.insync.replicas), so at R = 1 with the follower caught up the ack waits for its fsync as at R = 2. NATS JetStream 2.9 has no per-ack fsync: its PubAck follows a write to the OS (at R = 2 and 3, on the stream's leader and enough followers of its raft group). With ${n} round trips a round, p99.9 is one of the slowest two: read it as the tail, not a fine figure.`,
      `Machine pauses during each run (medians over rounds; wake-ups of a process sleeping 1 ms at a time that came ≥ ${PAUSE_MIN_MS} ms late, the VM's steal time, and that process's run-queue wait (its waits for a busy CPU, the short ones too), over each contender's ${
        n + WARMUP
      } round trips, warm-up included): ${machine.join("; ")}.`,
    ],
  };
}

/** Runs the benchmark (bench/run.ts). */
export async function run(quick = false): Promise<BenchSection> {
  const n = quick ? 200 : 1000;
  return section(await measureAcks(quick ? 1 : 2, n, (l) => console.error(`  ${l}`)), n);
}

if (import.meta.main) {
  const flag = (name: string, fallback: string) => {
    const i = Deno.args.indexOf(name);
    return i === -1 ? fallback : Deno.args[i + 1];
  };
  const quick = Deno.args.includes("--quick");
  const rounds = Number(flag("--rounds", quick ? "1" : "2"));
  const n = Number(flag("--n", quick ? "200" : "1000"));
  const load = () => Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  console.log(`ack: ${rounds} rounds of ${n}; load average ${load()}; ${new Date().toISOString()}`);
  const s = section(await measureAcks(rounds, n, console.log), n);
  console.log(`load average ${load()}`);
  for (const r of s.rows) {
    console.log(
      `${r.case}: ${r.ours.toFixed(2)} vs ${r.baseline.toFixed(2)} ms, ${r.ratio.toFixed(2)}×${
        r.target ? ` (target ${r.target}: ${r.met ? "met" : "not met"})` : ""
      }`,
    );
  }
  for (const x of s.notes ?? []) console.log(x);
}
