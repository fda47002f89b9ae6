/**
 * What the admin routes (`PUT`/`DELETE /_/streams/{name}`,
 * `http/streams_admin.ts`) ask of the server's admin: create a stream,
 * delete one, describe one. A standalone server's is `admin/local_admin.ts`
 * (definitions in `ROOT/streams.json`); a cluster's keeps them in etcd.
 *
 * @module
 */

import type { StreamDefinition } from "./stream_definition.ts";

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
