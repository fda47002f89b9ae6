/**
 * `cli.ts streams list|show|create|delete URL …`: the streams a server
 * serves, and creating and deleting them while it serves (`GET /_/streams`,
 * `GET /_/streams/{name}`, `PUT /_/streams/{name}`,
 * `DELETE /_/streams/{name}`).
 *
 * @module
 */

import { parse, tokenOf, UsageError } from "./_args.ts";

const STREAMS_USAGE = `usage: deno run -A cli.ts streams list URL [--token TOKEN]
       deno run -A cli.ts streams show URL NAME [--token TOKEN]
       deno run -A cli.ts streams create URL NAME --schema FILE [--publish] [--ephemeral]
                  [--iceberg] [--retain-age DURATION] [--retain-bytes SIZE]
                  [--key COLUMN]... [--token TOKEN]
       deno run -A cli.ts streams delete URL NAME [--token TOKEN]

URL is the server's (http://HOST:PORT; ws:// and wss:// are taken too).

  list     prints every stream the token may read, as JSON (GET /_/streams):
           its head, and whether it was declared (flags, config) or created,
           with its definition
  show     prints stream NAME as list does (GET /_/streams/NAME)
  create   creates stream NAME with the JSON Schema in FILE (PUT /_/streams/NAME);
           prints {"stream":NAME,"stream_id":ID}. Given again with the same
           definition, or a schema that only adds nullable columns at the end,
           it succeeds (the new schema applies from the next row); any other
           difference is refused (409)
  delete   deletes created stream NAME (DELETE /_/streams/NAME): its subscribers
           are closed with 4410, its local history removed (an archive is kept)

options:
  --schema FILE           the stream's JSON Schema (create)
  --publish               take rows over POST /NAME and the publish socket
  --ephemeral             no log: nothing replayable
  --iceberg               keep an Apache Iceberg table of the stream's history
  --retain-age DURATION   local history kept by age: 90s, 15m, 24h, 7d, or seconds
  --retain-bytes SIZE     local history kept by size: 500MB, 2GiB, or bytes
  --key COLUMN            a key column (repeat for several)
  --token TOKEN           bearer token (or STREAMCAST_TOKEN); creating and deleting
                          need one with "admin": true (without --tokens on the
                          server: a client on its loopback address)

Exits 0 on success, 1 when the server refuses or cannot be reached, 2 on bad usage.`;

// `http(s)://HOST:PORT/_/streams[/NAME]` of the server at `url`.
function adminUrl(url: string, name?: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`URL ${JSON.stringify(url)} is not a URL (http://HOST:PORT)`);
  }
  const scheme = { "http:": "http:", "https:": "https:", "ws:": "http:", "wss:": "https:" }[
    u.protocol
  ];
  if (scheme === undefined) {
    throw new UsageError(`URL ${url} must be http://, https://, ws:// or wss://`);
  }
  const path = name === undefined ? "/_/streams" : `/_/streams/${encodeURIComponent(name)}`;
  return `${scheme}//${u.host}${path}`;
}

// Prints what the server answered; 0 for a 2xx, else 1 with one line on stderr.
async function report(res: Response, what: string): Promise<number> {
  const text = await res.text();
  if (res.ok) {
    if (text !== "") {
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // Printed as it came.
      }
      console.log(typeof body === "string" ? body : JSON.stringify(body, null, 2));
    }
    return 0;
  }
  let detail = text.trim();
  try {
    const j = JSON.parse(text);
    detail = [j.error, j.detail].filter((x) => x !== undefined).join(": ");
  } catch {
    // Not JSON: said as it came.
  }
  console.error(`streamcast streams: ${what}: HTTP ${res.status} ${detail}`);
  return 1;
}

/**
 * Runs `streams` with its arguments; resolves with the exit code.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { cmdStreams } from "./streams.ts";
 * import { serve, Stream } from "../mod.ts";
 * const stream = Stream.ephemeral("ticks", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * equal(await cmdStreams(["list", server.url]), 0); // prints the heads as JSON
 * equal(await cmdStreams(["delete", server.url, "ticks"]), 1); // this server creates none
 * await server.shutdown();
 * ```
 */
export async function cmdStreams(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    token: { type: "string" },
    schema: { type: "string" },
    publish: { type: "boolean" },
    ephemeral: { type: "boolean" },
    iceberg: { type: "boolean" },
    "retain-age": { type: "string" },
    "retain-bytes": { type: "string" },
    key: { type: "string", multiple: true },
  }, 3);
  if (values.help) {
    console.log(STREAMS_USAGE);
    return 0;
  }
  const [action, url, name] = positionals;
  const want = { list: 2, show: 3, create: 3, delete: 3 }[
    action as "list" | "show" | "create" | "delete"
  ];
  if (want === undefined) {
    console.error(
      `streamcast streams: ${
        action === undefined ? "give list, show, create or delete" : `unknown action ${action}`
      } (see --help)`,
    );
    return 2;
  }
  if (positionals.length !== want) {
    throw new UsageError(`streams ${action} takes ${want === 2 ? "URL" : "URL NAME"}`);
  }
  const createOnly = [
    "schema",
    "publish",
    "ephemeral",
    "iceberg",
    "retain-age",
    "retain-bytes",
    "key",
  ]
    .filter((k) => values[k] !== undefined);
  if (action !== "create" && createOnly.length > 0) {
    throw new UsageError(`--${createOnly[0]} is for streams create`);
  }
  const token = tokenOf(values);
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const at = adminUrl(url, action === "list" ? undefined : name);
  let res: Response;
  try {
    if (action === "list" || action === "show") {
      res = await fetch(at, { headers });
    } else if (action === "delete") {
      res = await fetch(at, { method: "DELETE", headers });
    } else {
      if (typeof values.schema !== "string") {
        throw new UsageError("streams create needs --schema FILE");
      }
      let schema: unknown;
      try {
        schema = JSON.parse(await Deno.readTextFile(values.schema));
      } catch (err) {
        console.error(
          `streamcast streams: cannot read schema file ${values.schema}: ${(err as Error).message}`,
        );
        return 2;
      }
      const body: Record<string, unknown> = { schema };
      if (values.publish) body.publish = true;
      if (values.ephemeral) body.ephemeral = true;
      if (values.iceberg) body.iceberg = true;
      if (values["retain-age"] !== undefined) body.retainAge = values["retain-age"];
      if (values["retain-bytes"] !== undefined) body.retainBytes = values["retain-bytes"];
      if (values.key !== undefined) body.key = values.key;
      res = await fetch(at, {
        method: "PUT",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    }
  } catch (err) {
    if (err instanceof UsageError) throw err;
    console.error(`streamcast streams: cannot reach ${at}: ${(err as Error).message}`);
    return 1;
  }
  return await report(res, `${action}${name !== undefined ? ` ${name}` : ""}`);
}
