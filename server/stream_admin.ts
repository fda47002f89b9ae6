/**
 * What the admin routes (`PUT`/`DELETE /_/streams/{name}`,
 * `http/streams_admin.ts`) ask of the server's admin: create a stream,
 * delete one, describe one. A standalone server's is `admin/local_admin.ts`
 * (definitions in `ROOT/streams.json`); a cluster's keeps them in etcd.
 *
 * @module
 */

import { definitionJson, type StreamDefinition } from "./stream_definition.ts";

/** What an admin route answers: a status and a JSON body (null: none, as for 204). */
export interface AdminAnswer {
  /** The HTTP status. */
  readonly status: number;
  /** The JSON body, or null. */
  readonly body: Record<string, unknown> | null;
}

/** A stream as `GET /_/streams` describes it besides its head. */
export interface StreamDescription {
  /** Declared by flags or the config file (not deletable), or created while serving. */
  readonly declared: boolean;
  /** Its definition (null for a followed stream: its primary has it). */
  readonly definition: Record<string, unknown> | null;
}

/** What the admin routes ask: create, delete, describe. */
export interface StreamAdmin {
  /** Creates stream `name` with `definition`, or answers how it compares with the one in force. */
  put(name: string, definition: StreamDefinition): Promise<AdminAnswer>;
  /** Deletes created stream `name`. */
  delete(name: string): Promise<AdminAnswer>;
  /** How stream `name` was made, or null when it is not known here. */
  describe(name: string): StreamDescription | null;
}

/**
 * The 409 for a create or delete naming a stream declared by flags or the
 * config file: those change only there, with a restart.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { declaredAnswer } from "./stream_admin.ts";
 * equal(declaredAnswer("t").status, 409);
 * equal(declaredAnswer("t").body?.error, "declared");
 * ```
 */
export function declaredAnswer(name: string): AdminAnswer {
  return {
    status: 409,
    body: {
      error: "declared",
      detail: `stream ${JSON.stringify(name)} is declared by flags or the config file: ` +
        "change it there and restart",
    },
  };
}

/**
 * How stream `name` was made: declared (with its definition, null for a
 * followed one), created (with the definition in force), or null when
 * neither knows it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { describeStream } from "./stream_admin.ts";
 * equal(describeStream(new Map([["m", null]]), new Map(), "m")?.declared, true);
 * equal(describeStream(new Map(), new Map(), "x"), null);
 * ```
 */
export function describeStream(
  declared: ReadonlyMap<string, StreamDefinition | null>,
  created: ReadonlyMap<string, StreamDefinition>,
  name: string,
): StreamDescription | null {
  if (declared.has(name)) {
    const d = declared.get(name)!;
    return { declared: true, definition: d === null ? null : definitionJson(d) };
  }
  const d = created.get(name);
  return d === undefined ? null : { declared: false, definition: definitionJson(d) };
}
