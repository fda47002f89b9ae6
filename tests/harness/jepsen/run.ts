// One run of the Jepsen-style cluster test: a real etcd, three real
// `cli.ts serve --cluster` processes (R = 2, lease 2 s), each reaching etcd
// through its own proxies in this process (an HTTP one that can lose etcd's
// answers, in front of a TCP one that can cut or stall), sharing an S3
// archive (s3rver) that holds the stream's Iceberg table; producers with
// producer ids over HTTP, the publish socket and `publisher(urls)`;
// subscribers on every node (raw WebSocket and `connect(urls)` with its
// zstd-stream, some filtered).
// For `seconds`, faults drawn from the seed one at a time, each healed and
// the cluster seen taking publishes again before the next; then the clients
// stop, the nodes converge, and the checks run against the final log — the
// Iceberg table's once the leader has committed the log's end to it — and
// `cli.ts verify` on each node's folder once the nodes are stopped. A run of
// the fourth kind also gives each node's root a small tmpfs of its own (one
// of its faults fills it), turns signed tokens on (HS256; every client of
// the test carries one), serves a keyed stream read by subscribers whose
// tokens grant only some of its rows (keyed.ts), and creates and deletes
// streams while the faults go on (stream_churn.ts). Returns
// every problem found and the history; it throws only when the run could not
// be carried out (a service that does not start, a cluster that never heals).
import { join } from "node:path";
import { startEtcd } from "../etcd.ts";
import { startS3, stopS3 } from "../s3.ts";
import { s3Files } from "../read_table.ts";
import { rng, tempDir, until } from "../util.ts";
import { CLI, withTimeout } from "../serve.ts";
import { HttpProducer, WsProducer } from "./cluster_clients.ts";
import { checkTable, tableFlags, tableLast, tableRows } from "./cluster_table.ts";
import { EtcdAnswerLoss } from "./etcd_answer_loss.ts";
import { EtcdProxy } from "./etcd_proxy.ts";
import { checkLibraryProducer, checkOnce, checkSeen, checkSeqProducer, logOf } from "./checks.ts";
import {
  type Filter,
  LibraryProducer,
  LibrarySub,
  RawSub,
  type Row,
  type Seen,
} from "./clients.ts";
import {
  CLASSIC_FAULTS,
  type Cluster,
  currentLeader,
  faultAndHeal,
  FAULTS,
  FOURTH_FAULTS,
  History,
} from "./nemesis.ts";
import { SmallDisk } from "../small_disk.ts";
import { checkKeyed, grantedSubs, KEYED, KeyedProducer, keyedSetup } from "./keyed.ts";
import { StreamChurn } from "./stream_churn.ts";
import { converged, leaderOf, rowsShown, SCHEMA, ServeNode } from "../serve_nodes.ts";

// A node's log lines that say its leadership or its lease changed.
const LEADERSHIP_EVENTS =
  /"(leader_elected|leader_ended|cluster_step_down|cluster_node_lease_lost)"/;

/** The lease of the run's nodes, s. */
export const LEASE_SECONDS = 2;

/** What a run found. */
export interface RunReport {
  problems: string[];
  history: History;
  /** Rows in the final log, faults applied. */
  rows: number;
  faults: number;
  /** Where the nodes' folders and stderr are kept when a problem was found. */
  kept: string | null;
}

/** Producers' rows: WebSocket producers' rows (prefix "w"). */
const FILTER_WS: Filter = {
  where: { p: { prefix: "w" } },
  matches: (r) => r.p.startsWith("w"),
};
/** An HTTP producer's and the library producer's rows from seq 5 on. */
const FILTER_SOME: Filter = {
  where: { p: ["h1", "lib"], seq: { gte: 5 } },
  matches: (r) => (r.p === "h1" || r.p === "lib") && r.seq >= 5,
};

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long the table may take to reach the final log's end, ms. */
const TABLE_WAIT_MS = 30_000;

