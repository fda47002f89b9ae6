/**
 * A test hook of the chunk worker's steps: the environment variable
 * `STREAMCAST_CRASH_AT` names a step at which the process is killed
 * (SIGKILL), so that tests can check crash recovery at that step for real,
 * in a child process. Unset (always, outside those tests), a step is a
 * comparison of two strings.
 *
 * @module
 */

const crashAt = (() => {
  try {
    return Deno.env.get("STREAMCAST_CRASH_AT") ?? "";
  } catch {
    // No permission to read the environment: no hook.
    return "";
  }
})();

/**
 * Marks the step `name` done: kills the process when `STREAMCAST_CRASH_AT`
 * names it.
 *
 * @example
 * ```ts
 * import { crashStep } from "./crash_hook.ts";
 * crashStep("a-step-no-test-names"); // returns: the variable does not name it
 * ```
 */
export function crashStep(name: string): void {
  if (crashAt === name) Deno.kill(Deno.pid, "SIGKILL");
}
