/**
 * What a subscription hands out: a row (`[offset, msg]`) or, from
 * `Subscription.lines()`, a line (`[offset, text]`).
 *
 * @module
 */

/**
 * A data row: its offset (`null` on an ephemeral stream) and the message.
 *
 * @example
 * ```ts
 * import type { Row } from "./row.ts";
 * const [offset, msg]: Row<{ price: number }> = [1861, { price: 85565 }];
 * console.log(offset, msg.price); // 1861 85565
 * ```
 */
export type Row<T = unknown> = [offset: number | null, msg: T];

/**
 * A data line as received: its offset and the original `[offset,msg]` text.
 *
 * @example
 * ```ts
 * import type { Line } from "./row.ts";
 * const [offset, text]: Line = [1861, '[1861,{"price":85565}]'];
 * console.log(offset, text.length); // 1861 22
 * ```
 */
export type Line = [offset: number | null, line: string];
