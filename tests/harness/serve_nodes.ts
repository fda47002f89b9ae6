// Real `cli.ts serve --cluster` processes for the cluster tests: each node on a
// free port of 127.0.0.1 with its own root, stopped by PID (a paused one is
// killed too: SIGKILL ends a stopped process). Plus what the tests do to them
// over plain HTTP and WebSocket: read /head's cluster object, find the leader,
// publish with a producer id following the 307 or moving to another node, and
// read every row a node shows. With signed tokens on, each node holds the
// token the test's own requests carry; the helpers read stream `t` unless
// told another.
import { join } from "node:path";
import { freePort, until } from "./util.ts";
import { CLI, type ServeProc, startServe } from "./serve.ts";

export const SCHEMA = {
  type: "object",
  properties: { p: { type: "string" }, seq: { type: "integer" }, i: { type: "integer" } },
  required: ["p", "seq", "i"],
};

/** What /head's `cluster` says. */
export interface ClusterHead {
  node: string;
  role: "leader" | "follower";
  leader: string | null;
  term: number;
  replicas: number;
  in_sync: string[];
  commit_index: number;
  durable_end: number;
}

/** Options of one test's nodes. */
export interface ServeNodeOptions {
  /** etcd's client URL(s). */
  etcd: string;
  /** R. @default 2 */
  replicas?: number;
  /** Lease, s. @default 2 */
  leaseSeconds?: number;
  /** --replica-lag-ms. @default 1000 */
  lagMs?: number;
  /** More flags. */
  extra?: string[];
  /** The bearer token the test's own requests to the nodes carry (null: none). @default null */
  token?: string | null;
}

/** Which stream a helper acts on, and the token it carries. */
export interface StreamAccess {
  /** @default "t" */
  stream?: string;
  /** @default none */
  token?: string | null;
}

/** The Authorization header of `token` (none for null). */
export function bearer(token: string | null | undefined): Record<string, string> {
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** `&access_token=…` for a WebSocket URL's query (empty for null). */
export function tokenQuery(token: string | null | undefined): string {
  return token ? `&access_token=${encodeURIComponent(token)}` : "";
}

/** One `cli.ts serve --cluster` node. */
export class ServeNode {
  readonly name: string;
  readonly port: number = freePort();
  readonly url: string;
  readonly root: string;
  /** The token the test's own requests carry, or null. */
  readonly token: string | null;
  readonly #args: string[];
  #proc: ServeProc | null = null;
  #paused = false;
  // What the node's earlier processes printed (it may be killed and started again).
  #earlier = "";

  constructor(name: string, root: string, schemaPath: string, o: ServeNodeOptions) {
    this.name = name;
    this.url = `http://127.0.0.1:${this.port}`;
    this.root = join(root, name);
    this.token = o.token ?? null;
    this.#args = [
      "--cluster",
      o.etcd,
      "--node",
      name,
      "--port",
      String(this.port),
      "--root",
      this.root,
      "--stream",
      `t=${schemaPath}`,
      "--publish",
      "t",
      "--replicas",
      String(o.replicas ?? 2),
      "--lease-seconds",
      String(o.leaseSeconds ?? 2),
      "--replica-lag-ms",
      String(o.lagMs ?? 1000),
      "--log-format",
      "json",
      ...(o.extra ?? []),
    ];
  }

  get ws(): string {
    return this.url.replace(/^http/, "ws");
  }

  get running(): boolean {
    return this.#proc !== null;
  }

  get pid(): number {
    return this.#proc!.proc.pid;
  }

  /** Everything this node printed on stderr, across restarts. */
  stderr(): string {
    return this.#earlier + (this.#proc?.stderr() ?? "");
  }

  /**
   * The events among `names` this node logged (its JSON log lines), oldest
   * first, across restarts. Read from its stderr as it comes: an event
   * logged just now may not be here yet, so wait for it with `until`.
   */
  events(...names: string[]): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (const line of this.stderr().split("\n")) {
      if (!line.startsWith("{")) continue;
      try {
        const v = JSON.parse(line);
        if (names.includes(v.event)) out.push(v);
      } catch {
        // not a whole log line (yet)
      }
    }
    return out;
  }

  async start(): Promise<void> {
    this.#proc = await startServe(this.#args, { readyMs: 30_000 });
  }

  pause(): void {
    Deno.kill(this.pid, "SIGSTOP");
    this.#paused = true;
  }

  resume(): void {
    Deno.kill(this.pid, "SIGCONT");
    this.#paused = false;
  }

  /** SIGKILL (also of a paused process), and waits for the exit. */
  async kill(): Promise<void> {
    const p = this.#proc;
    if (!p) return;
    this.#proc = null;
    this.#paused = false;
    await p.stop();
    this.#earlier += p.stderr();
  }

  /**
   * SIGTERM and a clean exit (SIGKILL after 30 s: leaving the cluster makes a few etcd calls a
   * stream — resign, revoke — each of which may wait out its 2 s timeout when etcd is slow to
   * answer on a loaded machine).
   */
  async stop(): Promise<void> {
    const p = this.#proc;
    if (!p) return;
    if (this.#paused) this.resume();
    this.#proc = null;
    try {
      await p.signal("SIGTERM", 30_000);
    } finally {
      await p.stop();
      this.#earlier += p.stderr();
    }
  }

  /**
   * `cli.ts verify` on this node's folder of `stream` (the node stopped):
   * its exit code and what it printed on stderr.
   */
  async verify(stream = "t"): Promise<{ code: number; stderr: string }> {
    const v = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "verify", join(this.root, stream)],
      stdout: "null",
      stderr: "piped",
    }).output();
    return { code: v.code, stderr: new TextDecoder().decode(v.stderr) };
  }

  /**
   * /head's cluster object and end offset (of stream `t`, or `stream`), or
   * null when it does not answer within `ms`.
   */
  async head(ms = 1000, stream = "t"): Promise<(ClusterHead & { end: number }) | null> {
    try {
      const res = await fetch(`${this.url}/${stream}/head`, {
        headers: bearer(this.token),
        signal: AbortSignal.timeout(ms),
      });
      const h = await res.json();
      // A stream this node does not serve now (opening again: 503) has no head.
      if (!res.ok) return null;
      return { ...h.cluster, end: h.end_offset };
    } catch {
      return null;
    }
  }
}

