/**
 * A publish socket's session (docs/SPEC.md §9.2), once the route
 * (`../http/publish_socket.ts`) accepted it: the greeting
 * `{"streamcast":2,…,"publish":true,"producer","last_seq","max_in_flight",
 * "max_in_flight_bytes"}` once the producer's pending commit, if any, has
 * settled.
 *
 * Then each text frame `{"seq":S,"rows":[…]}` is checked, stored in one
 * commit and answered — in the order the frames came — once durable:
 * `{"seq","first","last"}` (`"duplicate":true` for the producer's last seq),
 * or `{"seq","error":…}` (`invalid_row` with its 0-based `index`,
 * `stale_seq`, `write_failed`); nothing of a refused frame is stored and the
 * socket stays open. A frame of another shape closes it with 1008, a binary
 * frame too, one over `max_publish_bytes` with 1009. A cluster node that
 * stops leading answers the frames it has not acknowledged with nothing and
 * closes the socket with 1013 `no_leader` once the earlier answers are out:
 * the publisher reconnects (to the leader) and sends them again.
 *
 * Backpressure: at most `max_in_flight` frames, and `max_in_flight_bytes`
 * bytes of them (one frame always may), are stored and awaiting their ack;
 * and the server as a whole takes frames only while its publish budget
 * (`budget.ts`) has room. Frames beyond are held, unread, until acks
 * free room. Deno's WebSocket cannot stop reading its socket, so what is
 * held is bounded by the most a publisher keeping to both windows can have
 * sent unanswered (`max_in_flight` frames of at most `max_publish_bytes`,
 * and at most the larger of `max_in_flight_bytes` and one frame): more
 * closes the socket with 1008 `too_many_in_flight`.
 *
 * @module
 */

import { PROTOCOL_VERSION } from "../../wire/subscribe.ts";
import { CloseCode, encodeCloseReason } from "../../wire/close_reason.ts";
import type { PublishAnswer, PublishGreeting } from "../../wire/publish.ts";
import type { LogFields, Logger } from "../../common/logger.ts";
import { NotLeaderError } from "../../log/mod.ts";
import type { Stream } from "../stream/stream.ts";
import { OPEN, type SessionSocket, type SocketEnd, type SocketSession } from "../socket.ts";
import { commitPublish } from "./commit.ts";
import { wireAnswer } from "./answer.ts";
import type { PublishBudget } from "./budget.ts";
import type { PublishMetrics } from "./publish_metrics.ts";
import type { Filter } from "../../wire/filter.ts";
import { atExpiry } from "../access/expiry.ts";
import { firstOutside, OUTSIDE_GRANT_DETAIL } from "../access/row_grant.ts";
import { utf8Bytes } from "../../wire/utf8_bytes.ts";

/** What a publish socket's token says about it (none without access control). */
export interface PublishAccess {
  /** The filter every row must match (a row-level grant's); null: any row. */
  readonly rows: Filter | null;
  /** When its token expires (ms since the epoch): the socket closes then with 4401. Null: never. */
  readonly expiresAt: number | null;
}

/** What a publish session is given by the server: its logger, series, budget and windows. */
export interface PublishSessionContext {
  /** Where its events go. */
  readonly logger: Logger;
  /** The series of publishing. */
  readonly metrics: PublishMetrics;
  /** The bytes of publishing the server holds at once. */
  readonly budget: PublishBudget;
  /** Frames that may await their ack at once. */
  readonly maxInFlight: number;
  /** Bytes of frame text that may await their ack (one frame always may). */
  readonly maxInFlightBytes: number;
  /** The largest frame, bytes. */
  readonly maxBytes: number;
}

/**
 * What a frame holds once its shape is checked, or why it is not a frame.
 */
export type ParsedFrame = { ok: true; seq: number; rows: unknown[] } | {
  ok: false;
  detail: string;
};

/**
 * Checks a publish frame's shape: a JSON object with exactly `seq` (an
 * integer 1..2^53-1) and `rows` (a non-empty array).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { parsePublishFrame } from "./session.ts";
 * deepStrictEqual(parsePublishFrame('{"seq":1,"rows":[{}]}'), { ok: true, seq: 1, rows: [{}] });
 * deepStrictEqual(parsePublishFrame('{"seq":0,"rows":[{}]}'), {
 *   ok: false,
 *   detail: "seq must be an integer from 1 to 2^53-1",
 * });
 * ```
 */
