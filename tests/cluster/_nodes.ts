// Cluster nodes as child processes (tests/cluster/_node_child.ts) on free ports
// of 127.0.0.1, each with its own log folder; stopped by PID. A paused node
// (SIGSTOP) is resumed by stop().
import { join } from "node:path";
import { freePort, until } from "../harness/util.ts";

const CHILD = new URL("./_node_child.ts", import.meta.url).pathname;

/** Options of the nodes of one test. */
export interface NodeOptions {
  /** etcd's client URL(s). */
  etcd: string;
  /** The stream. @default "s" */
  stream?: string;
  /** R. @default 2 */
  replicas?: number;
  /** Lease, s. @default 2 */
  leaseSeconds?: number;
  /** --replica-lag-ms. @default 2000 */
  lagMs?: number;
}

/** What /state says. */
export interface NodeState {
  node: string;
  role: "leader" | "follower";
  leader: string | null;
  term: number;
  in_sync: string[];
  end: number;
  durable: number;
  commit: number;
  terms: { term: number; start: number }[];
  counters: { elected: number; deposed: number; rowsCut: number; refused: number };
  publishable: { error: string; leader: string | null } | null;
}

/** A publish's answer. */
export interface PublishAnswer {
  status: number;
  body: { first?: number; last?: number; duplicate?: boolean; error?: string };
}

/** One node process. */
export class NodeProc {
  readonly name: string;
  readonly port: number;
  readonly url: string;
  readonly dir: string;
  readonly logPath: string;
  readonly #args: string[];
  #child: Deno.ChildProcess | null = null;
  #paused = false;

  constructor(name: string, root: string, o: NodeOptions) {
    this.name = name;
    this.port = freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    this.dir = join(root, name, o.stream ?? "s");
    this.logPath = join(root, `${name}.log`);
    this.#args = [
      o.etcd,
      o.stream ?? "s",
      name,
      String(this.port),
      this.dir,
      String(o.replicas ?? 2),
      String(o.leaseSeconds ?? 2),
      String(o.lagMs ?? 2000),
    ];
  }

  get pid(): number {
    if (!this.#child) throw new Error(`${this.name} is not running`);
    return this.#child.pid;
  }

  get running(): boolean {
    return this.#child !== null;
  }

  async start(): Promise<void> {
    const log = await Deno.open(this.logPath, { write: true, create: true, append: true });
    this.#child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CHILD, ...this.#args],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    // The node's log lines, kept for a failing test to show.
    (async (stderr: ReadableStream<Uint8Array>) => {
      try {
        for await (const chunk of stderr) await log.write(chunk);
      } finally {
        log.close();
      }
    })(this.#child.stderr).catch(() => {});
    const reader = this.#child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let seen = "";
    const deadline = Date.now() + 20_000;
    while (!seen.includes('"ready":true')) {
      const { value, done } = await reader.read();
      if (done || Date.now() > deadline) {
        throw new Error(`${this.name} did not start; its log:\n${await this.logTail()}`);
      }
      seen += value;
    }
    reader.cancel().catch(() => {});
  }

  async logTail(lines = 30): Promise<string> {
    const text = await Deno.readTextFile(this.logPath).catch(() => "");
    return text.trim().split("\n").slice(-lines).join("\n");
  }

  pause(): void {
    Deno.kill(this.pid, "SIGSTOP");
    this.#paused = true;
  }

  resume(): void {
    Deno.kill(this.pid, "SIGCONT");
    this.#paused = false;
  }

  async kill(): Promise<void> {
    const c = this.#child;
    if (!c) return;
    try {
      c.kill("SIGKILL");
    } catch {
      // exited
    }
    await c.status;
    this.#child = null;
    this.#paused = false;
  }

  async stop(): Promise<void> {
    const c = this.#child;
    if (!c) return;
    if (this.#paused) this.resume();
    try {
      c.kill("SIGTERM");
    } catch {
      // exited
    }
    const timer = setTimeout(() => {
      try {
        c.kill("SIGKILL");
      } catch {
        // exited meanwhile
      }
    }, 5000);
    await c.status;
    clearTimeout(timer);
    this.#child = null;
  }

  async state(timeoutMs = 2000): Promise<NodeState> {
    const res = await fetch(`${this.url}/state`, { signal: AbortSignal.timeout(timeoutMs) });
    return await res.json();
  }

  async publish(
    rows: string[],
    producer?: string,
    seq?: number,
    signal?: AbortSignal,
  ): Promise<PublishAnswer> {
    const q = producer ? `?producer=${producer}&seq=${seq}` : "";
    const res = await fetch(`${this.url}/publish${q}`, {
      method: "POST",
      body: rows.join("\n"),
      signal,
    });
    return { status: res.status, body: await res.json() };
  }

  /** Every durable row: [offset, time µs, payload]. */
  async rows(): Promise<[number, number, string][]> {
    const text = await (await fetch(`${this.url}/rows`)).text();
    return text === "" ? [] : text.split("\n").map((l) => JSON.parse(l));
  }

  async producer(p: string): Promise<{ seq: number; first: number; last: number } | null> {
    return await (await fetch(`${this.url}/producer?p=${p}`)).json();
  }

  /** Holds this node's segment syncs (`hold`), or lets them go (failing them, with `fail`). */
  async holdSyncs(hold: boolean, fail = false): Promise<void> {
    const q = `hold=${hold ? 1 : 0}${fail ? "&fail=1" : ""}`;
    const res = await fetch(`${this.url}/syncs?${q}`, { method: "POST" });
    const held = (await res.json()).held;
    if (held !== hold) throw new Error(`${this.name}: syncs held ${held}, asked ${hold}`);
  }
}

/** Starts `names` as nodes; stops them all on dispose. */
export async function startNodes(
  root: string,
  names: string[],
  o: NodeOptions,
): Promise<NodeProc[] & AsyncDisposable> {
  const nodes = names.map((n) => new NodeProc(n, root, o));
  const list = Object.assign(nodes, {
    async [Symbol.asyncDispose]() {
      for (const n of nodes) await n.stop();
    },
  });
  try {
    for (const n of nodes) await n.start();
  } catch (err) {
    await list[Symbol.asyncDispose]();
    throw err;
  }
  return list;
}

/** The one node that says it leads (and that every running node agrees on). */
export async function leaderOf(nodes: NodeProc[], ms = 20_000): Promise<NodeProc> {
  let found: NodeProc | null = null;
  await until(
    async () => {
      found = null;
      for (const n of nodes) {
        if (!n.running) continue;
        try {
          const s = await n.state(1000);
          if (s.role === "leader" && s.publishable === null) found = n;
        } catch {
          // paused or starting
        }
      }
      return found !== null;
    },
    ms,
    "a leader that takes publishes",
  );
  return found!;
}