/** A node's process set, stopped on dispose. */
export type ServeNodes = ServeNode[] & AsyncDisposable;

/**
 * Starts nodes `names` of one cluster (in parallel), stream `t` with
 * `schema`; stops them all on dispose.
 */
export async function startServeNodes(
  root: string,
  names: string[],
  o: ServeNodeOptions,
  schema: Record<string, unknown> = SCHEMA,
): Promise<ServeNodes> {
  const schemaPath = join(root, "schema.json");
  await Deno.writeTextFile(schemaPath, JSON.stringify(schema));
  const nodes = names.map((n) => new ServeNode(n, root, schemaPath, o));
  const list = Object.assign(nodes, {
    async [Symbol.asyncDispose]() {
      await Promise.allSettled(nodes.map((n) => n.kill()));
    },
  });
  try {
    await Promise.all(nodes.map((n) => n.start()));
  } catch (err) {
    await list[Symbol.asyncDispose]();
    throw err;
  }
  return list;
}

/**
 * The node that leads stream `t` (or `stream`) and takes publishes, as every
 * running node's head agrees.
 */
export async function leaderOf(
  nodes: ServeNode[],
  ms = 20_000,
  stream = "t",
): Promise<ServeNode> {
  let found: ServeNode | null = null;
  await until(
    async () => {
      found = null;
      const heads = await Promise.all(nodes.map((n) => n.running ? n.head(1000, stream) : null));
      const leaders = nodes.filter((_, i) => heads[i]?.role === "leader");
      if (leaders.length !== 1) return false;
      const url = leaders[0].url;
      if (!heads.every((h, i) => !nodes[i].running || h === null || h.leader === url)) return false;
      const r = await fetch(`${url}/${stream}`, {
        method: "POST",
        headers: { "content-type": "application/x-ndjson", ...bearer(leaders[0].token) },
        body: "",
      }).catch(() => null);
      await r?.body?.cancel();
      // An empty body is refused (400) only once the node takes the publish at all.
      if (r?.status !== 400) return false;
      found = leaders[0];
      return true;
    },
    ms,
    "a leader every node agrees on",
  );
  return found!;
}

