/**
 * `serve`'s streams created while serving (`PUT /_/streams/{name}`): those
 * recorded in `ROOT/streams.json` read and checked against the declared
 * ones at start ({@linkcode loadCreated}), opened like declared streams
 * ({@linkcode openDefined}), and the admin that answers the admin routes
 * ({@linkcode createdAdmin}).
 *
 * @module
 */

import type { Logger } from "../../common/logger.ts";
import { LogCorruptError, LogLockedError } from "../../log/mod.ts";
import {
  compareDefinitions,
  DefinitionError,
  type StreamDefinition,
} from "../../server/stream_definition.ts";
import { readStreamsFile, STREAMS_FILE } from "../../server/admin/streams_file.ts";
import { LocalStreamAdmin } from "../../server/admin/local_admin.ts";
import { DEFAULT_MAX_STREAMS } from "../../server/limits.ts";
import type { Server } from "../../server/serve.ts";
import { Stream } from "../../server/stream/stream.ts";
import { Fatal, oneLine, show } from "./fatal.ts";
import type { Settings } from "./run_settings.ts";
import { streamOptionsOf } from "./streams.ts";
import type { StreamOptions } from "../../server/stream/stream_options.ts";

/**
 * The definition of each declared stream (null for a followed one: its
 * primary defines it), as the admin compares a `PUT` with it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { declaredDefinitions } from "./created_streams.ts";
 * import { settingsFrom } from "./config.ts";
 * const s = await settingsFrom({ stream: ["t=t.json"], publish: ["t"] });
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * equal(declaredDefinitions(s, new Map([["t", schema]])).get("t")?.publish, true);
 * ```
 */
export function declaredDefinitions(
  s: Settings,
  schemas: ReadonlyMap<string, Record<string, unknown>>,
): Map<string, StreamDefinition | null> {
  const out = new Map<string, StreamDefinition | null>();
  for (const [name, decl] of s.streams) {
    out.set(name, {
      schema: schemas.get(name)!,
      publish: decl.publish === true,
      ephemeral: decl.ephemeral,
      iceberg: decl.iceberg === true,
      retainAge: null,
      retainBytes: null,
      key: null,
    });
  }
  for (const name of s.follow.keys()) out.set(name, null);
  return out;
}

/**
 * The streams recorded in `ROOT/streams.json` that are not declared; a
 * {@linkcode Fatal} (exit 2) naming the file for one that does not parse,
 * or naming the stream for one declared with another definition.
 */
export async function loadCreated(
  s: Settings,
  declared: ReadonlyMap<string, StreamDefinition | null>,
): Promise<Map<string, StreamDefinition>> {
  let recorded: Map<string, StreamDefinition>;
  try {
    recorded = await readStreamsFile(s.root);
  } catch (err) {
    if (err instanceof DefinitionError) throw new Fatal(err.message, 2);
    throw new Fatal(`cannot read ${s.root}/${STREAMS_FILE}: ${oneLine(err)}`, 1);
  }
  for (const [name, def] of [...recorded]) {
    if (!declared.has(name)) continue;
    const d = declared.get(name)!;
    const change = d === null ? null : compareDefinitions(def, d);
    if (change === null || change.kind !== "same") {
      throw new Fatal(
        `${show(name)} is declared and also recorded in ${s.root}/${STREAMS_FILE} with another ` +
          `definition${change?.kind === "conflict" ? ` (${change.detail})` : ""}: ` +
          "remove one of them",
        2,
      );
    }
    recorded.delete(name);
  }
  return recorded;
}

/**
 * The options stream `name` is opened with as `def` says, with the server's
 * (its log under `s.root` unless ephemeral; its retention, when given, over
 * the server's).
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { definedOptions } from "./created_streams.ts";
 * import { settingsFrom } from "./config.ts";
 * import { parseDefinition } from "../../server/stream_definition.ts";
 * const s = await settingsFrom({ stream: ["t=t.json"], root: "/data" });
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const o = definedOptions(s, parseDefinition({ schema, retainAge: "1h" }));
 * equal(o.root, "/data");
 * deepStrictEqual(o.logOptions?.chunks, { retainAgeMs: 3_600_000, retainBytes: null });
 * ```
 */
export function definedOptions(
  s: Settings,
  def: StreamDefinition,
  logger?: Logger,
): StreamOptions {
  const options = streamOptionsOf(
    s,
    {
      schema: { inline: def.schema, where: "its definition" },
      ephemeral: def.ephemeral,
      publish: def.publish,
      iceberg: def.iceberg,
      ...(def.retainAge !== null ? { retainAge: def.retainAge } : {}),
      ...(def.retainBytes !== null ? { retainBytes: def.retainBytes } : {}),
    },
    logger,
  );
  if (def.ephemeral) return { ...options, schema: def.schema };
  const key = def.key === null ? {} : { key: def.key };
  return { ...options, ...key, schema: def.schema, root: s.root };
}

/** Opens stream `name` as `def` says, with the server's options ({@linkcode definedOptions}). */
export async function openDefined(
  s: Settings,
  name: string,
  def: StreamDefinition,
  logger: Logger,
): Promise<Stream> {
  return await Stream.open(name, definedOptions(s, def, logger));
}

/**
 * Opens every recorded stream; on a failure closes those opened and throws
 * a {@linkcode Fatal} naming the stream.
 */
export async function openCreated(
  s: Settings,
  recorded: ReadonlyMap<string, StreamDefinition>,
  logger: Logger,
): Promise<Stream[]> {
  const opened: Stream[] = [];
  try {
    for (const [name, def] of recorded) {
      try {
        opened.push(await openDefined(s, name, def, logger));
      } catch (err) {
        const code = err instanceof LogLockedError || err instanceof LogCorruptError ? 1 : 2;
        throw new Fatal(`${show(name)} (recorded in ${STREAMS_FILE}): ${oneLine(err)}`, code);
      }
    }
  } catch (err) {
    await Promise.allSettled(opened.map((st) => st.close()));
    throw err;
  }
  return opened;
}

/**
 * The admin of a standalone `serve`: streams created and deleted while
 * serving, recorded in `ROOT/streams.json`. Attach it once serving
 * ({@linkcode attachAdmin}).
 */
export function createdAdmin(
  s: Settings,
  declared: ReadonlyMap<string, StreamDefinition | null>,
  recorded: ReadonlyMap<string, StreamDefinition>,
  logger: Logger,
): LocalStreamAdmin {
  return new LocalStreamAdmin({
    root: s.root,
    declared,
    recorded,
    maxStreams: s.maxStreams ?? DEFAULT_MAX_STREAMS,
    open: (name, def) => openDefined(s, name, def, logger),
    logger,
  });
}

/** Gives `admin` the server's live set of streams. */
export function attachAdmin(admin: LocalStreamAdmin, server: Server): void {
  admin.attach({
    get size() {
      return server.streams.size;
    },
    get: (name) => server.streams.get(name),
    add: (stream, publish) => server.addStream(stream, { publish }),
    remove: (name, code, reason) => server.removeStream(name, code, reason),
  });
}
