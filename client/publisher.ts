/**
 * `publisher(url, {producer})`: put rows into a stream over its publish
 * socket (docs/SPEC.md §9) and learn, from each answer, that they are durable and
 * at which offsets. Frames are pipelined up to the server's `max_in_flight`
 * (and its `max_in_flight_bytes`); after a dropped connection the publisher
 * reconnects with backoff and sends again every frame not yet answered — the
 * server stores none twice. Runs in Deno and in browsers (no Deno API).
 *
 * Only an answer says what became of a frame. A frame sent again after its
 * answer was lost with the connection is answered by the server again: as
 * stored, or as a duplicate with its original offsets (the producer's last
 * seq) — both resolve its `send` with offsets — or, when the producer has
 * stored later seqs since, `stale_seq`: the server no longer knows that
 * frame's offsets, and its `send` rejects with an `answer_lost`
 * {@linkcode PublishError} naming it (it was stored unless the server
 * refused it as `invalid_row`; docs/SPEC.md §9.3). A frame that fails to be
 * stored (`write_failed`) makes the server refuse the producer's later
 * frames already sent; the ones not sent yet are refused here, and the
 * next publish takes the failed frame's seq again, so the producer's seqs
 * go on without a hole.
 *
 * A frame refused `disk_full` (the server's disk is full) does not reject:
 * the publisher holds every frame — those sent behind it come back refused
 * too, those published meanwhile queue — for a short backoff
 * ({@linkcode DISK_FULL_HOLD_MIN_MS} doubling to
 * {@linkcode DISK_FULL_HOLD_MAX_MS}), then sends the refused frame alone
 * again; once one is stored it sends the rest, in order, from there. So a
 * full disk costs the server a refusal per hold, not one per frame the
 * caller publishes, and no seq is skipped or sent twice. After
 * `diskFullTimeoutMs` of refusals the frame rejects with `disk_full`.
 *
 * Given several URLs (the nodes of a cluster, docs/SPEC.md §9.5), the
 * publisher finds the node that takes the publish itself: it follows a
 * node's 307 to the leader (at most `maxRedirects` hops), and on a 503
 * (`no_leader`, `not_enough_replicas`), a refused connection or a dropped
 * socket it tries the next URL, with backoff, for at most `retryTimeoutMs`;
 * what was not answered is sent again there, as after any reconnect.
 *
 * @module
 */

import { backoffDelay, sleep } from "../common/backoff.ts";
import type { WebSocketConstructor } from "./_connection.ts";
import { tokenNow, withToken } from "./_token.ts";
import { CloseCode } from "../wire/close_reason.ts";
import {
  DEFAULT_DISK_FULL_TIMEOUT_MS,
  DISK_FULL_HOLD_MAX_MS,
  DISK_FULL_HOLD_MIN_MS,
  type PublisherOptions,
} from "./publisher_options.ts";
import { PublishError } from "./publish_error.ts";
import { type NodeUrls, nodeUrls } from "./node_urls.ts";
import { askUpgrade, PublishRoute, redirectTarget, refusedStatus } from "./_publish_route.ts";
import { type PublishAnswer, type PublishGreeting, publishUrl } from "../wire/publish.ts";

export type { PublisherOptions } from "./publisher_options.ts";
export {
  DEFAULT_DISK_FULL_TIMEOUT_MS,
  DISK_FULL_HOLD_MAX_MS,
  DISK_FULL_HOLD_MIN_MS,
} from "./publisher_options.ts";
export { PublishError } from "./publish_error.ts";

/**
 * The offsets a publish got: `[first, last]`, as the server answered.
 */
export interface Published {
  /** The frame's seq. */
  seq: number;
  /** First offset. */
  first: number;
  /** Last offset. */
  last: number;
  /** Whether the server answered it as a duplicate of a frame it had stored. */
  duplicate: boolean;
}

interface Pending {
  seq: number;
  text: string;
  sent: boolean;
  /** Sent on a connection that ended before its answer came: that answer is lost. */
  lost: boolean;
  /** How many times the seqs had been taken back (`#failedAt`) when it was numbered. */
  epoch: number;
  resolve: (p: Published) => void;
  reject: (e: Error) => void;
}

