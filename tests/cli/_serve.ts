// Runs `cli.ts serve` as a real child process for the CLI tests.
import { until, utf8 } from "../_util.ts";

/** Absolute path of cli.ts. */
export const CLI: string = new URL("../../cli.ts", import.meta.url).pathname;

/** A `cli.ts serve` process that printed its `listening on` line. */
export interface ServeProc {
  readonly proc: Deno.ChildProcess;
  /** `http://HOST:PORT` from the listening line. */
  readonly url: string;
  /** `ws://HOST:PORT`. */
  readonly ws: string;
  /** Everything printed on stderr so far. */
  stderr(): string;
  /** Waits (bounded) until stderr matches. */
  waitStderr(pattern: RegExp, ms?: number): Promise<void>;
  /** Writes to the process's stdin (needs `stdin: true`). */
  write(text: string): Promise<void>;
  /** Closes stdin: end of input. */
  closeStdin(): Promise<void>;
  /** Sends a signal and waits (bounded) for the exit status. */
  signal(sig: Deno.Signal, ms?: number): Promise<Deno.CommandStatus>;
  /** Waits (bounded) for the process to exit by itself. */
  exit(ms?: number): Promise<Deno.CommandStatus>;
  /** Kills the process if it still runs, waits for it, and releases its pipes. */
  stop(): Promise<void>;
}

interface Spawned {
  proc: Deno.ChildProcess;
  stderr(): string;
  exited(): Deno.CommandStatus | null;
  status: Promise<Deno.CommandStatus>;
  drained: Promise<void>;
}

function spawn(args: string[], stdin: boolean, cwd?: string): Spawned {
  const proc = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "serve", ...args],
    stdin: stdin ? "piped" : "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    cwd,
  }).spawn();
  let text = "";
  let exit: Deno.CommandStatus | null = null;
  const decoder = new TextDecoder();
  const drained = (async () => {
    for await (const chunk of proc.stderr) text += decoder.decode(chunk, { stream: true });
  })();
  const status = proc.status.then((s) => (exit = s));
  return { proc, stderr: () => text, exited: () => exit, status, drained };
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
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
 * Starts `cli.ts serve ARGS` and waits for `listening on`; throws (after
 * killing it) with its stderr if it exits or takes too long.
 */
export async function startServe(
  args: string[],
  options: { stdin?: boolean; cwd?: string } = {},
): Promise<ServeProc> {
  const s = spawn(args, options.stdin ?? false, options.cwd);
  const writer = options.stdin ? s.proc.stdin.getWriter() : null;
  let stdinOpen = writer !== null;
  const closeStdin = async () => {
    if (!stdinOpen) return;
    stdinOpen = false;
    // The process may be gone (broken pipe): its stdin is closed either way.
    await writer!.close().catch(() => {});
  };
  const stop = async () => {
    if (s.exited() === null) {
      try {
        s.proc.kill("SIGKILL");
      } catch {
        // exited in between
      }
    }
    await closeStdin();
    await s.status;
    await s.drained;
  };
  const listening = /listening on (http:\/\/[^\s]+)/;
  try {
    await until(
      () => listening.test(s.stderr()) || s.exited() !== null,
      20_000,
      "the listening line",
    );
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}; stderr:\n${s.stderr()}`);
  }
  if (s.exited() !== null) {
    await stop();
    throw new Error(`serve exited with ${s.exited()!.code}; stderr:\n${s.stderr()}`);
  }
  const url = listening.exec(s.stderr())![1];
  return {
    proc: s.proc,
    url,
    ws: url.replace(/^http/, "ws"),
    stderr: s.stderr,
    waitStderr: (pattern, ms = 10_000) =>
      until(() => pattern.test(s.stderr()), ms, `stderr matching ${pattern}`).catch((err) => {
        throw new Error(`${err.message}; stderr:\n${s.stderr()}`);
      }),
    write: async (text) => {
      await writer!.write(utf8(text));
    },
    closeStdin,
    signal: async (sig, ms = 10_000) => {
      s.proc.kill(sig);
      return await withTimeout(s.status, ms, `exit after ${sig}`);
    },
    exit: (ms = 10_000) => withTimeout(s.status, ms, "exit"),
    stop,
  };
}

// Deno's own line when several deno processes start at once and queue for the
// node_modules lock: the runtime's, not serve's, so the one-line checks skip it.
// (Children run with NO_COLOR, so the line is plain text.)
const LOCK_WAIT = /^Blocking waiting for file lock.*\n/gm;

/** Runs `cli.ts serve ARGS` to its exit (killed after `ms`): the exit code and stderr. */
export async function runServe(
  args: string[],
  ms = 20_000,
): Promise<{ code: number; stderr: string }> {
  const s = spawn(args, false);
  const timer = setTimeout(() => {
    try {
      s.proc.kill("SIGKILL");
    } catch {
      // exited in between
    }
  }, ms);
  try {
    const status = await s.status;
    await s.drained;
    return { code: status.code, stderr: s.stderr().replace(LOCK_WAIT, "") };
  } finally {
    clearTimeout(timer);
  }
}

/** GETs `url` as JSON (or text), always consuming the body. */
export async function getJson(url: string): Promise<Record<string, unknown>> {
  const res = await fetch(url);
  const body = await res.text();
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${body}`);
  return JSON.parse(body);
}

/** GETs `url` as text. */
export async function getText(url: string): Promise<string> {
  const res = await fetch(url);
  return await res.text();
}
