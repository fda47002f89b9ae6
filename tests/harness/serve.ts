// Runs `cli.ts serve` (or any entry that prints a `listening on` line) as a real
// child process for the CLI, end-to-end and reliability tests.
import { until, utf8 } from "./util.ts";

/** Absolute path of cli.ts. */
export const CLI: string = new URL("../../cli.ts", import.meta.url).pathname;

/** A child process (`cli.ts serve`, `demo`, ...) that printed its `listening on` line. */
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
  /** Writes bytes to the process's stdin, as they are (a piece may end inside a character). */
  writeBytes(bytes: Uint8Array): Promise<void>;
  /** Closes stdin: end of input. */
  closeStdin(): Promise<void>;
  /** Sends a signal and waits (bounded) for the exit status and the end of stderr. */
  signal(sig: Deno.Signal, ms?: number): Promise<Deno.CommandStatus>;
  /** Waits (bounded) for the process to exit by itself and for the end of stderr. */
  exit(ms?: number): Promise<Deno.CommandStatus>;
  /** Kills the process if it still runs, waits for it, and releases its pipes. */
  stop(): Promise<void>;
}

/** How {@linkcode startListening} runs its child. */
export interface ListenOptions {
  /** Pipe stdin (for `write` / `closeStdin`); otherwise it is null. */
  stdin?: boolean;
  /** Working directory of the child. */
  cwd?: string;
  /** How long to wait for the listening line (default 20 s). */
  readyMs?: number;
  /** What to call the child in errors (default `serve`). */
  name?: string;
  /**
   * Variables for the child's environment only (say `STREAMCAST_CRASH_AT`):
   * never set in the test runner's, which every test file of a parallel run
   * shares — the crash hook there would kill the runner itself.
   */
  env?: Record<string, string>;
  /**
   * A command that runs deno in its place, with deno's path and arguments
   * after it (`["prlimit", "--nofile=1024:1024", "--"]`): one that execs, so
   * that the child's pid is the server's.
   */
  under?: string[];
}

interface Spawned {
  proc: Deno.ChildProcess;
  stderr(): string;
  exited(): Deno.CommandStatus | null;
  status: Promise<Deno.CommandStatus>;
  drained: Promise<void>;
}

/** Spawns `deno run -A RUNARGS` with stdout discarded and stderr collected. */
function spawn(
  runArgs: string[],
  stdin: boolean,
  cwd?: string,
  env: Record<string, string> = {},
  under: string[] = [],
): Spawned {
  const args = ["run", "-A", ...runArgs];
  const proc = new Deno.Command(under.length > 0 ? under[0] : Deno.execPath(), {
    args: under.length > 0 ? [...under.slice(1), Deno.execPath(), ...args] : args,
    stdin: stdin ? "piped" : "null",
    stdout: "null",
    stderr: "piped",
    env: { ...env, NO_COLOR: "1" },
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
 * Spawns `deno run -A RUNARGS` (env `NO_COLOR=1`) and waits (bounded) for its
 * `listening on URL` line on stderr; throws (after killing it) with its stderr
 * if it exits first or takes too long.
 */
export async function startListening(
  runArgs: string[],
  options: ListenOptions = {},
): Promise<ServeProc> {
  const name = options.name ?? "serve";
  const s = spawn(runArgs, options.stdin ?? false, options.cwd, options.env, options.under);
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
      options.readyMs ?? 20_000,
      "the listening line",
    );
  } catch (err) {
    await stop();
    throw new Error(`${name}: ${(err as Error).message}; stderr:\n${s.stderr()}`);
  }
  if (s.exited() !== null) {
    await stop();
    throw new Error(`${name} exited with ${s.exited()!.code}; stderr:\n${s.stderr()}`);
  }
  const url = listening.exec(s.stderr())![1];
  // The exit status, once stderr is fully read too (so `stderr()` is complete).
  const finished = async () => {
    const status = await s.status;
    await s.drained;
    return status;
  };
  const bounded = (ms: number, what: string) =>
    withTimeout(finished(), ms, what).catch((err) => {
      throw new Error(`${name}: ${err.message}; stderr:\n${s.stderr()}`);
    });
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
    writeBytes: async (bytes) => {
      await writer!.write(bytes);
    },
    closeStdin,
    signal: async (sig, ms = 10_000) => {
      s.proc.kill(sig);
      return await bounded(ms, `exit after ${sig}`);
    },
    exit: (ms = 10_000) => bounded(ms, "exit"),
    stop,
  };
}

/**
 * Starts `cli.ts serve ARGS` and waits for `listening on`; throws (after
 * killing it) with its stderr if it exits or takes too long.
 */
export function startServe(
  args: string[],
  options: Omit<ListenOptions, "name"> = {},
): Promise<ServeProc> {
  return startListening([CLI, "serve", ...args], { ...options, name: "serve" });
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
  const s = spawn([CLI, "serve", ...args], false);
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

/** GETs `url` as JSON, always consuming the body; throws with the body unless 2xx. */
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
