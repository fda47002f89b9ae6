/**
 * The wire contract between a streamcast server and its clients, in one place
 * both sides import: how a subscription is asked for and opened
 * (`subscribe.ts`), how it ends (`close_reason.ts`), how rows are published
 * (`publish.ts`), the row filters of `where=` (`filter.ts`), the points in
 * time of `since=` (`since.ts`), and the stream-name rule (`stream_name.ts`).
 *
 * Every module here is pure (no Deno API, no I/O) and imports nothing outside
 * `wire/`, so the server, the Deno client and the browser client share one
 * definition and cannot drift.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, ok } from "node:assert/strict";
 * import { compileFilter, parseSince, parseSubscribeQuery } from "./mod.ts";
 * const q = parseSubscribeQuery(
 *   new URLSearchParams('since=2026-12-01T09:30:00Z&where={"sym":"BTC-USD"}'),
 * );
 * ok(q.ok);
 * deepStrictEqual(q.value.since, parseSince("2026-12-01T09:30:00Z"));
 * const filter = compileFilter(JSON.parse(q.value.where!), {
 *   type: "object",
 *   properties: { sym: { type: "string" } },
 * });
 * ok(filter.test({ sym: "BTC-USD" }) && !filter.test({ sym: "ETH-USD" }));
 * ```
 *
 * @module
 */

export * from "./subscribe.ts";
export * from "./close_reason.ts";
export * from "./publish.ts";
export * from "./filter.ts";
export * from "./since.ts";
export * from "./stream_name.ts";
