/**
 * The server's limits, in one place: their defaults, and the gate that makes
 * catching-up subscribers take turns reading the log.
 *
 * | limit | default | where | past it |
 * |---|---|---|---|
 * | WebSocket connections open at once | 10,000 | `ServeOptions.maxConnections` | HTTP 503 before the upgrade |
 * | subscribers per stream | 5,000 | `StreamOptions.maxSubscribers` | close 1013, no greeting |
 * | request URL | 8 KiB | `ServeOptions.maxUrlBytes` | HTTP 414 |
 * | replay reads at once (per server) | 16 | `ServeOptions.maxReplayReaders` | the read waits its turn |
 * | bytes handed to sockets, not yet written (per server) | 64 MiB | `ServeOptions.sendBufferBytes` | a subscriber over its share falls behind (queue of shared frames, then the log) |
 * | bytes of live frames handed to sockets in one turn of the event loop (per server) | 8 MiB | `ServeOptions.fanoutTurnBytes` | the rest of the fan-out waits for the next turn (server/fanout/fanout_pacer.ts) |
 * | row (payload) size | 16 MiB | `LogOptions.maxPayloadBytes` | `send` rejects; ingest rejects the line |
 * | stream name | 64 characters | fixed (wire contract) | 4404 / refused at declaration |
 * | client data frame | any data frame closes | fixed | 1008 (runtime: 64 MiB, then dropped) |
 *
 * docs/CLI.md holds the full table with the flags and config keys.
 *
 * @module
 */

import { DEFAULT_MAX_PAYLOAD_BYTES } from "../log/log.ts";
import { setImmediate } from "node:timers";
import { CloseCode } from "../client/wire.ts";

/** Default `maxConnections`: WebSocket connections open at once on one server. */
export const DEFAULT_MAX_CONNECTIONS = 10_000;
/** Default `maxSubscribers`: subscribers of one stream at once. */
export const DEFAULT_MAX_SUBSCRIBERS = 5_000;
/** Default `maxUrlBytes`: the longest request URL accepted. */
export const DEFAULT_MAX_URL_BYTES = 8192;
/** Default `maxReplayReaders`: log reads for catching-up subscribers in flight at once. */
export const DEFAULT_MAX_REPLAY_READERS = 16;
/**
 * Default `sendBufferBytes`: bytes that all the subscribers' sockets of one
 * server may hold together, handed to `send` and not yet written to the
 * kernel. Deno's `send` copies each frame into its socket's own buffer, so
 * this (not the frames' sharing) bounds the native memory fan-out uses.
 */
export const DEFAULT_SEND_BUFFER_BYTES: number = 64 << 20;
/**
 * Default `fanoutTurnBytes`: bytes of live frames one server hands to its
 * sockets in one turn of the event loop; the rest of a fan-out waits for the
 * next turn, by when the runtime has written (and freed) most of those copies
 * (see server/fanout/fanout_pacer.ts). 0: no pacing (one synchronous pass).
 */
export const DEFAULT_FANOUT_TURN_BYTES: number = 8 << 20;
/** Smallest `sendBufferBytes` accepted. */
export const MIN_SEND_BUFFER_BYTES: number = 1 << 20;
/** The most one socket may hold of the send buffer (few subscribers each get this). */
export const MAX_SEND_SHARE_BYTES: number = 1 << 20;
/** The least one socket may hold (many subscribers each get at least this). */
export const MIN_SEND_SHARE_BYTES: number = 16 * 1024;

/** Default row size limit: the log's own default `maxPayloadBytes` (16 MiB). */
export const DEFAULT_MAX_ROW_BYTES: number = DEFAULT_MAX_PAYLOAD_BYTES;
/** Longest stream name (the wire contract's name pattern; not configurable). */
export const MAX_STREAM_NAME_CHARS = 64;
/**
 * The runtime's own cap on one incoming WebSocket message (Deno 2.9). A
 * bigger frame ends the connection without a close frame (the peer sees 1006);
 * a smaller one is refused by the server with 1008. Not configurable.
 */
