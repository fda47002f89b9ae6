// Starts a real S3 HTTP server (s3rver, in its own Deno process) on 127.0.0.1
// for the archive tests. If it cannot start, the test fails: it never skips.
import { freePort } from "./util.ts";

const main = new URL("./s3rver_main.ts", import.meta.url).pathname;
/** s3rver is a test-only package: its child runs with the development config. */
const DEV_CONFIG = new URL("../../deno.dev.json", import.meta.url).pathname;

export interface S3Server {
  /** http://127.0.0.1:PORT */
  endpoint: string;
  /** Where it keeps its objects. */
  dir: string;
  /** Stops the process (the objects stay in `dir`). */
  stop(): Promise<void>;
  /** Starts it again on the same port and folder. */
  start(): Promise<void>;
  /** The process's PID (null while stopped). */
  readonly pid: number | null;
}

/** The credentials s3rver accepts; set in the environment for the SDK's chain. */
export function useS3Credentials(): void {
  Deno.env.set("AWS_ACCESS_KEY_ID", "S3RVER");
  Deno.env.set("AWS_SECRET_ACCESS_KEY", "S3RVER");
  Deno.env.set("AWS_REGION", "us-east-1");
}

export async function startS3(): Promise<S3Server> {
  useS3Credentials();
  const dir = await Deno.makeTempDir({ prefix: "streamcast-s3-" });
  const port = freePort();
  let proc: Deno.ChildProcess | null = null;
  const start = async () => {
    proc = new Deno.Command(Deno.execPath(), {
      args: ["run", "--config", DEV_CONFIG, "-A", main, dir, String(port)],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let seen = "";
    const deadline = Date.now() + 60_000;
    while (!seen.includes("READY")) {
      const timeout = new Promise<{ done: true; value: undefined }>((r) =>
        setTimeout(() => r({ done: true, value: undefined }), Math.max(0, deadline - Date.now()))
      );
      const { value, done } = await Promise.race([reader.read(), timeout]);
      if (done) {
        try {
          proc.kill("SIGKILL");
        } catch { /* exited */ }
        await proc.status;
        throw new Error("s3rver did not start (see its stderr above)");
      }
      seen += value;
    }
    reader.releaseLock();
    // Keep draining its stdout so it never blocks on a full pipe.
    proc.stdout.pipeTo(new WritableStream()).catch(() => {});
  };
  const stop = async () => {
    if (!proc) return;
    const p: Deno.ChildProcess = proc;
    proc = null;
    try {
      p.kill("SIGKILL");
    } catch { /* exited */ }
    await p.status;
  };
  await start();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    dir,
    stop,
    start,
    get pid() {
      return (proc as Deno.ChildProcess | null)?.pid ?? null;
    },
  };
}

/** Stops the server and removes its folder. */
export async function stopS3(s: S3Server): Promise<void> {
  await s.stop();
  await Deno.remove(s.dir, { recursive: true }).catch(() => {});
}

/** A store on 127.0.0.1 that takes connections and never answers (a blackholed S3). */
export interface SilentStore {
  /** http://127.0.0.1:PORT */
  endpoint: string;
  /** The connections it took, held open. */
  readonly held: Deno.Conn[];
  /** Stops listening and closes every connection it took. */
  close(): Promise<void>;
}

/** Starts a {@linkcode SilentStore}. */
export function silentStore(): SilentStore {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of listener) held.push(c);
  })().catch(() => {});
  return {
    endpoint: `http://127.0.0.1:${listener.addr.port}`,
    held,
    async close() {
      listener.close();
      for (const c of held) {
        try {
          c.close();
        } catch { /* closed by the other side */ }
      }
      await accepting;
    },
  };
}