/** NDJSON rows of producer `p`'s seq `seq`, `n` of them. */
export function rowsOf(p: string, seq: number, n: number): string {
  let out = "";
  for (let i = 0; i < n; i++) out += JSON.stringify({ p, seq, i }) + "\n";
  return out;
}

/** A POST's answer. */
export interface PostAnswer {
  status: number;
  body: Record<string, unknown>;
  /** The node that answered. */
  url: string;
}

/** POSTs rows as (producer, seq) to `url` (fetch follows a 307); null when no answer comes. */
export async function post(
  url: string,
  body: string,
  tag: { producer: string; seq: number } | null,
  ms = 10_000,
  access: StreamAccess = {},
): Promise<PostAnswer | null> {
  const stream = access.stream ?? "t";
  // The token rides in the query: fetch drops an Authorization header on a 307 to another port.
  const query = access.token ? `?access_token=${encodeURIComponent(access.token)}` : "";
  try {
    const res = await fetch(`${url}/${stream}${query}`, {
      method: "POST",
      headers: {
        "content-type": "application/x-ndjson",
        ...(tag ? { "streamcast-producer": tag.producer, "streamcast-seq": String(tag.seq) } : {}),
      },
      body,
      signal: AbortSignal.timeout(ms),
    });
    return { status: res.status, body: await res.json(), url: new URL(res.url).origin };
  } catch (err) {
    console.log(`POST ${url}/${stream} (${tag?.producer} seq ${tag?.seq}): no answer: ${err}`);
    return null;
  }
}

/**
 * Asserts what node `name` shows (`rowsShown`, up to `end`): offsets
 * 1..end-1 in order, no row twice, and every row of `wanted` (row texts).
 */
export function assertShownOnce(
  name: string,
  shown: [number, string][],
  end: number,
  wanted: Iterable<string>,
): void {
  const seen = new Map<string, number>();
  for (const [, row] of shown) seen.set(row, (seen.get(row) ?? 0) + 1);
  for (const [row, times] of seen) {
    if (times !== 1) throw new Error(`${name} shows ${row} ${times} times`);
  }
  for (const row of wanted) {
    if (!seen.has(row)) throw new Error(`${name} lacks acknowledged row ${row}`);
  }
  const offsets = shown.map(([o]) => o).join(",");
  const want = [...Array(end - 1)].map((_, i) => i + 1).join(",");
  if (offsets !== want) throw new Error(`${name} shows offsets ${offsets}, not 1..${end - 1}`);
}

/** Every row node `url` shows, as `[offset, row text]`, read by a subscription from offset 1. */
export async function rowsShown(
  url: string,
  end: number,
  access: StreamAccess = {},
): Promise<[number, string][]> {
  const out: [number, string][] = [];
  if (end <= 1) return out;
  const stream = access.stream ?? "t";
  const ws = new WebSocket(
    `${url.replace(/^http/, "ws")}/${stream}?offset=1${tokenQuery(access.token)}`,
  );
  let greeted = false;
  let closed = false;
  ws.onmessage = (e) => {
    if (!greeted) {
      greeted = true;
      return;
    }
    for (const line of (e.data as string).split("\n")) {
      const [offset] = JSON.parse(line) as [number];
      out.push([offset, line.slice(line.indexOf(",") + 1, -1)]);
    }
  };
  ws.onclose = () => (closed = true);
  try {
    // 20 s, and a millisecond a row for a long log.
    const ms = 20_000 + end;
    await until(() => out.length >= end - 1 || closed, ms, `rows 1..${end - 1} of ${url}`);
  } finally {
    ws.close();
  }
  return out;
}

/**
 * Waits until the running nodes show the same end, all of it committed and
 * durable on each; returns that end.
 */
export async function converged(nodes: ServeNode[], ms = 30_000, stream = "t"): Promise<number> {
  let end = 0;
  await until(
    async () => {
      const heads = await Promise.all(
        nodes.filter((n) => n.running).map((n) => n.head(1000, stream)),
      );
      if (heads.some((h) => h === null)) return false;
      end = heads[0]!.end;
      return heads.every((h) =>
        h!.end === end && h!.commit_index === end && h!.durable_end === end
      );
    },
    ms,
    "the nodes to converge",
  );
  return end;
}