export const RUNTIME_MAX_MESSAGE_BYTES: number = 64 << 20;
/** Status code of a refusal for a full stream: "try again later" (RFC 6455 §7.4.1 registry). */
export const TRY_AGAIN_LATER: 1013 = CloseCode.TryAgainLater;

/** Address a server listens on by default (the CLI's `--host`). */
export const DEFAULT_HOST = "127.0.0.1";
/** Port a server listens on by default (the CLI's `--port`). */
export const DEFAULT_PORT = 8765;

/**
 * A server's send buffer (`sendBufferBytes`), shared out equally between its
 * open subscriber sockets: each may hold {@linkcode SendBudget.share} bytes
 * handed to `send` and not yet written, between
 * {@linkcode MIN_SEND_SHARE_BYTES} and {@linkcode MAX_SEND_SHARE_BYTES}.
 * A subscriber over its share stops calling `send` and falls behind (see
 * server/fanout/subscriber.ts), so the copies Deno makes per socket stay within
 * about `sendBufferBytes` (plus one frame per socket).
 *
 * @example
 * ```ts
 * import { SendBudget } from "./limits.ts";
 * const budget = new SendBudget(64 << 20);
 * const sockets = Array.from({ length: 1000 }, () => ({ bufferedAmount: 10 }));
 * for (const s of sockets) budget.open(s);
 * console.log(budget.sockets, budget.share(), budget.buffered()); // 1000 67108 10000
 * budget.close(sockets[0]);
 * console.log(budget.sockets); // 999
 * ```
 */
export class SendBudget {
  /** Bytes all sockets may hold together. */
  readonly bytes: number;
  /** Bytes of live frames handed to the sockets in one turn of the event loop (0: unbounded). */
  readonly turnBytes: number;
  readonly #sockets = new Set<{ readonly bufferedAmount: number }>();
  #spent = 0;
  #armed = false;

  /**
   * A budget of `bytes` (an integer ≥ {@linkcode MIN_SEND_BUFFER_BYTES}),
   * handing out at most `turnBytes` (an integer ≥ 0; 0: unbounded) of live
   * frames per turn of the event loop.
   */
  constructor(
    bytes: number = DEFAULT_SEND_BUFFER_BYTES,
    turnBytes: number = DEFAULT_FANOUT_TURN_BYTES,
  ) {
    this.bytes = checkLimit("sendBufferBytes", bytes, MIN_SEND_BUFFER_BYTES);
    this.turnBytes = checkLimit("fanoutTurnBytes", turnBytes, 0);
  }

  /** Whether this turn's live fan-out allowance is used up (never, with `turnBytes` 0). */
  turnSpent(): boolean {
    return this.turnBytes > 0 && this.#spent >= this.turnBytes;
  }

