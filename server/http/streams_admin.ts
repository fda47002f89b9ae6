/**
 * `PUT /_/streams/{name}` and `DELETE /_/streams/{name}`: streams created
 * and deleted while serving. The handler has checked who may (an admin
 * grant; without tokens, a loopback client); here the name (400), the body
 * (its size, 413; JSON and its fields, 400 naming each problem), then the
 * server's admin (`../admin/stream_admin.ts`) answers: 201 created, 200 the
 * same or a schema grown, 409 a conflict, a declared stream, too many; 204
 * deleted.
 *
 * @module
 */

import { isStreamName, STREAM_NAME_RULE } from "../../wire/stream_name.ts";
import { DefinitionError, MAX_DEFINITION_BYTES, parseDefinition } from "../stream_definition.ts";
import type { AdminAnswer } from "../stream_admin.ts";
import type { HttpContext } from "./context.ts";
import type { RouteRequest } from "./router.ts";
import { json } from "./_respond.ts";

/**
 * The longest `detail` a 400 carries, in characters: a message that quotes
 * what the body held is cut there, so a huge value is not sent back.
 */
export const MAX_DETAIL_CHARS = 1024;

function bad(detail: string): Response {
  const clipped = detail.length > MAX_DETAIL_CHARS
    ? `${detail.slice(0, MAX_DETAIL_CHARS)}…`
    : detail;
  return json({ error: "bad_request", detail: clipped }, 400);
}

function answer(a: AdminAnswer): Response {
  if (a.body === null) return new Response(null, { status: a.status });
  return json(a.body, a.status);
}

// The stream name of the path, or the 400 refusing it.
function nameOf(r: RouteRequest): string | Response {
  const name = r.params.stream;
  if (!isStreamName(name) || name === "") {
    return bad(`stream name ${JSON.stringify(name.slice(0, 80))} is not ${STREAM_NAME_RULE}`);
  }
  return name;
}

function noAdmin(): Response {
  return json(
    {
      error: "method_not_allowed",
      allow: "GET, HEAD",
      detail: "this server does not create or delete streams while serving",
    },
    405,
    { allow: "GET, HEAD" },
  );
}

// The body's bytes, at most `max`; null when it is longer.
async function readBounded(req: Request, max: number): Promise<Uint8Array | null> {
  const length = Number(req.headers.get("content-length") ?? NaN);
  if (length > max) {
    await req.body?.cancel();
    return null;
  }
  const parts: Uint8Array[] = [];
  let size = 0;
  if (req.body !== null) {
    for await (const part of req.body) {
      size += part.length;
      if (size > max) return null;
      parts.push(part);
    }
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** `PUT /_/streams/{name}`: creates the stream, or says how it compares. */
export async function putStreamRoute(ctx: HttpContext, r: RouteRequest): Promise<Response> {
  if (ctx.admin === null) return noAdmin();
  const name = nameOf(r);
  if (name instanceof Response) return name;
  const bytes = await readBounded(r.req, MAX_DEFINITION_BYTES);
  if (bytes === null) {
    return json({ error: "too_large", max_bytes: MAX_DEFINITION_BYTES }, 413);
  }
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    return bad("the body is not JSON");
  }
  let definition;
  try {
    definition = parseDefinition(body);
  } catch (err) {
    if (!(err instanceof DefinitionError)) throw err;
    return bad(err.message);
  }
  return answer(await ctx.admin.put(name, definition));
}

/** `DELETE /_/streams/{name}`: deletes a created stream. */
export async function deleteStreamRoute(ctx: HttpContext, r: RouteRequest): Promise<Response> {
  if (ctx.admin === null) return noAdmin();
  const name = nameOf(r);
  if (name instanceof Response) return name;
  await r.req.body?.cancel();
  return answer(await ctx.admin.delete(name));
}
