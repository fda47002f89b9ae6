/**
 * Paced fan-out: a stream's live commits handed to its subscribers a bounded
 * number of bytes of socket copies per turn of the event loop, not in one
 * synchronous pass.
 *
 * Why: Deno's `WebSocket.send` copies the frame into that socket's own
 * buffer and writes it to the kernel only once JavaScript yields, so one
 * flat-out commit of ~175 KB fanned out to 1000 sockets in one pass holds
 * ~175 MB of copies at once, and the process keeps that peak. Paced, a
 * server hands its sockets at most `fanoutTurnBytes` (see
 * {@linkcode SendBudget.turnBytes}) in one turn, then yields
 * (`setImmediate`); the runtime writes those copies to the kernel and frees
 * them before the next group gets theirs. What fan-out holds at its peak is
 * then about the stalled sockets' shares of the send buffer plus one turn's
 * copies, not one frame per socket.
 *
 * Invariants:
 * - every subscriber gets its commits in commit order: while a commit's
 *   fan-out waits, later commits (and their filter groups) wait behind it;
 * - a commit goes to the subscribers that were live when it was committed
 *   (a snapshot), and a subscriber skips a commit it already has (it went
 *   back to the log and caught up past it meanwhile: see `Subscriber.push`);
 * - the next commit of a durable stream is written only once the previous
 *   one is handed out ({@linkcode FanoutPacer.idle}, the log's
 *   `beforeCommit`), so a publisher cannot outrun the fan-out: as with one
 *   synchronous pass, commits grow instead;
 * - the rows waiting in the pacer are bounded ({@linkcode MAX_PACED_ROWS};
 *   an ephemeral stream has no commit to hold back): past that the waiting
 *   fan-outs are handed out at once, as without pacing.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import type { SendBudget } from "./send_budget.ts";
import type { SharedFrames } from "../frames/shared_frames.ts";

/** What the pacer hands commits to (a live `Subscriber`). */
export interface FanoutMember {
  /** The send buffer its socket shares (and whose turn allowance it uses). */
  readonly sendBudget: SendBudget;
  /**
   * Hands it a commit's frames (see `Subscriber.push`); returns what it
   * handed its socket's `send` now (a text's length, a binary frame's bytes).
   */
  push(frames: readonly string[], end: number | null, shared: SharedFrames): number;
}

/** Most rows of commits waiting in one pacer before they are handed out without pacing. */
export const MAX_PACED_ROWS = 65_536;

interface Job<S> {
  readonly subs: S[];
  at: number;
  readonly frames: readonly string[];
  readonly end: number | null;
  readonly shared: SharedFrames;
}

/**
 * One stream's paced fan-out (see the module doc).
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { FanoutPacer } from "./fanout_pacer.ts";
 * import { SendBudget } from "./send_budget.ts";
 * const budget = new SendBudget(1 << 20, 100);
 * const got: string[] = [];
 * const sub = (name: string) => ({
 *   sendBudget: budget,
 *   push(frames: readonly string[]) {
 *     got.push(`${name}:${frames.join(",")}`);
 *     return 80; // what it handed its socket
 *   },
 * });
 * const shared = { joined: () => "", arrow: () => new Uint8Array(0) };
 * const pacer = new FanoutPacer();
 * pacer.fanOut([sub("a"), sub("b"), sub("c")], ["r1"], 2, shared);
 * deepStrictEqual(got, ["a:r1", "b:r1"]); // 160 bytes: the turn's 100 are spent
 * equal(pacer.waiting, 1);
 * await pacer.idle();
 * deepStrictEqual(got, ["a:r1", "b:r1", "c:r1"]);
 * ```
 */
export class FanoutPacer<S extends FanoutMember = FanoutMember> {
  #jobs: (Job<S> | undefined)[] = [];
  #head = 0;
  #rows = 0;
  #scheduled = false;
  #idle: Promise<void> | null = null;
  #resolveIdle: (() => void) | null = null;

  /** Commit fan-outs waiting for a later turn. */
  get waiting(): number {
    return this.#jobs.length - this.#head;
  }

  /**
   * Hands `frames` (a commit's, ending before `end`) to every subscriber of
   * `subs` now, as far as their servers' turn allowances go; the rest wait
   * for the next turns, in order.
   */
  fanOut(
    subs: Iterable<S>,
    frames: readonly string[],
    end: number | null,
    shared: SharedFrames,
  ): void {
    let rest: S[] | null = null;
    if (this.#head === this.#jobs.length) {
      for (const sub of subs) {
        if (rest !== null) rest.push(sub);
        else if (sub.sendBudget.turnSpent()) rest = [sub];
        else deliver(sub, frames, end, shared);
      }
      if (rest === null) return;
    } else rest = [...subs];
    if (rest.length === 0) return;
    this.#jobs.push({ subs: rest, at: 0, frames, end, shared });
    this.#rows += frames.length;
    if (this.#rows > MAX_PACED_ROWS) this.#run(true);
    else this.#schedule();
  }

  /**
   * Null when nothing waits; else a promise that resolves once every waiting
   * fan-out is handed out (a durable stream's next commit waits for it).
   */
  idle(): Promise<void> | null {
    if (this.#head === this.#jobs.length) return null;
    return this.#idle ??= new Promise((resolve) => (this.#resolveIdle = resolve));
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#run(false);
    });
  }

  // Hands out waiting fan-outs in order while the turn allows (`force`: all
  // of them); at least one subscriber per run, so a pacer always progresses.
  #run(force: boolean): void {
    const jobs = this.#jobs;
    let handed = 0;
    while (this.#head < jobs.length) {
      const job = jobs[this.#head]!;
      while (job.at < job.subs.length) {
        const sub = job.subs[job.at];
        if (!force && handed > 0 && sub.sendBudget.turnSpent()) {
          this.#schedule();
          return;
        }
        job.at++;
        handed++;
        deliver(sub, job.frames, job.end, job.shared);
      }
      jobs[this.#head++] = undefined;
      this.#rows -= job.frames.length;
    }
    this.#jobs = [];
    this.#head = 0;
    this.#rows = 0;
    const resolve = this.#resolveIdle;
    this.#idle = this.#resolveIdle = null;
    resolve?.();
  }
}

// One subscriber's push, what it handed its socket counted against its
// server's turn (as the push reports it: reading the socket's
// `bufferedAmount` before and after costs two calls into the runtime a
// subscriber a commit, as many as the sends themselves).
function deliver<S extends FanoutMember>(
  sub: S,
  frames: readonly string[],
  end: number | null,
  shared: SharedFrames,
): void {
  sub.sendBudget.charge(sub.push(frames, end, shared));
}
