/**
 * What a subscription yields: a row as `[offset, msg]`, or as `[offset,
 * line]` with the line's text as received. Browser-safe.
 *
 * @module
 */

/**
 * A data row: its offset (`null` on an ephemeral stream) and the message.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { Row } from "./row.ts";
 * const [offset, msg]: Row<{ price: number }> = [1861, { price: 85565 }];
 * equal(offset, 1861);
 * equal(msg.price, 85565);
 * ```
 */
export type Row<T = unknown> = [offset: number | null, msg: T];

/**
 * A data line as received, from `Subscription.lines()`: its offset and the
 * original `[offset,msg]` text.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { Line } from "./row.ts";
 * const [offset, text]: Line = [1861, '[1861,{"price":85565}]'];
 * equal(offset, 1861);
 * equal(text.length, 22);
 * ```
 */
export type Line = [offset: number | null, line: string];
