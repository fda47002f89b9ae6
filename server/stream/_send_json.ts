/**
 * Storing rows given as JSON texts, each on its own verdict: the body of
 * `Stream#sendJson`, apart so that the stream's file stays one job. Private
 * to server/.
 *
 * @module
 */

import type { Log } from "../../log/mod.ts";
import type { RowSchema } from "../../schema/row_schema.ts";
import { RowError } from "./row_error.ts";

/**
 * What {@linkcode sendJsonTo} needs of the stream: its name, schema and log
 * (null: ephemeral), and what to call for each stored row and each refused one.
 *
 * @example
 * ```ts
 * import type { JsonTarget } from "./_send_json.ts";
 * import { compileSchema } from "../../schema/compile.ts";
 * const target: JsonTarget = {
 *   name: "t",
 *   schema: compileSchema({ type: "object", properties: { v: { type: "number" } }, required: ["v"] }),
 *   log: null,
 *   stored: (jsons) => console.log(jsons),
 *   refused: () => {},
 * };
 * console.log(target.name);
 * ```
 */
export interface JsonTarget {
  readonly name: string;
  readonly schema: RowSchema;
  readonly log: Log | null;
  /** Rows appended (or, ephemeral, to broadcast), in order; the array is the callee's. */
  stored(jsons: string[]): void;
  /** A row the schema or the log refused (not a text that is not JSON). */
  refused(): void;
}

/**
 * The result of {@linkcode sendJsonTo}: see `Stream#sendJson`.
 *
 * @example
 * ```ts
 * import type { JsonSent } from "./_send_json.ts";
 * const sent: JsonSent = { refused: null, durable: Promise.resolve() };
 * await sent.durable;
 * ```
 */
export interface JsonSent {
  refused: (Error | undefined)[] | null;
  durable: Promise<unknown>;
}

// Resolves once every part has settled; rejects with the first failure.
async function allSettled(parts: Promise<unknown>[]): Promise<void> {
  for (const r of await Promise.allSettled(parts)) if (r.status === "rejected") throw r.reason;
}

/**
 * Stores `texts` (one row each) into `target` in order: a text already in
 * the encoded form as it is, any other parsed, validated and encoded; the
 * valid rows in one `appendMany` (a row that may be too big for the log
 * alone, so that its refusal is its own).
 *
 * @example
 * ```ts
 * import { sendJsonTo } from "./_send_json.ts";
 * import { compileSchema } from "../../schema/compile.ts";
 * const schema = compileSchema({ type: "object", properties: { v: { type: "number" } }, required: ["v"] });
 * const out: string[] = [];
 * const sent = sendJsonTo(
 *   { name: "t", schema, log: null, stored: (j) => out.push(...j), refused: () => {} },
 *   ['{"v":1}', '{ "v": 2 }', "{"],
 * );
 * await sent.durable;
 * console.log(out, sent.refused?.[2]?.name); // [ '{"v":1}', '{"v":2}' ] SyntaxError
 * ```
 */
export function sendJsonTo(target: JsonTarget, texts: readonly string[]): JsonSent {
  const { schema, log } = target;
  // A string's UTF-8 size is at most three times its length.
  const safe = log === null ? Infinity : log.maxPayloadBytes / 3;
  let refused: (Error | undefined)[] | null = null;
  let jsons: string[] = [];
  const parts: Promise<unknown>[] = [];
  const flush = (): void => {
    if (jsons.length === 0) return;
    if (log !== null) parts.push(log.appendMany(jsons));
    target.stored(jsons);
    jsons = [];
  };
  try {
    for (let i = 0; i < texts.length; i++) {
      let json = texts[i];
      if (!schema.isEncoded(json)) {
        let row: unknown;
        try {
          row = JSON.parse(json);
        } catch (err) {
          (refused ??= new Array(texts.length))[i] = err instanceof SyntaxError
            ? err
            : new SyntaxError(err instanceof Error ? err.message : String(err));
          continue;
        }
        const problem = schema.validate(row);
        if (problem !== null) {
          target.refused();
          (refused ??= new Array(texts.length))[i] = new RowError(target.name, problem);
          continue;
        }
        json = schema.encode(row as Record<string, unknown>);
      }
      if (json.length <= safe) jsons.push(json);
      else {
        flush();
        try {
          parts.push(log!.append(json));
          target.stored([json]);
        } catch (err) {
          if (!(err instanceof RangeError)) throw err;
          target.refused();
          (refused ??= new Array(texts.length))[i] = err;
        }
      }
    }
    flush();
  } catch (err) {
    // The log refused appends (failed or closed): what was appended settles
    // first, then the batch fails.
    parts.push(Promise.reject(err));
  }
  return { refused, durable: parts.length === 1 ? parts[0] : allSettled(parts) };
}
