/**
 * The publish socket, `/{name}/publish?producer=ID` (`/_/publish` for the
 * unnamed stream; docs/SPEC.md §9.2). With tokens the producer id is scoped
 * to the token's holder (docs/SPEC.md §9.3). Before the upgrade: the connection limit
 * (503) and the publish grant (403), checked by the handler, then the stream
 * (404) and whether it is opened for publishing (405). After it: the query (4400), then the greeting
 * `{"streamcast":2,…,"publish":true,"producer","last_seq","max_in_flight",
 * "max_in_flight_bytes"}`
 * once the producer's pending commit, if any, has settled.
 *
 * Then each text frame `{"seq":S,"rows":[…]}` is checked, stored in one
 * commit and answered — in the order the frames came — once durable:
 * `{"seq","first","last"}` (`"duplicate":true` for the producer's last seq),
 * or `{"seq","error":…}` (`invalid_row` with its 0-based `index`,
 * `stale_seq`, `write_failed`); nothing of a refused frame is stored and the
 * socket stays open. A frame of another shape closes it with 1008, a binary
 * frame too, one over `max_publish_bytes` with 1009. On a cluster node, the
 * upgrade is answered 307 (to the leader) or 503 (`no_leader`,
 * `not_enough_replicas`) as a `POST` is; a node that stops leading answers
 * the frames it has not acknowledged with nothing and closes the socket with
 * 1013 `no_leader` once the earlier answers are out: the publisher
 * reconnects (to the leader) and sends them again.
 *
 * Backpressure: at most `max_in_flight` frames, and `max_in_flight_bytes`
 * bytes of them (one frame always may), are stored and awaiting their ack;
 * and the server as a whole takes frames only while its publish budget
 * (`publish/budget.ts`) has room. Frames beyond are held, unread, until acks
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
import {
  PRODUCER_PATTERN,
  PRODUCER_RULE,
  PUBLISH_PARAMS,
  type PublishAnswer,
  type PublishGreeting,
} from "../../wire/publish.ts";
import type { LogFields } from "../../common/logger.ts";
import { NotLeaderError } from "../../log/mod.ts";
import { producerKey } from "../../log/producer/table.ts";
import type { Stream } from "../stream/stream.ts";
import { commitPublish } from "../publish/commit.ts";
import type { HttpContext } from "./context.ts";
import type { RouteRequest } from "./router.ts";
import { acceptSocket, refuseSocket, type SocketSession } from "./upgrade.ts";
import { streamField } from "./_respond.ts";
import { publishTarget } from "./_publish_target.ts";

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
 * import { parsePublishFrame } from "./publish_socket.ts";
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
 * Answers a publish upgrade for the stream the path names.
 */
export function publishSocketRoute(ctx: HttpContext, r: RouteRequest): Response {
  const { req, url, grant, remote } = r;
  const name = r.params.name;
  const stream = publishTarget(ctx, name, url);
  if (stream instanceof Response) return stream;
  let problem: string | null = null;
  for (const k of new Set(url.searchParams.keys())) {
    if (!PUBLISH_PARAMS.includes(k)) problem = `unknown parameter ${k.slice(0, 40)}`;
    else if (url.searchParams.getAll(k).length > 1) problem = `repeated parameter ${k}`;
  }
  const producer = url.searchParams.get("producer");
  if (problem === null && producer !== null && !PRODUCER_PATTERN.test(producer)) {
    problem = `producer must be ${PRODUCER_RULE}`;
  }
  const who: LogFields = {
    stream: streamField(name),
    remote,
    ...(producer !== null ? { producer } : {}),
    ...(grant ? { token_name: grant.name } : {}),
  };
  if (problem !== null) {
    ctx.publishMetrics.refused(name, "protocol");
    const reason = encodeCloseReason({ error: "protocol", detail: problem });
    return refuseSocket(ctx, req, CloseCode.Protocol, reason, who);
  }
  // With tokens a producer id is the holder's own (log/producer/table.ts).
  const key = producer === null ? null : producerKey(grant?.name ?? null, producer);
  return acceptSocket(
    ctx,
    req,
    (socket) => new PublishSession(ctx, socket, stream, producer, key, who),
  );
}

// One publish socket: frames in, answers out in the same order.
class PublishSession implements SocketSession {
  readonly #ctx: HttpContext;
  readonly #socket: WebSocket;
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

