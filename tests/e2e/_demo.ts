// Runs the `demo` command as a real child process for the end-to-end and CLI tests.
import { until } from "../_util.ts";

/** The repository's root folder. */
export const REPO: string = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/**
 * What runs `demo`: a wrapper around `cmdDemo` until cli.ts dispatches
 * `demo` itself (then this can be `[CLI, "demo"]`).
 */
const DEMO_ARGS = [new URL("./_demo_main.ts", import.meta.url).pathname];

/** A `demo` process that printed its `listening on` line. */
export interface DemoProc {
  readonly proc: Deno.ChildProcess;
  /** `http://HOST:PORT` from the listening line. */
  readonly url: string;
  /** The port it listens on. */
  readonly port: number;
  /** Everything printed on stderr so far. */
  stderr(): string;
  /** Sends a signal and waits (bounded) for the exit status. */
  signal(sig: Deno.Signal, ms?: number): Promise<Deno.CommandStatus>;
  /** Kills the process if it still runs, waits for it, and releases its pipes. */
  stop(): Promise<void>;
}

/** Rejects after `ms` unless `p` settles first. */
export async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Spawns `deno run -A ENTRY ARGS` (ENTRY: the demo unless `command` says
 * otherwise) in `cwd` and waits (bounded) for `listening on`; throws, after
 * killing it, with its stderr if it exits first or takes too long.
 */
export async function startDemo(
  args: string[],
  options: { command?: string[]; cwd?: string; readyMs?: number } = {},
): Promise<DemoProc> {
  const proc = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", ...(options.command ?? DEMO_ARGS), ...args],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    cwd: options.cwd,
  }).spawn();
  let text = "";
  let exit: Deno.CommandStatus | null = null;
  const decoder = new TextDecoder();
  const drained = (async () => {
    for await (const chunk of proc.stderr) text += decoder.decode(chunk, { stream: true });
  })();
  const status = proc.status.then((s) => (exit = s));
  const stop = async () => {
    if (exit === null) {
      try {
        proc.kill("SIGKILL");
      } catch {
        // exited in between
      }
    }
    await status;
    await drained;
  };
  const listening = /listening on (http:\/\/[^\s]+)/;
  try {
    await until(
      () => listening.test(text) || exit !== null,
      options.readyMs ?? 20_000,
      "the listening line",
    );
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}; stderr:\n${text}`);
  }
  if (exit !== null) {
    await stop();
    throw new Error(`demo exited with ${(exit as Deno.CommandStatus).code}; stderr:\n${text}`);
  }
  const url = listening.exec(text)![1];
  return {
    proc,
    url,
    port: Number(new URL(url).port),
    stderr: () => text,
    signal: async (sig, ms = 10_000) => {
      proc.kill(sig);
      const s = await withTimeout(status, ms, `exit after ${sig}`);
      await drained;
      return s;
    },
    stop,
  };
}

/** GETs `url` as JSON, always consuming the body. */
export async function getJson(url: string): Promise<Record<string, unknown>> {
  const res = await fetch(url);
  const body = await res.text();
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${body}`);
  return JSON.parse(body);
}

/** The stream's end offset from `/{name}/head`. */
export async function endOffset(url: string, name = "trades"): Promise<number> {
  return (await getJson(`${url}/${name}/head`)).end_offset as number;
}