function randomProducer(): string {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return "pub-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * A publisher on one stream. Made by {@linkcode publisher}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { publisher } from "./publisher.ts";
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("trades", {
 *   root,
 *   schema: { type: "object", properties: { price: { type: "number" } }, required: ["price"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {}, publish: ["trades"] });
 * const pub = await publisher(`${server.url}/trades`, { producer: "collector-1" });
 * equal(pub.producer, "collector-1");
 * equal(await pub.send({ price: 101.5 }), 1); // the row's offset, once it is durable
 * await pub.close();
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export class Publisher {
  /** The producer's name, or null. */
  readonly producer: string | null;
  readonly #route: PublishRoute;
  readonly #opts: PublisherOptions;
  readonly #baseWS: WebSocketConstructor;
  // The token of the latest connect (a token function is called before each).
  #token: string | undefined = undefined;
  #ws: WebSocket | null = null;
  #greeting: PublishGreeting | null = null;
  #nextSeq = 1;
  #queue: Pending[] = [];
  // Bumped each time a failure takes the seqs back, to the seq of that failure.
  #epoch = 0;
  #failedSeq = 0;
  #window = 64;
  // Bytes of frames (their text) that may await their answer (the greeting's).
  #windowBytes = Infinity;
  #closing = false;
  #failed: Error | null = null;
  #attempt = 0;
  #idle: (() => void)[] = [];
  // Why the last connection attempt failed or the last connection ended, for errors.
  #lastProblem = "";
  #failedAttempts = 0;
  #sleep: { timer: ReturnType<typeof setTimeout>; wake: () => void } | null = null;
  // The stream the first connection served: every node must serve the same.
  #streamId: string | null = null;
  // A disk_full refusal being waited out: when the first came, the seq
  // refused, how many in a row, and the hold before the next try (null: over).
  #full: { since: number; seq: number; refusals: number } | null = null;
  #hold: ReturnType<typeof setTimeout> | null = null;

  /** Use {@linkcode publisher}. */
  constructor(urls: NodeUrls, options: PublisherOptions) {
    this.producer = options.producer === undefined ? randomProducer() : options.producer;
    const producer = this.producer;
    this.#route = new PublishRoute(
      nodeUrls(urls, "publisher").map((u) => publishUrl(u, producer)),
    );
    this.#opts = options;
    const WS = options.WebSocket ?? (globalThis.WebSocket as unknown as WebSocketConstructor);
    this.#baseWS = WS;
  }

  /** The publish socket URL of the node connected to, or tried first. */
  get url(): string {
    return this.#route.current;
  }

  /** The greeting of the current connection. */
  get greeting(): PublishGreeting | null {
    return this.#greeting;
  }

  /** The seq the next frame gets. */
  get nextSeq(): number {
    return this.#nextSeq;
  }

  /** Frames sent or queued and not answered yet. */
  get pending(): number {
    return this.#queue.length;
  }

  /** @internal Opens the first connection; rejects when it cannot. */
  async _start(): Promise<void> {
    const started = Date.now();
    for (let attempt = 1;; attempt++) {
      const g = await this.#pass();
      if (g !== null) {
        this.#nextSeq = g.last_seq + 1;
        return;
      }
      const limit = this.#opts.retryTimeoutMs ?? 60_000;
      if (!this.#route.waiting || Date.now() - started >= limit) {
        throw new PublishError("closed", this.#route.summary());
      }
      const { minMs = 100, maxMs = 5000 } = this.#opts.backoff ?? {};
      await sleep(backoffDelay(attempt, minMs, maxMs));
    }
  }

  // One pass over the nodes, from the one tried first, following redirects:
  // the greeting of the first that takes the publish, or null (what each
  // answered is in the route). Rejects when going on is pointless.
  async #pass(): Promise<PublishGreeting | null> {
    const maxHops = this.#opts.maxRedirects ?? 5;
    const waitMs = this.#opts.connectTimeoutMs ?? 10_000;
    for (const first of this.#route.order()) {
      let url = first;
      const chain = [url];
      while (true) {
        try {
          const g = await this.#connect(url);
          this.#route.took(url);
          return g;
        } catch (err) {
          const e = err as PublishError;
          if (e.error === "protocol" || e.error === "other_stream") throw e;
          const status = refusedStatus(e.message);
          const a = status === null ? null : await askUpgrade(url, this.#token, waitMs);
          if (a === null || typeof a === "string") {
            this.#route.answered(url, this.#lastProblem);
            break;
          }
          if (a.status === 503) this.#route.waiting = true;
          if (a.status < 300 || a.status > 399 || a.location === null) {
            this.#route.answered(url, a.said);
            break;
          }
          this.#route.waiting = true;
          const to = redirectTarget(a.location, url);
          if (typeof to !== "string") {
            this.#route.answered(url, `${a.status} with a bad Location: ${to.bad}`);
            break;
          }
          if (chain.length > maxHops || chain.includes(to)) {
            const why = chain.includes(to) ? "a redirect loop" : `more than ${maxHops} redirects`;
            this.#route.answered(first, `${why}: ${[...chain, to].join(" → ")}`);
            break;
          }
          chain.push(to);
          url = to;
        }
      }
    }
    return null;
  }

  // One connection, on a token fresh from the token function (if one was given).
  async #connect(url: string): Promise<PublishGreeting> {
    let token: string | undefined;
    try {
      token = this.#token = await tokenNow(this.#opts.token, "publisher");
    } catch (err) {
      throw new PublishError("protocol", `the token function failed: ${err}`);
    }
    return this.#open(url, token === undefined ? this.#baseWS : withToken(this.#baseWS, token));
  }

  // One connection, resolved with its greeting (rejected if it closes first).
  #open(url: string, WS: WebSocketConstructor): Promise<PublishGreeting> {
    return new Promise((resolve, reject) => {
      let ws: WebSocket;
      try {
        ws = new WS(url);
      } catch (err) {
        this.#lastProblem = `cannot open it: ${err}`;
        reject(new PublishError("closed", `cannot open ${url}: ${err}`));
        return;
      }
      this.#ws = ws;
      let greeted = false;
      let error = "";
      const waitMs = this.#opts.connectTimeoutMs ?? 10_000;
      const timer = setTimeout(() => {
        error = `no greeting within ${waitMs} ms`;
        this.#lastProblem = error;
        reject(new PublishError("closed", `cannot connect to ${url}: ${error}`));
        try {
          ws.close();
        } catch {
          // already closing
        }
      }, waitMs);
      ws.onerror = (e) => {
        error = (e as ErrorEvent).message ?? "error";
      };
      ws.onmessage = (e) => {
        if (typeof e.data !== "string") return;
        if (!greeted) {
          greeted = true;
          clearTimeout(timer);
          const g = JSON.parse(e.data) as PublishGreeting;
          if (this.#streamId !== null && g.stream_id !== this.#streamId) {
            // Another stream: its producer state is not this one's, so nothing goes there.
            ws.onclose = () => {
              if (this.#ws === ws) this.#ws = null;
            };
            ws.close(1000);
            reject(
              new PublishError(
                "other_stream",
                `${url} serves stream_id ${g.stream_id}, not ${this.#streamId}, the stream this ` +
                  `publisher began on; nothing is sent there`,
              ),
            );
            return;
          }
          this.#streamId = g.stream_id;
          this.#greeting = g;
          this.#window = Math.max(1, Math.min(this.#opts.maxInFlight ?? 64, g.max_in_flight));
          this.#windowBytes = g.max_in_flight_bytes ?? Infinity;
          this.#attempt = 0;
          resolve(g);
          return;
        }
        this.#answer(JSON.parse(e.data) as PublishAnswer);
      };
      ws.onclose = (e) => {
        if (this.#ws === ws) this.#ws = null;
        // Nothing is sent again before the next connection's greeting.
        this.#greeting = null;
        for (const p of [...this.#queue]) {
          if (p.epoch !== this.#epoch) {
            // Sent after a frame that failed, before the seqs were taken back: refused by
            // the server (or never read). Sent again to a node that does not know of that
            // failure, it would be stored ahead of the seq that failed: it fails here.
            this.#queue.splice(this.#queue.indexOf(p), 1);
            p.reject(
              new PublishError(
                "write_failed",
                `not stored: sent after seq ${this.#failedSeq}, which failed to be stored`,
                { seq: p.seq },
              ),
            );
            continue;
          }
          if (p.sent) p.lost = true;
          p.sent = false;
        }
        if (!greeted) {
          clearTimeout(timer);
          const why = e.reason || error || `closed with ${e.code}`;
          this.#lastProblem = why;
          reject(
            new PublishError(
              e.code === 4400 ? "protocol" : "closed",
              `cannot connect to ${url}: ${why}`,
            ),
          );
          return;
        }
        this.#lastProblem = `the connection dropped (${e.reason || `closed with ${e.code}`})`;
        this.#failedAttempts = 0;
        this.#dropped(e.code, e.reason);
      };
    });
  }

  #answer(a: PublishAnswer): void {
    const i = this.#queue.findIndex((p) => p.seq === a.seq && p.sent);
    if (i === -1) return; // an answer to a frame already settled across a reconnect
    const p = this.#queue[i];
    if (this.#heldBack(p, a)) {
      this.#pump();
      return;
    }
    if (!("error" in a) && this.#full !== null) {
      // Stored: the disk has room again, and the window opens.
      this.#full = null;
    }
    this.#queue.splice(i, 1);
    if ("error" in a && a.error === "stale_seq" && p.lost) {
      p.reject(
        new PublishError(
          "answer_lost",
          `its answer was lost with the connection, and the producer has stored seq ` +
            `${a.last_seq} since: the server no longer knows this frame's offsets — it was ` +
            `stored unless the server refused it (invalid_row)`,
          { seq: a.seq, lastSeq: a.last_seq },
        ),
      );
    } else if ("error" in a) {
      const detail = a.error === "invalid_row" || a.error === "forbidden"
        ? `row ${a.index}: ${a.detail}`
        : a.error === "stale_seq"
        ? `the producer's last seq is ${a.last_seq}`
        : a.detail;
      p.reject(
        new PublishError(a.error, detail, {
          seq: a.seq,
          ...(a.error === "invalid_row" || a.error === "forbidden" ? { index: a.index } : {}),
          ...(a.error === "stale_seq" ? { lastSeq: a.last_seq } : {}),
        }),
      );
      if (a.error === "write_failed" || a.error === "disk_full") this.#failedAt(p, a.detail);
    } else {
      p.resolve({ seq: a.seq, first: a.first, last: a.last, duplicate: a.duplicate === true });
    }
    this.#pump();
    this.#checkIdle();
  }

  // Whether `p`'s refusal is a full disk's, to be waited out and sent again:
  // `disk_full` itself (within diskFullTimeoutMs of the first), or the
  // `write_failed` the server answers to frames pipelined behind the refused
  // one. Such a frame stays queued, not sent, and the hold begins (or grows).
  #heldBack(p: Pending, a: PublishAnswer): boolean {
    if (!("error" in a) || p.epoch !== this.#epoch) return false;
    const full = this.#full;
    if (a.error === "write_failed") {
      if (full === null || p.seq <= full.seq) return false;
      p.sent = false;
      return true;
    }
    if (a.error !== "disk_full") return false;
    if (full !== null && p.seq > full.seq) {
      // Sent behind the refused frame, refused with it: no new hold.
      p.sent = false;
      return true;
    }
    const now = Date.now();
    const limit = this.#opts.diskFullTimeoutMs ?? DEFAULT_DISK_FULL_TIMEOUT_MS;
    if (limit <= 0 || (full !== null && now - full.since >= limit)) {
      this.#full = null;
      return false;
    }
    this.#full = {
      since: full?.since ?? now,
      seq: p.seq,
      refusals: (full?.refusals ?? 0) + 1,
    };
    p.sent = false;
    clearTimeout(this.#hold ?? undefined);
    this.#hold = setTimeout(() => {
      this.#hold = null;
      this.#pump();
    }, backoffDelay(this.#full.refusals, DISK_FULL_HOLD_MIN_MS, DISK_FULL_HOLD_MAX_MS));
    return true;
  }

  // Frame `failed` failed to be stored: the server refuses the producer's
  // later frames until it sends its seq (or one below) again. Those not sent
  // yet are refused here; the next publish takes that seq again. The frames
  // numbered before an earlier failure took the seqs back are the server's
  // refusals of that failure, answered after the frames sent since (which
  // the server may store): they take nothing back, or the next publish would
  // reuse the seq of a frame sent since.
  #failedAt(failed: Pending, detail: string): void {
    if (failed.epoch !== this.#epoch) return;
    this.#epoch++;
    const seq = failed.seq;
    this.#failedSeq = seq;
    for (const p of [...this.#queue]) {
      if (p.sent || p.seq <= seq) continue;
      this.#queue.splice(this.#queue.indexOf(p), 1);
      p.reject(
        new PublishError(
          "write_failed",
          `not sent: seq ${seq} before it failed to be stored (${detail})`,
          { seq: p.seq },
        ),
      );
    }
    this.#nextSeq = Math.min(this.#nextSeq, seq);
  }

  // A connection that ended after its greeting: reconnect and resend, or fail.
  #dropped(code: number, reason: string): void {
    if (this.#closing && this.#queue.length === 0) return;
    const fatal = code === 1008 || code === 1009 || code === 4400;
    // The token expired (4401 token_expired): a token function gives a fresh
    // one on the reconnect; a fixed token cannot be renewed.
    if (code === CloseCode.Unauthorized && typeof this.#opts.token !== "function") {
      this.#fail(new PublishError("token_expired", reason || `closed with ${code}`));
      return;
    }
    // A token function renews an expired token: reconnect, with or without `reconnect`.
    const renew = code === CloseCode.Unauthorized;
    if (fatal || (this.#opts.reconnect === false && !renew)) {
      this.#fail(new PublishError(fatal ? "protocol" : "closed", reason || `closed with ${code}`));
      return;
    }
    void this.#reconnect();
  }

  async #reconnect(): Promise<void> {
    const min = this.#opts.backoff?.minMs ?? 100;
    const max = this.#opts.backoff?.maxMs ?? 5000;
    const limit = this.#opts.retryTimeoutMs ?? 60_000;
    const started = Date.now();
    while (!this.#failed) {
      await new Promise<void>((wake) => {
        const timer = setTimeout(() => {
          this.#sleep = null;
          wake();
        }, backoffDelay(this.#attempt++, min, max));
        this.#sleep = { timer, wake };
      });
      if (this.#failed) return;
      let g: PublishGreeting | null;
      try {
        g = await this.#pass();
      } catch (err) {
        return this.#fail(err as Error);
      }
      if (g === null) {
        this.#failedAttempts++;
        if (Date.now() - started >= limit) {
          return this.#fail(
            new PublishError(
              "closed",
              `no node took the publish within ${limit} ms (retryTimeoutMs): ` +
                this.#route.summary(),
            ),
          );
        }
        continue;
      }
      if (this.#failed) {
        // closed or failed while this attempt was connecting
        this.#ws?.close(1000);
        return;
      }
      // Every frame not answered is sent again, and only its answer decides.
      this.#opts.onReconnect?.(g.last_seq);
      this.#pump();
      this.#checkIdle();
      return;
    }
  }

  #fail(err: Error): void {
    if (this.#failed) return;
    this.#failed = err;
    clearTimeout(this.#hold ?? undefined);
    this.#hold = null;
    this.#wake();
    for (const p of this.#queue.splice(0)) p.reject(err);
    this.#checkIdle();
    try {
      this.#ws?.close();
    } catch {
      // already closing
    }
  }

  // Sends queued frames while the window has room, in frames and in bytes
  // (one frame always goes when none awaits its answer). While a full disk
  // is waited out: nothing during the hold, then the first frame alone, once
  // every frame sent before has its answer.
  #pump(): void {
    const ws = this.#ws;
    if (!ws || ws.readyState !== WebSocket.OPEN || this.#greeting === null) return;
    if (this.#full !== null) {
      if (this.#hold !== null || this.#queue.some((p) => p.sent)) return;
      const first = this.#queue[0];
      if (first === undefined) return;
      ws.send(first.text);
      first.sent = true;
      return;
    }
    let inFlight = 0;
    let bytes = 0;
    for (const p of this.#queue) {
      if (p.sent) {
        inFlight++;
        bytes += p.text.length;
        continue;
      }
      if (inFlight >= this.#window) break;
      if (inFlight > 0 && bytes + p.text.length > this.#windowBytes) break;
      ws.send(p.text);
      p.sent = true;
      inFlight++;
      bytes += p.text.length;
    }
  }

  /**
   * Publishes `rows` as one frame (one commit); resolves once they are
   * durable with their offsets. Rejects with {@linkcode PublishError} when
   * the server refuses the frame (nothing of it is stored), or with an
   * `answer_lost` one when its answer was lost and the server can no longer
   * tell (see the module doc). `seq` chooses
   * the frame's seq (at least {@linkcode Publisher.nextSeq}; later frames
   * continue above it), e.g. to number frames by their place in an input
   * so that a rerun can skip what the producer's `last_seq` says is stored.
   */
  publish(rows: readonly unknown[], seq: number = this.#nextSeq): Promise<Published> {
    if (this.#failed) return Promise.reject(this.#failed);
    if (this.#closing) return Promise.reject(new PublishError("closed", "the publisher is closed"));
    if (!Array.isArray(rows) || rows.length === 0) {
      return Promise.reject(new TypeError("publish wants a non-empty array of rows"));
    }
    if (!Number.isSafeInteger(seq) || seq < this.#nextSeq) {
      return Promise.reject(
        new RangeError(`seq must be an integer ≥ ${this.#nextSeq}, got ${seq}`),
      );
    }
    this.#nextSeq = seq + 1;
    const text = JSON.stringify({ seq, rows });
    return new Promise((resolve, reject) => {
      this.#queue.push({
        seq,
        text,
        sent: false,
        lost: false,
        epoch: this.#epoch,
        resolve,
        reject,
      });
      this.#pump();
    });
  }

  /** Publishes one row; resolves with its offset once durable. */
  async send(row: unknown): Promise<number> {
    return (await this.publish([row])).first;
  }

  /** Publishes rows in one commit; resolves with their offsets once durable. */
  async sendMany(rows: readonly unknown[]): Promise<number[]> {
    const p = await this.publish(rows);
    return rows.map((_, i) => p.first + i);
  }

  // Ends a reconnect loop's backoff sleep now (the loop sees #failed and stops).
  #wake(): void {
    const s = this.#sleep;
    if (s === null) return;
    this.#sleep = null;
    clearTimeout(s.timer);
    s.wake();
  }

  // What keeps the outstanding frames unanswered, for close()'s error.
  #why(): string {
    if (this.#ws?.readyState === WebSocket.OPEN && this.#greeting !== null) {
      return `the server at ${this.url} did not answer them`;
    }
    const tries = this.#failedAttempts > 0
      ? `; ${this.#failedAttempts} reconnect attempt(s) failed, the last: ${this.#lastProblem}`
      : this.#lastProblem
      ? ` (${this.#lastProblem})`
      : "";
    return `the connection to ${this.url} is down${tries}`;
  }

  #checkIdle(): void {
    if (this.#queue.length > 0) return;
    for (const f of this.#idle.splice(0)) f();
  }

  /** Resolves once every frame published so far is answered (or failed). */
  async flush(): Promise<void> {
    if (this.#queue.length === 0) return;
    await new Promise<void>((r) => this.#idle.push(r));
  }

  /**
   * Waits for every answer, then closes the socket. The wait is bounded by
   * `closeTimeoutMs`: frames still unanswered then (the server down or not
   * answering) reject with a `closed` {@linkcode PublishError} naming why and
   * how many; they may or may not be stored — publish them again with the
   * same producer and seqs to be sure, as the server skips duplicates.
   * Always resolves.
   */
  async close(): Promise<void> {
    this.#closing = true;
    const ms = this.#opts.closeTimeoutMs ?? 10_000;
    if (this.#queue.length > 0) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const answered = await Promise.race([
        this.flush().then(() => true),
        new Promise<boolean>((r) => timer = setTimeout(() => r(false), ms)),
      ]);
      clearTimeout(timer);
      if (!answered && this.#queue.length > 0) {
        const seqs = this.#queue.map((p) => p.seq);
        const n = seqs.length;
        this.#fail(
          new PublishError(
            "closed",
            `close() gave up after ${ms} ms with ${n} frame(s) unanswered (seq ${seqs[0]}` +
              `${n > 1 ? `–${seqs[n - 1]}` : ""}; they may or may not be stored): ${this.#why()}`,
          ),
        );
      }
    }
    this.#failed ??= new PublishError("closed", "the publisher is closed");
    this.#wake();
    const ws = this.#ws;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      // A server that vanished never completes the close handshake: do not wait past the bound.
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((r) => {
        ws.addEventListener("close", () => r());
        timer = setTimeout(r, Math.min(ms, 2000));
        ws.close(1000);
      });
      clearTimeout(timer);
    }
  }
}

/**
 * Opens a publisher on the stream at `urls` (its `ws://` or `http://` URL,
 * as for subscribing; or the stream's URLs on several nodes, as an array or
 * separated by commas — see the module doc); resolves once a server's
 * greeting arrived.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { publisher } from "./publisher.ts";
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("trades", {
 *   root,
 *   schema: { type: "object", properties: { price: { type: "number" } }, required: ["price"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {}, publish: ["trades"] });
 * const pub = await publisher(`${server.url}/trades`, { producer: "collector-1" });
 * deepStrictEqual(await pub.sendMany([{ price: 1 }, { price: 2 }]), [1, 2]);
 * await pub.close();
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export async function publisher(
  urls: NodeUrls,
  options: PublisherOptions = {},
): Promise<Publisher> {
  const p = new Publisher(urls, options);
  await p._start();
  return p;
}