  constructor(
    ctx: HttpContext,
    socket: WebSocket,
    stream: Stream,
    producer: string | null,
    key: string | null,
    who: LogFields,
  ) {
    this.#ctx = ctx;
    this.#socket = socket;
    this.#stream = stream;
    this.#producer = producer;
    this.#key = key;
    this.#who = who;
    this.#maxInFlight = ctx.settings.maxInFlight;
    this.#maxInFlightBytes = ctx.settings.maxPublishInflightBytes;
    this.#maxBytes = ctx.settings.maxPublishBytes;
    this.#heldLimit = Math.min(
      this.#maxInFlight * this.#maxBytes,
      Math.max(this.#maxInFlightBytes, this.#maxBytes),
    );
  }

  async open(): Promise<void> {
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
    if (this.#socket.readyState !== WebSocket.OPEN) return;
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

  // Refuses the rest of the input; the frames already taken are still
  // answered, then the socket is closed with `code`.
  // Counted as refused when decided, not once the answers have gone out.
  #close(code: number, error: string, detail: string): void {
    if (this.#ended || this.#closing !== null) return;
    this.#ctx.publishMetrics.refused(
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
    try {
      this.#socket.close(code, encodeCloseReason({ error, detail } as never));
    } catch {
      // already closing
    }
    this.ended();
  }

  message(e: MessageEvent): void {
    if (this.#ended || this.#closing !== null) return;
    const t0 = performance.now();
    if (typeof e.data !== "string") {
      this.#close(
        CloseCode.PolicyViolation,
        "protocol",
        "binary frames are not accepted: send JSON text",
      );
      return;
    }
    const text = e.data;
    if (
      text.length > this.#maxBytes ||
      (text.length * 3 > this.#maxBytes && new TextEncoder().encode(text).length > this.#maxBytes)
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
    const budget = this.#ctx.publishBudget;
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
    const budget = this.#ctx.publishBudget;
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
    const m = this.#ctx.publishMetrics;
    const tag = this.#key !== null ? { producer: this.#key, seq: f.seq } : null;
    void commitPublish(stream, f.rows, tag).then((out) => {
      budget.release(bytes); // committed or refused: what it held is freed
      if (out.kind === "invalid") {
        m.refused(stream.name, "invalid_row");
        entry.answer = { seq: f.seq, error: "invalid_row", index: out.index, detail: out.detail };
      } else if (out.kind === "ack") {
        if (out.duplicate) m.duplicate(stream.name);
        else m.published(stream.name, "websocket", out.last - out.first + 1);
        entry.answer = out.duplicate
          ? { seq: f.seq, first: out.first, last: out.last, duplicate: true }
          : { seq: f.seq, first: out.first, last: out.last };
      } else if (out.kind === "not_leader") {
        // Not acknowledged: the publisher sends it again to the leader. The
        // flush below closes the socket once this was the last one waiting
        // (only the first refusal starts the closing, which flushes too).
        entry.answer = "unanswered";
        this.#close(CloseCode.TryAgainLater, "no_leader", out.detail);
      } else if (out.kind === "stale") {
        m.refused(stream.name, "stale_seq");
        entry.answer = { seq: f.seq, error: "stale_seq", last_seq: out.lastSeq };
      } else {
        m.refused(stream.name, "write_failed");
        this.#ctx.logger.error("publish_failed", { ...this.#who, error: out.detail });
        entry.answer = { seq: f.seq, error: "write_failed", detail: out.detail };
      }
      this.#flush();
    });
  }

  // Sends the answers that are ready, in frame order.
  #flush(): void {
    const m = this.#ctx.publishMetrics;
    while (this.#inFlight.length > 0 && this.#inFlight[0].answer !== null) {
      const e = this.#inFlight.shift()!;
      this.#inFlightBytes -= e.bytes;
      if (e.answer === "unanswered") continue;
      if (!this.#ended && this.#socket.readyState === WebSocket.OPEN) {
        this.#socket.send(JSON.stringify(e.answer));
        m.acked("websocket", e.t0);
      }
    }
    const c = this.#closing;
    if (c !== null && this.#inFlight.length === 0) this.#closeNow(c.code, c.error, c.detail);
    else this.#pump();
  }

  ended(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#held = [];
    this.#heldBytes = 0;
    this.#ctx.logger.debug("publish_close", { ...this.#who });
  }
}