/**
 * Each node's disk in a run of the fourth kind, MiB, by default: room for a
 * 40 s run's logs beside the 64 MiB `--min-free-bytes` keeps free, small
 * enough to fill at once (tmpfs is memory: three of them).
 */
export const DISK_MIB = 256;

/** The kinds of fault a run draws from (see `RunOptions.kinds`). */
export type Kinds = "all" | "classic" | "fourth";

async function recordHeads(nodes: ServeNode[], history: History): Promise<void> {
  for (const n of nodes) {
    const h = await n.head();
    history.add(`${n.name}: ${h ? JSON.stringify(h) : "no answer"}`);
  }
}

async function verify(dir: string): Promise<string | null> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "verify", dir],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  if (out.code === 0) return null;
  const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
  return `verify ${dir} exited ${out.code}: ${text.trim().split("\n").slice(-3).join(" | ")}`;
}

// The table holds each row of the final log once: checked once the leader has
// sealed and committed the log's end (bounded: what is missing is named).
async function checkIceberg(
  endpoint: string,
  log: Map<number, Row>,
  history: History,
  problems: string[],
): Promise<void> {
  const get = s3Files(endpoint);
  const end = log.size;
  const caught = await until(async () => (await tableLast(get)) >= end, TABLE_WAIT_MS)
    .then(() => true, () => false);
  const last = await tableLast(get);
  history.add(
    `iceberg table at ${last}${caught ? "" : ` (not at ${end} within ${TABLE_WAIT_MS / 1000} s)`}`,
  );
  if (!caught) problems.push(`iceberg: the table ends at ${last}, the log at ${end}`);
  try {
    checkTable(await tableRows(get, problems), log, problems);
  } catch (err) {
    problems.push(`iceberg: the table cannot be read: ${err}`);
  }
}

/** How a run goes beside its seed and length. */
export interface RunOptions {
  /** Faults (the test) or none (the soak: a steady feed, subscribers moving). @default true */
  faults?: boolean;
  /**
   * The kinds of fault drawn: the classic ones alone (no lost etcd answers,
   * no wiped disk, and no answer-loss proxy in the nodes' way to etcd),
   * with which a seed draws what it drew before those existed; every kind
   * but a full disk ("all"), likewise; or "fourth": every kind and a full
   * disk, with streams created and deleted, signed tokens and a keyed
   * stream read through row-level grants. @default "all"
   */
  kinds?: Kinds;
  /** Each producer's pause after each acknowledgement (a steady feed), ms. @default 0 */
  paceMs?: number;
  /** Told each process the run starts (node, etcd, s3rver): the soak samples their memory. */
  started?: (name: string, pid: number, url: string | null) => void;
  /** Told a line about the run every minute. */
  progress?: (line: string) => void;
  /** More `serve` flags for every node. @default none */
  nodeFlags?: string[];
  /** Told when the feed ends, before the producers stop and the checks begin. */
  fed?: () => void;
  /** Each node's disk in a run of the fourth kind, MiB (a longer run needs more). @default DISK_MIB */
  diskMib?: number;
}

/**
 * Runs the test for `seed` for `seconds`: with faults, or (`faults: false`)
 * as a soak, in which every 10 s one raw subscriber leaves and comes back on
 * the next node from where it was.
 */