  /** Counts `bytes` handed to sockets in this turn (the count restarts at the next turn). */
  charge(bytes: number): void {
    if (bytes <= 0 || this.turnBytes === 0) return;
    this.#spent += bytes;
    if (this.#armed) return;
    this.#armed = true;
    setImmediate(() => {
      this.#spent = 0;
      this.#armed = false;
    });
  }

  /** Sockets sharing the budget now. */
  get sockets(): number {
    return this.#sockets.size;
  }

  /** Counts `socket` in (once, however often it is opened). */
  open(socket: { readonly bufferedAmount: number }): void {
    this.#sockets.add(socket);
  }

  /** Counts `socket` out. */
  close(socket: { readonly bufferedAmount: number }): void {
    this.#sockets.delete(socket);
  }

  /** Bytes one socket may hold now. */
  share(): number {
    const share = Math.floor(this.bytes / Math.max(1, this.#sockets.size));
    return Math.max(MIN_SEND_SHARE_BYTES, Math.min(MAX_SEND_SHARE_BYTES, share));
  }

  /** Bytes the sockets hold now, handed to `send` and not yet written (their `bufferedAmount`s). */
  buffered(): number {
    let n = 0;
    for (const s of this.#sockets) n += s.bufferedAmount;
    return n;
  }
}

/**
 * Checks that `value` is an integer ≥ `min`; throws `RangeError` naming `what`.
 *
 * @example
 * ```ts
 * import { checkLimit } from "./limits.ts";
 * console.log(checkLimit("maxConnections", 100, 1)); // 100
 * ```
 */
export function checkLimit(what: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${what} must be an integer >= ${min}, got ${value}`);
  }
  return value;
}

/**
 * A counting semaphore that hands its permits out in arrival order: at most
 * `max` holders at once, the others wait their turn.
 *
 * @example
 * ```ts
 * import { Gate } from "./limits.ts";
 * const gate = new Gate(1);
 * await gate.acquire();
 * const second = gate.acquire(); // waits
 * console.log(gate.active, gate.waiting); // 1 1
 * gate.release(); // hands the permit to the waiter
 * await second;
 * gate.release();
 * console.log(gate.active); // 0
 * ```
 */
export class Gate {
  /** Permits in all. */
  readonly max: number;
  #active = 0;
  #waiters: (() => void)[] = [];
  #head = 0;

  /** A gate of `max` permits (an integer ≥ 1). */
  constructor(max: number) {
    this.max = checkLimit("Gate max", max, 1);
  }

  /** Permits held now. */
  get active(): number {
    return this.#active;
  }

  /** Callers waiting for a permit. */
  get waiting(): number {
    return this.#waiters.length - this.#head;
  }

  /** Resolves once the caller holds a permit; pair with {@linkcode Gate.release}. */
  acquire(): Promise<void> {
    if (this.#active < this.max && this.waiting === 0) {
      this.#active++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Gives a permit back: to the longest waiter if there is one. */
  release(): void {
    if (this.waiting > 0) {
      // The permit passes straight on: `active` stays as it is.
      const next = this.#waiters[this.#head++];
      if (this.#head > 1024 && this.#head * 2 > this.#waiters.length) {
        this.#waiters = this.#waiters.slice(this.#head);
        this.#head = 0;
      }
      next();
      return;
    }
    if (this.#active === 0) throw new RangeError("Gate released more often than acquired");
    this.#active--;
  }

  /** Runs `fn` holding a permit. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await fn();
    } finally {
      this.release();
    }
  }
}

/**
 * What a {@linkcode GatedReader} wraps: a log reader's shape.
 *
 * @example
 * ```ts
 * import type { GatedSource } from "./limits.ts";
 * const empty: GatedSource<number> = { offset: 1, read: () => Promise.resolve(0), close() {} };
 * console.log(empty.offset); // 1
 * ```
 */
export interface GatedSource<B> {
  /** The next offset the reader will return (or the first after it). */
  readonly offset: number;
  /** Reads about `maxBytes` of rows. */
  read(maxBytes: number): Promise<B>;
  /** Lets the reader go. */
  close(): void;
}

/**
 * A log reader whose reads each hold one of a {@linkcode Gate}'s permits
 * (how catching-up subscribers take turns reading the log).
 *
 * @example
 * ```ts
 * import { Gate, GatedReader } from "./limits.ts";
 * const gate = new Gate(1);
 * const inner = { offset: 1, read: () => Promise.resolve(gate.active), close: () => {} };
 * const reader = new GatedReader(inner, gate);
 * console.log(await reader.read(1024), gate.active); // 1 0
 * ```
 */
export class GatedReader<B> implements GatedSource<B> {
  readonly #reader: GatedSource<B>;
  readonly #gate: Gate;

  /** Wraps `reader`: each read waits for a permit of `gate`. */
  constructor(reader: GatedSource<B>, gate: Gate) {
    this.#reader = reader;
    this.#gate = gate;
  }

  /** The next offset the reader will return. */
  get offset(): number {
    return this.#reader.offset;
  }

  /** Reads through the gate. */
  read(maxBytes: number): Promise<B> {
    return this.#gate.run(() => this.#reader.read(maxBytes));
  }

  /** Closes the reader. */
  close(): void {
    this.#reader.close();
  }
}

/** Default largest `POST /{name}` body or publish frame (DESIGN §13): 16 MiB. */
export const DEFAULT_MAX_PUBLISH_BYTES = 16 << 20;
