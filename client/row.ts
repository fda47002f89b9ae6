/**
 * What a subscription yields: a row as `[offset, msg]`, or as `[offset,
 * line]` with the line's text as received. Browser-safe.
 *
 * @module
 */

/**
 * A data row: its offset (`null` on an ephemeral stream) and the message.
 */
export type Row<T = unknown> = [offset: number | null, msg: T];

/**
 * A data line as received, from `Subscription.lines()`: its offset and the
 * original `[offset,msg]` text.
 */
export type Line = [offset: number | null, line: string];
