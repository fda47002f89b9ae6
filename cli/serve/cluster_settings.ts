/**
 * `serve`'s cluster settings (docs/SPEC.md §11), spliced into
 * the settings table of `settings.ts`: `--cluster` and what tunes
 * it, and the rules of combining them with the rest
 * ({@linkcode checkClusterSettings}).
 *
 * @module
 */

import { parseEndpoints } from "../../cluster/etcd_client.ts";
import { DEFAULT_REPLICA_LAG_MS } from "../../cluster/commit_tracker.ts";
import { DEFAULT_RING_BYTES, MIN_RING_BYTES } from "../../cluster/replication_source.ts";
import { checkNodeName, DEFAULT_PREFIX } from "../../cluster/keys.ts";
import { DEFAULT_MAX_REPLICA_LINKS } from "../../server/limits.ts";
import { integer, nonEmpty, type Reader, text } from "./values.ts";
import type { Settings } from "./run_settings.ts";

/** Default lease of a stream's leader, seconds. */
export const DEFAULT_LEASE_SECONDS = 5;

const GROUP = "cluster (docs/SCALING.md)";

const endpoints: Reader = (v, what) => {
  try {
    return parseEndpoints(nonEmpty(v, what)).join(",");
  } catch (err) {
    throw new RangeError(`${what}: ${(err as Error).message}`);
  }
};

const nodeName: Reader = (v, what) => {
  try {
    return checkNodeName(nonEmpty(v, what));
  } catch (err) {
    throw new RangeError(`${what}: ${(err as Error).message}`);
  }
};

const baseUrl: Reader = (v, what) => {
  const s = nonEmpty(v, what);
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw new RangeError(`${what} must be an http:// or https:// URL, got ${JSON.stringify(s)}`);
  }
  if ((u.protocol !== "http:" && u.protocol !== "https:") || u.pathname !== "/" || u.search) {
    throw new RangeError(
      `${what} must be an http:// or https:// URL with no path (http://HOST:PORT), got ` +
        JSON.stringify(s),
    );
  }
  return `${u.protocol}//${u.host}`;
};

/** One cluster setting: the shape of `Setting` in `settings.ts`. */
export interface ClusterSetting {
  /** The flag, without `--`. */
  flag: string;
  /** The config file's key. */
  key: string;
  /** The flag's type for `parseArgs`. */
  type: "string";
  /** How a value is read. */
  read: Reader;
  /** The value when neither the flag nor the config gives one. */
  default?: unknown;
  /** The usage text's group. */
  group: string;
  /** The usage lines. */
  usage: [string, string][];
  /** Its meaning in docs/CLI.md. */
  docs: string;
}

/**
 * The cluster settings, in the order of `--help`.
 */
