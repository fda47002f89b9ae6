/**
 * The errors the log throws that callers catch by class.
 *
 * @module
 */

/**
 * A log file is damaged in a way that is not a torn tail: the log refuses to
 * open (or a reader stops) rather than skip data.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { LogCorruptError } from "./errors.ts";
 * const err = new LogCorruptError("data/trades/00000000000000000001.seg", 4096, "checksum mismatch");
 * equal(
 *   err.message,
 *   "corrupt log: checksum mismatch at byte 4096 in data/trades/00000000000000000001.seg",
 * );
 * ```
 */
export class LogCorruptError extends Error {
  /** The damaged file. */
  readonly path: string;
  /** Byte position of the damage in that file. */
  readonly position: number;
  /** What was wrong. */
  readonly detail: string;
  /** Makes the error for `path` at byte `position`. */
  constructor(path: string, position: number, detail: string) {
    super(`corrupt log: ${detail} at byte ${position} in ${path}`);
    this.name = "LogCorruptError";
    this.path = path;
    this.position = position;
    this.detail = detail;
  }
}

/**
 * A read asked for rows the log no longer holds (retention dropped them).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { LogEvictedError } from "./errors.ts";
 * const err = new LogEvictedError(5, 100);
 * equal(err.earliest, 100);
 * ```
 */
export class LogEvictedError extends Error {
  /** The offset asked for. */
  readonly offset: number;
  /** The earliest offset the log still holds (null: none). */
  readonly earliest: number | null;
  /** Makes the error. */
  constructor(offset: number, earliest: number | null) {
    super(`offset ${offset} is no longer held by the log; the earliest is ${earliest ?? "none"}`);
    this.name = "LogEvictedError";
    this.offset = offset;
    this.earliest = earliest;
  }
}

/**
 * The log could not be opened because another writer holds it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { LogLockedError } from "./errors.ts";
 * equal(new LogLockedError("data/trades", "pid 42").dir, "data/trades");
 * ```
 */
export class LogLockedError extends Error {
  /** The log folder. */
  readonly dir: string;
  /** Makes the error for `dir`. */
  constructor(dir: string, holder: string) {
    super(
      `log ${dir} is already open for writing${holder ? ` (by ${holder})` : ""}; ` +
        `one writer per log: stop the other process first`,
    );
    this.name = "LogLockedError";
    this.dir = dir;
  }
}

/**
 * An append failed because the log could not write; nothing of it was kept
 * here. `handedOn`: a replicated log had handed the commit on before the
 * write failed (and stopped), so its rows may be held by followers and
 * committed by the next leader: its outcome is not known here, as when a
 * node stops leading ({@linkcode NotLeaderError}).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { LogWriteError } from "./errors.ts";
 * const err = new LogWriteError("append failed: disk full", new Error("ENOSPC"));
 * equal(err.name, "LogWriteError");
 * equal(err.handedOn, false);
 * ```
 */
export class LogWriteError extends Error {
  /** Whether the commit had been handed on before the write failed (its outcome unknown here). */
  readonly handedOn: boolean;

  /** Makes the error, keeping the cause. */
  constructor(message: string, cause: unknown, handedOn = false) {
    super(message, { cause });
    this.name = "LogWriteError";
    this.handedOn = handedOn;
  }
}

/**
 * A replicated log refused an append, or a wait for one to be committed:
 * this node does not lead the stream (any more). Nothing it refused was
 * acknowledged; rows it had written stay until the new leader's log decides
 * (they are kept if the leader has them, else cut). `leader` is where the
 * stream is led now, when known.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { NotLeaderError } from "./errors.ts";
 * const err = new NotLeaderError("trades", "http://10.0.0.2:8801");
 * equal(err.leader, "http://10.0.0.2:8801");
 * equal(err.name, "NotLeaderError");
 * ```
 */
export class NotLeaderError extends Error {
  /** The stream. */
  readonly stream: string;
  /** The leader's URL, or null when none is known. */
  readonly leader: string | null;
  /** Makes the error. */
  constructor(stream: string, leader: string | null) {
    super(
      `this node does not lead stream "${stream}"` +
        (leader ? `; ${leader} does` : "; no leader is known"),
    );
    this.name = "NotLeaderError";
    this.stream = stream;
    this.leader = leader;
  }
}
