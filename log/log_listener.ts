/**
 * What a log tells its owner (a stream): the commits it made durable, the
 * appends a failed write dropped, a fence that moved its end with no commit;
 * and what it asks first: whether the next commit's write must wait.
 *
 * @module
 */

/**
 * The one listener a {@linkcode Log} has, set once with `Log.listen`. Every
 * member is optional.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Log } from "./log.ts";
 * import type { LogListener } from "./log_listener.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { timers: false });
 * const commits: [number, number][] = [];
 * const listener: LogListener = { committed: (first, end) => void commits.push([first, end]) };
 * log.listen(listener);
 * await log.appendMany(["{}", "{}"]);
 * deepStrictEqual(commits, [[1, 3]]);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export interface LogListener {
  /** After each durable commit, with the offsets `[first, end)` it made durable. */
  committed?(first: number, end: number): void;
  /**
   * Appends that were given offsets from `from` on were dropped by a failed
   * write (`cause`; none for a cut of a replicated log's tail). Called before
   * the appends' promises reject.
   */
  discarded?(from: number, cause?: Error): void;
  /** A fence moved the next offset to `offset` with no commit (rows adopted, a gap). */
  fenced?(offset: number): void;
  /** The active segment was sealed (the next one made): a time for an owner to save its own state. */
  sealed?(): void;
  /** Before each commit's write: the write waits for what it returns (null: nothing to wait for). */
  beforeCommit?(): Promise<void> | null;
}
