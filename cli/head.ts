/**
 * `cli.ts head URL`: print a stream's head (end offset, subscribers, schema)
 * as JSON.
 *
 * @module
 */

import { parse, tokenOf, UsageError } from "./_args.ts";
import { StreamNotFound } from "../client/errors.ts";
import { fetchHead, headUrl } from "../client/head.ts";

const HEAD_USAGE = `usage: deno run -A cli.ts head URL [--token TOKEN]

Prints the head of the stream at URL (ws://HOST:PORT/NAME or http://HOST:PORT/NAME;
/ for the unnamed stream) as JSON: stream, stream_id, end_offset (the next offset
to be written), earliest, durable, subscribers, schema, archive. It is
GET /NAME/head (/_/head for the unnamed stream). Exits 1 when there is no such
stream or the server cannot be reached.`;

/**
 * Runs `head` with its arguments; resolves with the exit code.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { cmdHead } from "./head.ts";
 * import { serve, Stream } from "../mod.ts";
 * const stream = Stream.ephemeral("ticks", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * equal(await cmdHead([`${server.url}/ticks`]), 0); // after printing the head as JSON on stdout
 * equal(await cmdHead([`${server.url}/nope`]), 1); // no such stream
 * await server.shutdown();
 * ```
 */
export async function cmdHead(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { token: { type: "string" } }, 1);
  if (values.help || positionals.length !== 1) {
    console.log(HEAD_USAGE);
    return values.help ? 0 : 2;
  }
  const url = positionals[0];
  let at: string;
  try {
    at = headUrl(url);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  try {
    const token = tokenOf(values);
    const headers: HeadersInit = token ? { authorization: `Bearer ${token}` } : {};
    console.log(JSON.stringify(await fetchHead(url, { headers }), null, 2));
    return 0;
  } catch (err) {
    if (err instanceof StreamNotFound) {
      console.error(`streamcast head: ${err.message}`);
      return 1;
    }
    if (err instanceof Error) {
      // fetch's network failures are TypeErrors; statuses other than 404 are Errors.
      console.error(`streamcast head: cannot get ${at}: ${err.message}`);
      return 1;
    }
    throw err;
  }
}
