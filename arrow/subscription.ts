/**
 * Decoding `frames=arrow` subscriptions: after the JSON greeting, every frame
 * is binary and holds one Arrow IPC stream message — the schema first, then
 * one record batch per frame (`offset` first, then the stream's columns).
 * Uses web APIs and apache-arrow only, so it runs in browsers as well as Deno.
 *
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowFrameEncoder } from "./frame_encoder.ts"; // what the server sends with
 * import { ArrowFrameDecoder, batchRows } from "./subscription.ts";
 * const encoder = new ArrowFrameEncoder({
 *   type: "object",
 *   properties: { v: { type: "number" } },
 *   required: ["v"],
 * });
 * const decoder = new ArrowFrameDecoder();
 * const rows: unknown[] = [];
 * for (const frame of [encoder.schemaMessage(), encoder.encode([1], ['{"v":1.5}'])]) {
 *   const batch = decoder.push(frame); // null for the schema frame
 *   if (batch) rows.push(...batchRows(batch));
 * }
 * equal(JSON.stringify(rows), '[[1,{"v":1.5}]]');
 * ```
 *
 * @module
 */

import {
  type DataType,
  Message,
  MessageHeader,
  type RecordBatch,
  RecordBatchReader,
  type Schema,
  Type,
} from "apache-arrow";
import { closeError, ProtocolError } from "../client/errors.ts";
import { type Greeting, subscribeUrl } from "../wire/subscribe.ts";
import type { Where } from "../wire/filter.ts";

/**
 * A binary frame as a WebSocket hands it over (`binaryType` "arraybuffer",
 * or bytes).
 */
export type BinaryFrame = Uint8Array | ArrayBuffer;

function bytesOf(frame: BinaryFrame): Uint8Array {
  return frame instanceof Uint8Array ? frame : new Uint8Array(frame);
}

/** The header type of one encapsulated IPC message (continuation, length, flatbuffer). */
function headerOf(bytes: Uint8Array): MessageHeader {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength < 8 || view.getInt32(0, true) !== -1) {
    throw new TypeError("not an Arrow IPC message (no continuation marker)");
  }
  const length = view.getInt32(4, true);
  if (length <= 0 || 8 + length > bytes.byteLength) {
    throw new TypeError(`truncated Arrow IPC message (metadata of ${length} bytes)`);
  }
  return Message.decode(bytes.subarray(8, 8 + length)).headerType;
}

/**
 * Turns the binary frames of a `frames=arrow` subscription back into Arrow
 * record batches. Feed every binary frame in order, the schema frame first.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowFrameEncoder } from "./frame_encoder.ts";
 * import { ArrowFrameDecoder, batchRows } from "./subscription.ts";
 * const encoder = new ArrowFrameEncoder({
 *   type: "object",
 *   properties: { symbol: { type: "string" } },
 *   required: ["symbol"],
 * });
 * const decoder = new ArrowFrameDecoder();
 * equal(decoder.push(encoder.schemaMessage()), null);
 * const batch = decoder.push(encoder.encode([3], ['{"symbol":"ETH-USD"}']))!;
 * equal(JSON.stringify(batchRows(batch)), '[[3,{"symbol":"ETH-USD"}]]');
 * ```
 */
export class ArrowFrameDecoder {
  #schemaFrame: Uint8Array | null = null;
  #schema: Schema | null = null;

  /** The wire schema, once the schema frame has arrived. */
  get schema(): Schema | null {
    return this.#schema;
  }