export async function jepsenRun(
  seed: number,
  seconds: number,
  options: RunOptions = {},
): Promise<RunReport> {
  const withFaults = options.faults ?? true;
  const paceMs = options.paceMs ?? 0;
  const rand = rng(seed);
  const history = new History();
  const problems: string[] = [];
  const root = await tempDir("streamcast-jepsen-");
  await using etcd = await startEtcd();
  const s3 = await startS3();
  const etcdPort = Number(new URL(etcd.url).port);
  const proxies = ["n1", "n2", "n3"].map(() =>
    new EtcdProxy({ hostname: "127.0.0.1", port: etcdPort })
  );
  // A node's way to etcd: node → answer-loss proxy → TCP proxy → etcd, so that both
  // faults act on it; only when lost answers may be drawn.
  const kinds = options.kinds ?? "all";
  const classic = kinds === "classic";
  const fourth = kinds === "fourth";
  const losses = withFaults && !classic ? proxies.map((p) => new EtcdAnswerLoss(p.url)) : null;
  const schemaPath = join(root, "schema.json");
  await Deno.writeTextFile(schemaPath, JSON.stringify(SCHEMA));
  const keyed = fourth ? await keyedSetup(root, schemaPath) : null;
  const disks: SmallDisk[] = [];
  const nodes = ["n1", "n2", "n3"].map((name, i) =>
    new ServeNode(name, root, schemaPath, {
      etcd: losses?.[i].url ?? proxies[i].url,
      replicas: 2,
      leaseSeconds: LEASE_SECONDS,
      lagMs: 1000,
      token: keyed?.adminToken ?? null,
      // The final reads replay the whole log: a soak's is far past the default window,
      // and a quick machine feeds a 40 s run past it too.
      extra: [
        ...tableFlags(s3.endpoint),
        "--max-replay",
        "none",
        ...(keyed?.flags ?? []),
        ...(options.nodeFlags ?? []),
      ],
    })
  );
  const cluster: Cluster = {
    nodes,
    proxies,
    losses,
    kinds: classic ? CLASSIC_FAULTS : fourth ? FOURTH_FAULTS : FAULTS,
    disks: fourth ? disks : null,
    etcd,
    leaseMs: LEASE_SECONDS * 1000,
  };
  const clients: { stop(): Promise<void> }[] = [];
  let faults = 0;
  let rows = 0;
  let failed = true;
  try {
    if (fourth) {
      for (const n of nodes) disks.push(await SmallDisk.mount(n.root, options.diskMib ?? DISK_MIB));
    }
    await Promise.all(nodes.map((n) => n.start()));
    options.started?.("etcd", etcd.pid, null);
    if (s3.pid !== null) options.started?.("s3rver", s3.pid, null);
    for (const n of nodes) options.started?.(n.name, n.pid, n.url);
    const first = await leaderOf(nodes);
    history.add(`started; ${first.name} leads term ${(await first.head())?.term}`);

    const http = ["h1", "h2"].map((id) => new HttpProducer(id, nodes, 3, paceMs));
    const ws = ["w1", "w2"].map((id) => new WsProducer(id, nodes, 2, paceMs ? 1 : 8, paceMs));
    const lib = new LibraryProducer("lib", 8, paceMs);
    clients.push(...http, ...ws, lib);
    await lib.start(nodes);
    const subs: Seen[] = [];
    for (const [i, node] of nodes.entries()) {
      subs.push(new RawSub(`raw@${node.name}`, null, nodes, node));
      const l = new LibrarySub(`zstd@${node.name}`, null);
      await l.start(nodes, node);
      subs.push(l);
      const f = i === 1 ? FILTER_SOME : FILTER_WS;
      const lf = new LibrarySub(`zstd+where@${node.name}`, i === 2 ? FILTER_SOME : f);
      await lf.start(nodes, node);
      subs.push(lf, new RawSub(`raw+where@${node.name}`, f, nodes, node));
    }
    clients.push(...subs);
    const acked = () => [...http, ...ws].reduce((s, p) => s + p.acks.length, 0) + lib.resolved.size;
    await until(() => acked() >= 20, 30_000, "the first acknowledgements");
    const keyedProducer = keyed ? new KeyedProducer(nodes, paceMs) : null;
    const keyedSubs = keyed ? grantedSubs(nodes, keyed) : [];
    const churn = fourth ? new StreamChurn(nodes, history) : null;
    if (keyedProducer) clients.push(keyedProducer, ...keyedSubs);
    if (churn) clients.push(churn);

    const started = performance.now();
    const deadline = started + seconds * 1000;
    if (!withFaults) {
      const raw = subs.filter((s) => s instanceof RawSub);
      let minute = 0;
      let lastTerm = 1;
      for (let turn = 0; performance.now() < deadline; turn++) {
        await pause(Math.min(10_000, Math.max(0, deadline - performance.now())));
        raw[turn % raw.length].drop();
        const m = Math.floor((performance.now() - started) / 60_000);
        if (m > minute) {
          minute = m;
          const heads = await Promise.all(nodes.map((n) => n.head()));
          // Without faults the leadership should not move: a new term is worth a line.
          const lead = heads.find((h) => h?.role === "leader");
          const term = Math.max(...heads.map((h) => h?.term ?? 0));
          if (term !== lastTerm) history.add(`term ${term}, ${lead?.node ?? "no node"} leading`);
          lastTerm = term;
          options.progress?.(
            `${m} min: ${acked()} acknowledgements; ends ${heads.map((h) => h?.end).join("/")}; ` +
              `term ${term}, leader ${lead?.node ?? "-"}`,
          );
        }
      }
    }
    while (withFaults && performance.now() < deadline) {
      await pause(Math.round(500 + rand() * 2500));
      await faultAndHeal(cluster, rand, history);
      faults++;
      // Healed: the cluster agrees on a leader and acknowledges again.
      const before = acked();
      const healedAt = performance.now();
      const leader = await leaderOf(nodes, 30_000).catch(() => null);
      await until(() => acked() >= before + 10, 30_000, "acknowledgements after the fault")
        .catch(() => {});
      const now = await currentLeader(nodes);
      const took = Math.round(performance.now() - healedAt);
      if (!leader || acked() < before + 10) {
        problems.push(`no acknowledgements within 30 s of healing fault ${faults}`);
        history.add(`NOT HEALED after ${took} ms (${acked() - before} acks)`);
        break;
      }
      history.add(
        `acknowledging again after ${took} ms; ${now?.name ?? "?"} leads term ${
          (await now?.head())?.term
        }`,
      );
    }

    options.fed?.();
    history.add(`${withFaults ? "faults" : "the soak"} over; stopping the producers`);
    if (churn) {
      await withTimeout(churn.stop(), 4 * 60_000, "the stream churn to finish its cycle")
        .catch((err) => problems.push(`stream churn: ${err}`));
      history.add(`stream churn: ${churn.created} created, ${churn.deleted} deleted`);
    }
    const producers = [...http, ...ws, lib, ...(keyedProducer ? [keyedProducer] : [])];
    const stopped = await Promise.allSettled(
      producers.map((p) => withTimeout(p.stop(), 60_000, `${p.id} to get every send answered`)),
    );
    const stuck = stopped.flatMap((s, i) => s.status === "rejected" ? [i] : []);
    if (stuck.length > 0) {
      const what = stuck.map((i) => {
        const p = producers[i];
        return p instanceof WsProducer
          ? `${p.id} (unanswered seqs ${p.unacked.join(",")})`
          : p instanceof LibraryProducer
          ? `${p.id} (${p.sent - p.answered} sends unanswered)`
          : p.id;
      });
      history.add(`STUCK: ${what.join("; ")}`);
      problems.push(`producers never got every send answered: ${what.join("; ")}`);
      await recordHeads(nodes, history);
      return { problems, history, rows, faults, kept: root };
    }
    for (const p of [...http, ...ws, lib]) {
      for (const x of p.problems) problems.push(`${p.id}: ${x}`);
    }
    if (fourth) {
      const full = [...http, ...ws].map((p) => `${p.id} ${p.diskFull}`).join(", ");
      history.add(
        `refused for a full disk and sent again: ${full}, lib ${lib.diskFull.size}, ` +
          `${KEYED} ${keyedProducer!.diskFull}`,
      );
      for (const x of keyedProducer!.problems) problems.push(`${KEYED} producer: ${x}`);
    }
    const end = await converged(nodes, 30_000);
    rows = end - 1;
    history.add(`converged at end ${end}`);
    const shown = await Promise.all(nodes.map((n) => rowsShown(n.url, end, { token: n.token })));
    for (const [i, s] of shown.entries()) {
      if (JSON.stringify(s) !== JSON.stringify(shown[0])) {
        problems.push(`${nodes[i].name}'s log differs from ${nodes[0].name}'s`);
      }
    }
    const log = logOf(shown[0], problems);
    if (log.size !== end - 1) problems.push(`final log: ${log.size} rows, end ${end}`);
    const at = checkOnce(log, problems);
    for (const p of http) checkSeqProducer(p.id, p.acks, 3, log, problems);
    for (const p of ws) checkSeqProducer(p.id, p.acks, 2, log, problems);
    checkLibraryProducer(
      lib.id,
      lib.resolved,
      lib.answerLost,
      lib.sent,
      at,
      problems,
      lib.diskFull,
    );
    history.add(`library producer: ${lib.resolved.size} resolved, ${lib.answerLost.size} lost`);

    // Subscribers: each gets to its end of the final log (or is reported as stuck).
    const lastOf = (s: Seen) => {
      const want = [...log].filter(([, r]) => !s.filter || s.filter.matches(r));
      return want.length;
    };
    await until(
      () => subs.every((s) => s.rows.length >= lastOf(s) || s.ended !== null),
      30_000,
    ).catch(() => {});
    await Promise.allSettled(subs.map((s) => s.stop()));
    for (const s of subs) checkSeen(s, log, problems);
    await checkIceberg(s3.endpoint, log, history, problems);
    if (keyed) {
      const k = await checkKeyed(nodes, keyed, keyedProducer!, keyedSubs, problems);
      history.add(`${KEYED}: ${k.rows} rows in the final log`);
    }
    if (churn) {
      await churn.checkListed();
      for (const x of churn.problems) problems.push(`stream churn: ${x}`);
    }

    // verify, on each node's folder, with the nodes stopped.
    await Promise.all(nodes.map((n) => n.stop()));
    for (const n of nodes) {
      for (const stream of keyed ? ["t", KEYED] : ["t"]) {
        const bad = await verify(join(n.root, stream));
        if (bad) problems.push(bad);
      }
    }
    failed = problems.length > 0;
  } finally {
    // Bounded: a client that cannot finish is reported above, not waited for.
    await Promise.allSettled(clients.map((c) => withTimeout(c.stop(), 5000, "a client to stop")));
    if (failed) {
      for (const n of nodes) {
        await Deno.writeTextFile(join(root, `${n.name}.stderr`), n.stderr()).catch(() => {});
      }
    }
    if (!withFaults) {
      // Without faults, leadership should not move: each node's own word on why it did.
      for (const n of nodes) {
        for (const line of n.stderr().split("\n")) {
          if (LEADERSHIP_EVENTS.test(line)) history.add(`${n.name} said: ${line.trim()}`);
        }
      }
    }
    await Promise.allSettled(nodes.map((n) => n.kill()));
    // A node's small disk goes with the run; a failed run keeps a copy of what it held.
    for (const [i, d] of disks.entries()) {
      if (failed) {
        await new Deno.Command("cp", { args: ["-a", d.path, `${d.path}.kept`] }).output()
          .catch(() => {});
      }
      await d.close().catch((err) => console.log(`jepsen: ${nodes[i].name}'s disk: ${err}`));
    }
    await Promise.allSettled([...(losses ?? []), ...proxies].map((p) => p.close()));
    await stopS3(s3);
    if (!failed) await Deno.remove(root, { recursive: true }).catch(() => {});
  }
  return { problems, history, rows, faults, kept: failed ? root : null };
}