export const CLUSTER_SETTINGS: readonly ClusterSetting[] = [
  {
    flag: "cluster",
    key: "cluster",
    type: "string",
    read: endpoints,
    default: null,
    group: GROUP,
    usage: [
      ["--cluster URLS", "run every durable stream as a node of the cluster"],
      ["", "coordinated by the etcd at URLS (comma-separated)"],
    ],
    docs: "run every declared stream as one node of a cluster coordinated by the etcd at URLS " +
      "(comma-separated `http://HOST:PORT`, v3 API): one leader per stream takes the " +
      "publishes, each row is committed once `--replicas` nodes hold it, and another node " +
      "takes over by itself when the leader goes. Needs `--node`; refuses `--stdin`, " +
      "`--follow`, `--ephemeral`, and `--iceberg` without `--archive`. See docs/SCALING.md.",
  },
  {
    flag: "node",
    key: "node",
    type: "string",
    read: nodeName,
    default: null,
    group: GROUP,
    usage: [["--node NAME", "this node's name in the cluster (unique)"]],
    docs: "this node's name in the cluster: 1–64 of `A-Z a-z 0-9 . _ -`, unique (a second " +
      "live node of that name at another URL is refused at start).",
  },
  {
    flag: "advertise",
    key: "advertise",
    type: "string",
    read: baseUrl,
    default: null,
    group: GROUP,
    usage: [[
      "--advertise URL",
      "where other nodes and clients reach this node [http://HOST:PORT]",
    ]],
    docs: "the URL other nodes (replication) and clients (the 307 of a publish to a " +
      "follower) reach this node at, `http://HOST:PORT` with no path; default from " +
      "`--host` and `--port`.",
  },
  {
    flag: "replicas",
    key: "replicas",
    type: "string",
    read: integer(1, 64),
    default: 1,
    group: GROUP,
    usage: [[
      "--replicas R",
      "nodes that hold a row (fsync'd) before it is acknowledged [{default}]",
    ]],
    docs: "nodes (the leader and R−1 followers) that hold a row fsync'd before it is " +
      "acknowledged and broadcast, 1–64; fewer than R in sync: publishes answer 503 " +
      "`not_enough_replicas`.",
  },
  {
    flag: "lease-seconds",
    key: "leaseSeconds",
    type: "string",
    read: integer(1, 3600),
    default: DEFAULT_LEASE_SECONDS,
    group: GROUP,
    usage: [["--lease-seconds S", "the leader's etcd lease; failover within S + 5 s [{default}]"]],
    docs: "the leader's etcd lease, whole seconds 1–3600 (etcd raises one below its minimum, " +
      "2 s by default): a leader that cannot renew it stops acknowledging within it, on its " +
      "own clock, and another node takes over within about S + 5 s.",
  },
  {
    flag: "replica-lag-ms",
    key: "replicaLagMs",
    type: "string",
    read: integer(100, 3_600_000),
    default: DEFAULT_REPLICA_LAG_MS,
    group: GROUP,
    usage: [[
      "--replica-lag-ms MS",
      "a follower this far behind leaves the in-sync set [{default}]",
    ]],
    docs: "a follower not caught up for this long (or not connected) is dropped from the " +
      "in-sync set, and commits go on without it; ms, 100–3600000.",
  },
  {
    flag: "replica-ring-bytes",
    key: "replicaRingBytes",
    type: "string",
    read: integer(MIN_RING_BYTES, 1 << 30),
    default: DEFAULT_RING_BYTES,
    group: GROUP,
    usage: [
      ["--replica-ring-bytes N", "the leader's recent commits kept for followers,"],
      ["", "bytes as shipped [{default}]"],
    ],
    docs: "bytes of its most recent commits (as shipped) a leader keeps for followers that fall " +
      "behind or reconnect; one asking from further back is caught up from the log's files " +
      "instead. 65536–1073741824.",
  },
  {
    flag: "cluster-prefix",
    key: "clusterPrefix",
    type: "string",
    read: (v, what) => {
      const p = nonEmpty(v, what);
      if (!p.startsWith("/") || p.endsWith("/")) {
        throw new RangeError(
          `${what} must start with / and not end with /, got ${JSON.stringify(p)}`,
        );
      }
      return p;
    },
    default: DEFAULT_PREFIX,
    group: GROUP,
    usage: [["--cluster-prefix P", "the prefix of the cluster's keys in etcd [{default}]"]],
    docs: "the prefix of the cluster's keys in etcd (several clusters may share one etcd).",
  },
  {
    flag: "cluster-token",
    key: "clusterToken",
    type: "string",
    read: text,
    default: null,
    group: GROUP,
    usage: [
      ["--cluster-token TOKEN", "the cluster's credential: shown as a follower, asked of"],
      ["", "followers as the leader (else a --tokens entry with"],
      ["", '"cluster": true)'],
    ],
    docs: "the cluster's credential, the same on every node: a follower presents it to the " +
      "leader's replicate route, and the leader opens that route only to it (or to a " +
      '`--tokens` entry with `"cluster": true`); a token that reads or publishes is not ' +
      "enough (403). Needed on the route whenever it is set or `--tokens` is. Never shown " +
      "in logs or `/head`.",
  },
  {
    flag: "max-replica-links",
    key: "maxReplicaLinks",
    type: "string",
    read: integer(1, 1 << 20),
    default: DEFAULT_MAX_REPLICA_LINKS,
    group: GROUP,
    usage: [
      ["--max-replica-links N", "replication sockets open at once on this node (one per"],
      ["", "stream and follower); more are answered HTTP 503 [{default}]"],
    ],
    docs: "replication sockets (`/{name}/replicate`, one per stream and follower) open at once " +
      "on this node; past it HTTP 503 `overloaded` (`limit: max_replica_links`) before the " +
      "upgrade. Counted apart from `--max-connections`. 1–1048576.",
  },
];

/**
 * The rules of `--cluster` with the other settings: every cluster setting
 * but `--cluster` needs it, `--cluster` needs `--node`, and it refuses the
 * feeds and streams a cluster cannot run (each in one line saying why): an
 * Iceberg table needs the archive, where every node finds the one table.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { settingsFrom } from "./config.ts";
 * await settingsFrom({ stream: ["t=t.json"], cluster: "http://127.0.0.1:2379", node: "n1" });
 * await settingsFrom({ stream: ["t=t.json"], cluster: "http://127.0.0.1:2379", node: "n1", stdin: "t" })
 *   .then(() => { throw new Error("taken"); }, (err) => throws(() => { throw err; }, /--stdin/));
 * ```
 */
export function checkClusterSettings(s: Settings, given: (key: string) => boolean): void {
  if (s.cluster === null) {
    for (const c of CLUSTER_SETTINGS) {
      if (c.key !== "cluster" && given(c.key)) {
        throw new RangeError(`--${c.flag} is a cluster setting: it needs --cluster`);
      }
    }
    return;
  }
  if (s.node === null) throw new RangeError("--cluster needs --node NAME (unique in the cluster)");
  if (!s.fsync) {
    throw new RangeError(
      "--no-fsync with --cluster: a cluster counts a row as held by a node only once it is " +
        "synced to its disk; run cluster nodes with fsync on",
    );
  }
  if (s.stdin !== null) {
    throw new RangeError(
      "--stdin cannot feed a cluster: rows enter a cluster through the publish routes and " +
        "--upstream, which only the leader connects",
    );
  }
  if (s.follow.size > 0) {
    throw new RangeError(
      "--follow with --cluster: a cluster's nodes follow their leader by themselves; " +
        "run followers of a cluster as separate servers",
    );
  }
  for (const [name, decl] of s.streams) {
    if (decl.ephemeral) {
      throw new RangeError(
        `--ephemeral ${JSON.stringify(name)} with --cluster: a cluster replicates logs, ` +
          "and an ephemeral stream keeps none",
      );
    }
    if (decl.iceberg && s.archive === null) {
      throw new RangeError(
        `--iceberg ${JSON.stringify(name)} with --cluster needs --archive s3://…: a cluster's ` +
          "table is shared by every node (its leader commits to it), and without an archive " +
          "each node's own disk would hold a separate table; give every node the same --archive",
      );
    }
  }
}
