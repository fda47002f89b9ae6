// A real etcd for the cluster tests: Debian's `etcd-server` (etcd 3.4, installed
// by tests/harness/prepare.ts), one member on free client and peer ports of 127.0.0.1
// with its own temporary data folder. Stopped by PID; `kill`, `restart`,
// `pause` and `resume` are the faults the tests inject. A test that pauses it
// resumes or stops it: `stop()` (and `await using`) does both.
import { join } from "node:path";
import { freePort, rmrf, until } from "./util.ts";
import { ETCD } from "./prepare.ts";

/** Options of {@linkcode startEtcd}. */
export interface EtcdOptions {
  /** The member name. @default "etcd0" */
  name?: string;
  /** The data folder (kept across `restart`). @default a fresh temp folder, removed by stop() */
  dataDir?: string;
  /** How long to wait until it answers healthy, ms. @default 20000 */
  readyMs?: number;
}

/** A running etcd member. */
export class EtcdProc {
  /** The client URL, `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** The data folder. */
  readonly dataDir: string;
  readonly #args: string[];
  readonly #ownDir: boolean;
  readonly #readyMs: number;
  #child: Deno.ChildProcess | null = null;
  #paused = false;

  constructor(url: string, dataDir: string, args: string[], ownDir: boolean, readyMs: number) {
    this.url = url;
    this.dataDir = dataDir;
    this.#args = args;
    this.#ownDir = ownDir;
    this.#readyMs = readyMs;
  }

  /** The process id of the running member (throws when it is not running). */
  get pid(): number {
    if (!this.#child) throw new Error("etcd is not running");
    return this.#child.pid;
  }

  /** Whether a process is running (paused counts as running). */
  get running(): boolean {
    return this.#child !== null;
  }

  /** Starts the process and waits until `/health` says true. */
  async start(): Promise<void> {
    if (this.#child) throw new Error("etcd is already running");
    this.#child = new Deno.Command(ETCD, {
      args: this.#args,
      stdin: "null",
      stdout: "null",
      stderr: "null", // the member logs to its data folder's etcd.log
    }).spawn();
    const child = this.#child;
    let exited: Deno.CommandStatus | null = null;
    child.status.then((s) => (exited = s));
    try {
      await until(
        async () => {
          if (exited) {
            throw new Error(
              `etcd exited with ${exited.code} before it was healthy; its log:\n${await this
                .logTail()}`,
            );
          }
          return await this.healthy();
        },
        this.#readyMs,
        `etcd at ${this.url} to be healthy`,
      );
    } catch (err) {
      await this.kill();
      throw err;
    }
  }

  /** Whether `/health` answers `{"health":"true"}` within 1 s. */
  async healthy(): Promise<boolean> {
    try {
      const res = await fetch(`${this.url}/health`, { signal: AbortSignal.timeout(1000) });
      const body = await res.json() as { health?: string };
      return body.health === "true";
    } catch {
      return false; // not up yet, or paused
    }
  }

  /** The last lines of the member's log. */
  async logTail(lines = 20): Promise<string> {
    const text = await Deno.readTextFile(join(this.dataDir, "etcd.log")).catch(() => "");
    return text.trim().split("\n").slice(-lines).join("\n");
  }

  /** SIGSTOP: the member stops answering, its connections stay open. */
  pause(): void {
    Deno.kill(this.pid, "SIGSTOP");
    this.#paused = true;
  }

  /** SIGCONT after {@linkcode pause}. */
  resume(): void {
    Deno.kill(this.pid, "SIGCONT");
    this.#paused = false;
  }

  /** SIGKILL, and waits until the process is gone (the data folder stays). */
  async kill(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    try {
      child.kill("SIGKILL");
    } catch {
      // already exited
    }
    await child.status;
    this.#child = null;
    this.#paused = false;
  }

  /** Starts it again on the same ports and data folder. */
  async restart(): Promise<void> {
    await this.kill();
    await this.start();
  }

  /** Stops the process by PID (SIGTERM, SIGKILL after 5 s) and removes a data folder it made. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (child) {
      if (this.#paused) this.resume();
      try {
        child.kill("SIGTERM");
      } catch {
        // already exited
      }
      const timer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch {
          // exited meanwhile
        }
      }, 5000);
      await child.status;
      clearTimeout(timer);
      this.#child = null;
    }
    if (this.#ownDir) await rmrf(this.dataDir);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/**
 * Starts one etcd member on free ports of 127.0.0.1 and waits until it is
 * healthy; fails (never skips) when it cannot start.
 */
export async function startEtcd(options: EtcdOptions = {}): Promise<EtcdProc> {
  const name = options.name ?? "etcd0";
  const ownDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? await Deno.makeTempDir({ prefix: "streamcast-etcd-" });
  // A free port can be taken by a parallel test between the probe and etcd's
  // bind; that start is retried on fresh ports, any other failure is not.
  for (let attempt = 1;; attempt++) {
    const proc = etcdOnFreePorts(name, dataDir, ownDir, options.readyMs ?? 20_000);
    try {
      await proc.start();
      return proc;
    } catch (err) {
      const taken = String((err as Error).message).includes("address already in use");
      if (taken && attempt < 5) {
        if (ownDir) await rmrf(join(dataDir, "member")); // nothing of a failed start is kept
        continue;
      }
      if (ownDir) await rmrf(dataDir);
      throw err;
    }
  }
}

function etcdOnFreePorts(
  name: string,
  dataDir: string,
  ownDir: boolean,
  readyMs: number,
): EtcdProc {
  const clientPort = freePort();
  let peerPort = freePort();
  while (peerPort === clientPort) peerPort = freePort();
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const args = [
    "--name",
    name,
    "--data-dir",
    join(dataDir, "member"),
    "--listen-client-urls",
    client,
    "--advertise-client-urls",
    client,
    "--listen-peer-urls",
    peer,
    "--initial-advertise-peer-urls",
    peer,
    "--initial-cluster",
    `${name}=${peer}`,
    "--initial-cluster-state",
    "new",
    "--logger",
    "zap",
    "--log-outputs",
    join(dataDir, "etcd.log"),
    "--log-level",
    "warn",
  ];
  return new EtcdProc(client, dataDir, args, ownDir, readyMs);
}