  /**
   * Takes the next binary frame.
   *
   * @returns `null` for the schema frame, else the record batch it holds.
   * @throws {TypeError} When the frame is not an Arrow IPC message, or a
   *   record batch arrives before the schema.
   */
  push(frame: BinaryFrame): RecordBatch | null {
    const bytes = bytesOf(frame);
    const header = headerOf(bytes);
    if (header === MessageHeader.Schema) {
      this.#schemaFrame = bytes.slice();
      this.#schema = RecordBatchReader.from(this.#schemaFrame).open().schema;
      return null;
    }
    if (header !== MessageHeader.RecordBatch) {
      throw new TypeError(`unexpected Arrow IPC message type ${MessageHeader[header]}`);
    }
    if (this.#schemaFrame === null) {
      throw new TypeError("an Arrow record batch arrived before the schema frame");
    }
    // A reader needs the schema before a batch: read the two messages as one stream.
    const stream = new Uint8Array(this.#schemaFrame.byteLength + bytes.byteLength);
    stream.set(this.#schemaFrame, 0);
    stream.set(bytes, this.#schemaFrame.byteLength);
    const batches = RecordBatchReader.from(stream).readAll();
    if (batches.length !== 1) {
      throw new TypeError(`a frame held ${batches.length} record batches, not 1`);
    }
    return batches[0];
  }
}

/**
 * The rows of a decoded batch as `[offset, row]` pairs, like the JSON frame
 * modes give them: `offset` a number (`null` on an ephemeral stream), `row`
 * an object with the columns in order. int64 values are numbers when they are
 * safe integers, else `BigInt`s (exact); float columns hold their
 * single-precision values. Nested columns are plain JSON values: a JSON text
 * column (`arrow.json`) parsed, so it is the value as published; a Struct an
 * object with its fields in schema order, a List an array.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowRowBuilder } from "./row_builder.ts";
 * import { batchRows } from "./subscription.ts";
 * const builder = new ArrowRowBuilder({
 *   type: "object",
 *   properties: { id: { type: "integer" }, ok: { type: ["boolean", "null"] } },
 *   required: ["id", "ok"],
 * });
 * const pairs = batchRows(builder.fromJson([9], ['{"id":1,"ok":null}']));
 * equal(JSON.stringify(pairs), '[[9,{"id":1,"ok":null}]]');
 * ```
 */
export function batchRows(batch: RecordBatch): [number | null, Record<string, unknown>][] {
  const fields = batch.schema.fields;
  const columns = fields.map((f) => batch.getChild(f.name)!);
  const int64 = fields.map((f) => f.type.typeId === Type.Int && f.type.bitWidth === 64);
  const nested = fields.map((f) => nestedKind(f));
  const out: [number | null, Record<string, unknown>][] = new Array(batch.numRows);
  for (let i = 0; i < batch.numRows; i++) {
    let offset: number | null = null;
    const row: Record<string, unknown> = {};
    for (let c = 0; c < fields.length; c++) {
      let v = columns[c].get(i);
      if (int64[c] && typeof v === "bigint") v = toNumberIfSafe(v);
      else if (nested[c] !== 0 && v !== null) {
        v = nested[c] === 1 ? JSON.parse(v as string) : plainValue(v, fields[c].type);
      }
      if (c === 0) offset = v as number | null;
      else {
        Object.defineProperty(row, fields[c].name, {
          value: v,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
    }
    out[i] = [offset, row];
  }
  return out;
}

// Nested columns (docs/SPEC.md §7.0): object and array values back from Arrow.

/** 0: not nested; 1: JSON text (the `arrow.json` extension); 2: Struct or List. */
function nestedKind(f: { type: DataType; metadata: Map<string, string> }): 0 | 1 | 2 {
  if (f.metadata.get("ARROW:extension:name") === "arrow.json") return 1;
  return f.type.typeId === Type.Struct || f.type.typeId === Type.List ? 2 : 0;
}

/** A Struct or List value (or a leaf in one) as a plain JSON value. */
function plainValue(v: unknown, type: DataType): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return toNumberIfSafe(v);
  if (type.typeId === Type.List) {
    const child = type.children[0].type;
    const out: unknown[] = [];
    for (const item of v as Iterable<unknown>) out.push(plainValue(item, child));
    return out;
  }
  if (type.typeId === Type.Struct) {
    const row = v as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const f of type.children as { name: string; type: DataType }[]) {
      Object.defineProperty(out, f.name, {
        value: plainValue(row[f.name], f.type),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return v;
}

function toNumberIfSafe(v: bigint): number | bigint {
  return v >= -9007199254740991n && v <= 9007199254740991n ? Number(v) : v;
}

/** Options of {@linkcode connectArrow}. */
export interface ArrowConnectOptions {
  /** Where to start (as for `connect`); absent: live. @default undefined */
  offset?: number | "earliest";
  /** The stream id the offset came from. @default null */
  streamId?: string | null;
  /** Give up without a greeting after this long. @default 10000 */
  connectTimeoutMs?: number;
  /** The WebSocket constructor to use. @default globalThis.WebSocket */
  WebSocket?: typeof WebSocket;
  /** Only the rows this filter matches (`where=`, as for `connect`). @default undefined */
  where?: Where | string;
}

/** A `frames=arrow` subscription: the greeting, then record batches. */
export interface ArrowSubscription extends AsyncIterable<RecordBatch> {
  /** The greeting (`frames` is `"arrow"`). */
  readonly greeting: Greeting;
  /** The batches' schema (`offset` first). */
  readonly schema: Schema;
  /** Closes the socket; the iteration ends. */
  close(): void;
}

/**
 * Subscribes with `frames=arrow` for bulk consumers: resolves once the
 * greeting and the schema arrived (a refusal rejects with the typed error of
 * `connect`), then yields Arrow `RecordBatch`es of coalesced rows, replay and
 * live alike, with the offsets as the first column. It neither keeps a cursor
 * nor reconnects: the last batch's last offset + 1 is where to resume.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { connectArrow } from "./subscription.ts";
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("ticks", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * await stream.sendMany([{ v: 1 }, { v: 2 }]);
 * const sub = await connectArrow(`${server.url}/ticks`, { offset: 1 });
 * for await (const batch of sub) {
 *   equal(batch.getChild("offset")?.get(0), 1n);
 *   equal(batch.getChild("v")?.get(0), 1);
 *   break;
 * }
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export async function connectArrow(
  url: string,
  options: ArrowConnectOptions = {},
): Promise<ArrowSubscription> {
  const where: unknown = options.where;
  if (
    where !== undefined && typeof where !== "string" &&
    (typeof where !== "object" || where === null || Array.isArray(where))
  ) {
    throw new TypeError(
      `connectArrow: where must be a filter object or its JSON text, got ${JSON.stringify(where)}`,
    );
  }
  const WS = options.WebSocket ?? globalThis.WebSocket;
  const ws = new WS(
    subscribeUrl(url, {
      offset: options.offset,
      streamId: options.streamId,
      frames: "arrow",
      where: options.where,
    }),
  );
  ws.binaryType = "arraybuffer";
  const decoder = new ArrowFrameDecoder();
  const queue: RecordBatch[] = [];
  let greeting: Greeting | null = null;
  let schema: Schema | null = null;
  let closed: { code: number; reason: string } | null = null;
  let problem: Error | null = null;
  let wake: (() => void) | null = null;
  const notify = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  ws.onmessage = (e: MessageEvent) => {
    try {
      if (typeof e.data === "string") {
        if (greeting) throw new TypeError("a text frame after the greeting on frames=arrow");
        greeting = JSON.parse(e.data);
      } else {
        const batch = decoder.push(e.data as ArrayBuffer);
        if (batch) queue.push(batch);
        else schema = decoder.schema;
      }
    } catch (err) {
      problem = err instanceof Error ? err : new Error(String(err));
      ws.close();
    }
    notify();
  };
  ws.onclose = (e: CloseEvent) => {
    closed = { code: e.code, reason: e.reason };
    notify();
  };
  ws.onerror = () => {};
  const ms = options.connectTimeoutMs ?? 10_000;
  const deadline = Date.now() + ms;
  while (!schema && !closed && !problem) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    await new Promise<void>((r) => {
      wake = r;
      setTimeout(r, left);
    });
  }
  const ctx = { url, offset: options.offset ?? null, streamId: options.streamId ?? null };
  if (problem) throw new ProtocolError((problem as Error).message, url);
  if (!schema) {
    ws.close();
    if (closed) {
      const c = closed as { code: number; reason: string };
      throw closeError(c.code, c.reason, ctx, null, false);
    }
    throw new ProtocolError(`no greeting and schema within ${ms} ms`, url);
  }
  return {
    greeting: greeting!,
    schema,
    close: () => ws.close(),
    async *[Symbol.asyncIterator](): AsyncIterator<RecordBatch> {
      while (true) {
        if (queue.length > 0) {
          yield queue.shift()!;
          continue;
        }
        if (problem) throw new ProtocolError((problem as Error).message, url);
        if (closed) {
          const c = closed as { code: number; reason: string };
          if (c.code === 1000 || c.code === 1005) return;
          throw closeError(c.code, c.reason, ctx, null, false);
        }
        await new Promise<void>((r) => (wake = r));
      }
    },
  };
}
