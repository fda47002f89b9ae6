// Runs the `demo` command as a real child process for the end-to-end and CLI tests.
import { getJson, type ServeProc, startListening, withTimeout } from "./serve.ts";

export { getJson, withTimeout };

/** The repository's root folder. */
export const REPO: string = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/**
 * What runs `demo`: a wrapper around `cmdDemo` until cli.ts dispatches
 * `demo` itself (then this can be `[CLI, "demo"]`).
 */
const DEMO_ARGS = [new URL("./demo_main.ts", import.meta.url).pathname];

/** A `demo` process that printed its `listening on` line. */
export interface DemoProc extends ServeProc {
  /** The port it listens on. */
  readonly port: number;
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
  const p = await startListening([...(options.command ?? DEMO_ARGS), ...args], {
    cwd: options.cwd,
    readyMs: options.readyMs,
    name: "demo",
  });
  return { ...p, port: Number(new URL(p.url).port) };
}

/** The stream's end offset from `/{name}/head`. */
export async function endOffset(url: string, name = "trades"): Promise<number> {
  return (await getJson(`${url}/${name}/head`)).end_offset as number;
}