export function parsePublishFrame(text: string): ParsedFrame {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { ok: false, detail: 'a frame must be JSON {"seq":S,"rows":[...]}' };
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    return { ok: false, detail: 'a frame must be an object {"seq":S,"rows":[...]}' };
  }
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== "seq" && k !== "rows") {
      return { ok: false, detail: `unknown member ${JSON.stringify(k.slice(0, 40))}` };
    }
  }
  if (typeof o.seq !== "number" || !Number.isSafeInteger(o.seq) || o.seq < 1) {
    return { ok: false, detail: "seq must be an integer from 1 to 2^53-1" };
  }
  if (!Array.isArray(o.rows) || o.rows.length === 0) {
    return { ok: false, detail: "rows must be a non-empty array" };
  }
  return { ok: true, seq: o.seq, rows: o.rows };
}

interface InFlight {
  seq: number;
  t0: number;
  /** The frame's size, taken from the window and the server's budget. */
  bytes: number;
  /** Its answer once decided; `unanswered`: none goes out (the node stopped leading). */
  answer: PublishAnswer | "unanswered" | null;
}

/**
 * One publish socket: frames in, answers out in the same order (see the
 * module doc). `key` is the producer's key (`producerKey`), `who` the fields
 * its events carry.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Logger } from "../../common/logger.ts";
 * import { Registry } from "../metrics.ts";
 * import { Stream } from "../stream/stream.ts";
 * import { PublishBudget } from "./budget.ts";
 * import { PublishMetrics } from "./publish_metrics.ts";
 * import { PublishSession } from "./session.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("t", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const budget = new PublishBudget(1 << 20);
 * const metrics = new PublishMetrics(new Registry(), [stream], budget);
 * const limits = { maxInFlight: 4, maxInFlightBytes: 1 << 16, maxBytes: 1 << 16 };
 * const ctx = { logger: Logger.silent(), metrics, budget, ...limits };
 * const sent: string[] = []; // a fake socket: what the session sends
 * const socket = {
 *   readyState: 1, bufferedAmount: 0, close() {},
 *   send: (d: string | Uint8Array) => void sent.push(String(d)),
 * };
 * const session = new PublishSession(ctx, socket, stream, "p", "p", {});
 * await session.open();
 * session.message('{"seq":1,"rows":[{"v":1},{"v":2}]}');
 * while (sent.length < 2) await new Promise((r) => setTimeout(r, 1));
 * deepStrictEqual(JSON.parse(sent[1]), { seq: 1, first: 1, last: 2 });
 * session.ended();
 * await stream.close();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export class PublishSession implements SocketSession {
  readonly #ctx: PublishSessionContext;
  readonly #socket: SessionSocket;
  readonly #stream: Stream;
  // The id the publisher sent, and the key its state is kept under.
  readonly #producer: string | null;
  readonly #key: string | null;
  readonly #who: LogFields;
  readonly #maxInFlight: number;
  readonly #maxInFlightBytes: number;
  readonly #maxBytes: number;
  // The most a publisher keeping to both windows can have sent unanswered.
  readonly #heldLimit: number;
  #ready = false;
  #ended = false;
  #held: { text: string; t0: number }[] = [];
  #heldBytes = 0;
  #inFlight: InFlight[] = [];
  #inFlightBytes = 0;
  // Waiting for the server's budget to free room (see #pump).
  #waitingForBudget = false;
  #closing: { code: number; error: string; detail: string } | null = null;
  readonly #rows: Filter | null;
  readonly #expiresAt: number | null;
  #cancelExpiry: (() => void) | null = null;

  /**
   * A session of `stream` over `socket`, publishing as `producer`; `access`:
   * what its token says (the filter its rows must match, when its token
   * expires).
   */
  constructor(
    ctx: PublishSessionContext,
    socket: SessionSocket,
    stream: Stream,
    producer: string | null,
    key: string | null,
    who: LogFields,
    access: PublishAccess = { rows: null, expiresAt: null },
  ) {
    this.#ctx = ctx;
    this.#rows = access.rows;
    this.#expiresAt = access.expiresAt;
    this.#socket = socket;
    this.#stream = stream;
    this.#producer = producer;
    this.#key = key;
    this.#who = who;
    this.#maxInFlight = ctx.maxInFlight;
    this.#maxInFlightBytes = ctx.maxInFlightBytes;
    this.#maxBytes = ctx.maxBytes;
    this.#heldLimit = Math.min(
      this.#maxInFlight * this.#maxBytes,
      Math.max(this.#maxInFlightBytes, this.#maxBytes),
    );
  }

  /** Greets the publisher once its producer's pending commit settled. */
  async open(): Promise<void> {
    if (this.#expiresAt !== null) {
      this.#cancelExpiry = atExpiry(this.#expiresAt, () => this.#expired());
    }
    const ctx = this.#ctx;
    const log = this.#stream.log!;
    // A seq still being committed decides what last_seq is: wait for it.
    if (this.#key !== null) {
      try {
        // On a cluster node, until the cluster committed it.
        await log.producers.settled(this.#key);
      } catch (err) {
        const detail = err instanceof Error ? err.message : String(err);
        // This node stopped leading first: the publisher goes to the leader.
        if (err instanceof NotLeaderError) {
          this.#closeNow(CloseCode.TryAgainLater, "no_leader", detail);
        } else this.#closeNow(CloseCode.InternalError, "write_failed", detail);
        return;
      }
    }
    if (this.#socket.readyState !== OPEN) return;
    const greeting: PublishGreeting = {
      streamcast: PROTOCOL_VERSION,
      stream: this.#stream.name,
      stream_id: log.streamId,
      publish: true,
      producer: this.#producer,
      last_seq: this.#key === null ? 0 : log.producers.state(this.#key)?.seq ?? 0,
      max_in_flight: this.#maxInFlight,
      max_in_flight_bytes: this.#maxInFlightBytes,
    };
    this.#socket.send(JSON.stringify(greeting));
    ctx.logger.info("publish_open", { ...this.#who, last_seq: greeting.last_seq });
    this.#ready = true;
    this.#pump();
  }

  // The token expired: the frames already taken are answered, the rest
  // refused, then the socket is closed with 4401 token_expired.
  #expired(): void {
    if (this.#ended || this.#closing !== null) return;
    this.#closing = { code: CloseCode.Unauthorized, error: "token_expired", detail: "" };
    this.#held = [];
    this.#heldBytes = 0;
    this.#flush();
  }

  // Refuses the rest of the input; the frames already taken are still
  // answered, then the socket is closed with `code`.
  // Counted as refused when decided, not once the answers have gone out.
  #close(code: number, error: string, detail: string): void {
    if (this.#ended || this.#closing !== null) return;
    this.#ctx.metrics.refused(
      this.#stream.name,
      error === "protocol" || error === "too_large" || error === "no_leader"
        ? error
        : "too_many_in_flight",
    );
    this.#closing = { code, error, detail };
    this.#held = [];
    this.#heldBytes = 0;
    this.#flush();
  }

  #closeNow(code: number, error: string, detail: string): void {
    if (this.#ended) return;
    this.#ctx.logger.info("dropped", { ...this.#who, code, error, detail });
    // token_expired: with the stream's end, which every frame acknowledged here is below.
    const reason = error === "token_expired"
      ? encodeCloseReason({ error, resume: this.#stream.log!.endOffset })
      : encodeCloseReason({ error, detail } as never);
    try {
      this.#socket.close(code, reason);
    } catch {
      // already closing
    }
    this.ended();
  }

  /** Takes a frame (`data`: its text; anything else closes the socket). */
  message(data: unknown): void {
    if (this.#ended || this.#closing !== null) return;
    const t0 = performance.now();
    if (typeof data !== "string") {
      this.#close(
        CloseCode.PolicyViolation,
        "protocol",
        "binary frames are not accepted: send JSON text",
      );
      return;
    }
    const text = data;
    if (
      text.length > this.#maxBytes ||
      (text.length * 3 > this.#maxBytes && utf8Bytes(text) > this.#maxBytes)
    ) {
      this.#close(CloseCode.MessageTooBig, "too_large", `a frame may hold ${this.#maxBytes} bytes`);
      return;
    }
    this.#held.push({ text, t0 });
    this.#heldBytes += text.length;
    this.#pump();
    if (this.#heldBytes > this.#heldLimit && !this.#ended) {
      this.#close(
        CloseCode.PolicyViolation,
        "too_many_in_flight",
        `more than max_in_flight (${this.#maxInFlight}) frames or max_in_flight_bytes ` +
          `(${this.#maxInFlightBytes}) sent without waiting for acks`,
      );
    }
  }

  // Takes held frames into the window while it has room, in frames and in
  // bytes, and the server's budget has room for them; else waits for either.
  #pump(): void {
    const budget = this.#ctx.budget;
    while (
      this.#ready && !this.#ended && this.#closing === null && this.#held.length > 0 &&
      this.#inFlight.length < this.#maxInFlight
    ) {
      const { text, t0 } = this.#held[0];
      const bytes = text.length;
      if (this.#inFlightBytes > 0 && this.#inFlightBytes + bytes > this.#maxInFlightBytes) break;
      if (!budget.tryTake(bytes)) {
        if (!this.#waitingForBudget) {
          this.#waitingForBudget = true;
          budget.whenFreed(() => {
            this.#waitingForBudget = false;
            this.#pump();
          });
        }
        break;
      }
      this.#held.shift();
      this.#heldBytes -= bytes;
      this.#handle(text, t0, bytes);
    }
  }

  #handle(text: string, t0: number, bytes: number): void {
    const budget = this.#ctx.budget;
    const f = parsePublishFrame(text);
    if (!f.ok) {
      budget.release(bytes);
      this.#close(CloseCode.PolicyViolation, "protocol", f.detail);
      return;
    }
    const entry: InFlight = { seq: f.seq, t0, bytes, answer: null };
    this.#inFlightBytes += bytes;
    this.#inFlight.push(entry);
    const stream = this.#stream;
    const m = this.#ctx.metrics;
    const tag = this.#key !== null ? { producer: this.#key, seq: f.seq } : null;
    const outside = this.#rows === null ? -1 : firstOutside(this.#rows, f.rows);
    if (outside !== -1) {
      // A row outside the publisher's row-level grant: nothing of the frame is stored.
      budget.release(bytes);
      m.refused(stream.name, "forbidden");
      entry.answer = {
        seq: f.seq,
        error: "forbidden",
        index: outside,
        detail: OUTSIDE_GRANT_DETAIL,
      };
      this.#flush();
      return;
    }
    void commitPublish(stream, f.rows, tag).then((out) => {
      budget.release(bytes); // committed or refused: what it held is freed
      const { answer, refusal } = wireAnswer(out, f.seq);
      entry.answer = answer ?? "unanswered";
      if (out.kind === "ack") {
        if (out.duplicate) m.duplicate(stream.name);
        else m.published(stream.name, "websocket", out.last - out.first + 1);
      } else if (out.kind === "not_leader") {
        // Not acknowledged: the publisher sends it again to the leader. The
        // flush below closes the socket once this was the last one waiting
        // (only the first refusal starts the closing, which flushes too).
        this.#close(CloseCode.TryAgainLater, "no_leader", out.detail);
      } else {
        m.refused(stream.name, refusal!);
        if (out.kind === "failed") {
          this.#ctx.logger.error("publish_failed", { ...this.#who, error: out.detail });
        }
      }
      this.#flush();
    });
  }

  // Sends the answers that are ready, in frame order.
  #flush(): void {
    const m = this.#ctx.metrics;
    while (this.#inFlight.length > 0 && this.#inFlight[0].answer !== null) {
      const e = this.#inFlight.shift()!;
      this.#inFlightBytes -= e.bytes;
      if (e.answer === "unanswered") continue;
      if (!this.#ended && this.#socket.readyState === OPEN) {
        this.#socket.send(JSON.stringify(e.answer));
        m.acked("websocket", e.t0);
      }
    }
    const c = this.#closing;
    if (c !== null && this.#inFlight.length === 0) this.#closeNow(c.code, c.error, c.detail);
    else this.#pump();
  }

  /** The socket ended: nothing more is answered. */
  ended(_end?: SocketEnd): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#cancelExpiry?.();
    this.#held = [];
    this.#heldBytes = 0;
    this.#ctx.logger.debug("publish_close", { ...this.#who });
  }
}
