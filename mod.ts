/**
 * streamcast: a replayable WebSocket multicaster. One feed in, every row
 * appended to a durable segmented log and only then broadcast to any number of
 * subscribers, each frame carrying its offset.
 *
 * ```ts
 * import { Log } from "@streamcast/server";
 * const log = await Log.open(await Deno.makeTempDir());
 * console.log(await log.append(new TextEncoder().encode('{"price":1}'))); // 1
 * await log.close();
 * ```
 *
 * @module
 */

export * from "./log/mod.ts";
export * from "./client/wire.ts";
export * from "./server/stream.ts";
export * from "./server/serve.ts";
export * from "./server/errors.ts";
export {
  type Column,
  type ColumnType,
  compileSchema,
  type RowSchema,
  SchemaError,
} from "./server/schema.ts";
