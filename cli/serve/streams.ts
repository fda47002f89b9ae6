/**
 * `serve`'s streams: each declared stream's schema loaded and checked
 * ({@linkcode loadSchemas}, before anything is opened), then its log opened
 * ({@linkcode openStreams}).
 *
 * @module
 */

import type { Logger } from "../../common/logger.ts";
import {
  DEFAULT_SEAL_EVERY_MS,
  LogCorruptError,
  LogLockedError,
  type LogOptions,
} from "../../log/mod.ts";
import { compileSchema } from "../../schema/compile.ts";
import { SchemaError } from "../../schema/schema_error.ts";
import { Stream } from "../../server/stream/stream.ts";
import { type Mirror, openMirror } from "../../server/mirror/mirror.ts";
import { Fatal, fileError, oneLine, show } from "./fatal.ts";
import type { SchemaSource, Settings, StreamDecl } from "./run_settings.ts";
import type { StreamOptions } from "../../server/stream/stream_options.ts";

async function loadSchema(name: string, src: SchemaSource): Promise<Record<string, unknown>> {
  let json: unknown;
  let where: string;
  if ("path" in src) {
    where = `schema file ${src.path}`;
    let text: string;
    try {
      text = await Deno.readTextFile(src.path);
    } catch (err) {
      throw new Fatal(`${show(name)}: cannot read schema file ${src.path}: ${fileError(err)}`, 2);
    }
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new Fatal(`${show(name)}: schema file ${src.path} is not JSON: ${oneLine(err)}`, 2);
    }
  } else {
    where = src.where;
    json = src.inline;
  }
  try {
    // Compiled here too, so that a bad schema stops the start before any log is opened.
    compileSchema(json);
  } catch (err) {
    if (!(err instanceof SchemaError)) throw err;
    throw new Fatal(`${show(name)}: ${where} is refused: ${oneLine(err)}`, 2);
  }
  return json as Record<string, unknown>;
}

/**
 * Every declared stream's schema, by name; a {@linkcode Fatal} (exit 2) for the first bad one.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { loadSchemas } from "./streams.ts";
 * import { settingsFrom } from "./config.ts";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/t.json`, '{"type":"object","properties":{"v":{"type":"number"}},"required":["v"]}');
 * const schemas = await loadSchemas(await settingsFrom({ stream: [`t=${dir}/t.json`] }));
 * deepStrictEqual([...schemas.keys()], ["t"]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function loadSchemas(s: Settings): Promise<Map<string, Record<string, unknown>>> {
  const schemas = new Map<string, Record<string, unknown>>();
  for (const [name, decl] of s.streams) schemas.set(name, await loadSchema(name, decl.schema));
  return schemas;
}

// The log options of a stream (`decl`: a declared one's, whose own
// retention wins over the server's; none for a followed stream).
function baseLogOptions(s: Settings, logger?: Logger, decl?: StreamDecl): LogOptions {
  const logOptions: LogOptions = logger ? { fsync: s.fsync, logger } : { fsync: s.fsync };
  if (s.segmentBytes !== undefined) logOptions.segmentBytes = s.segmentBytes;
  if (s.maxRowBytes !== undefined) logOptions.maxPayloadBytes = s.maxRowBytes;
  if (s.sealEvery !== undefined) logOptions.sealEveryMs = Math.round(s.sealEvery * 1000);
  if (s.maxProducers !== undefined) logOptions.maxProducers = s.maxProducers;
  const age = decl?.retainAge ?? s.retainAge;
  const bytes = decl?.retainBytes ?? s.retainBytes;
  if (age !== null || bytes !== null) {
    logOptions.chunks = {
      retainAgeMs: age === null ? null : Math.round(age * 1000),
      retainBytes: bytes,
    };
    // Retention runs at each seal and each maintenance: a stream that seals
    // often is maintained as often (from 1 s to the default 60 s), so that
    // a bound is applied within --seal-every + 60 s whether rows come or not.
    const sealMs = logOptions.sealEveryMs ?? DEFAULT_SEAL_EVERY_MS;
    logOptions.maintainEveryMs = Math.min(60_000, Math.max(1000, sealMs || 60_000));
  }
  if (s.maxProducerHolders !== undefined) logOptions.maxProducerHolders = s.maxProducerHolders;
  return logOptions;
}

/**
 * Opens the replica of every followed stream (`--follow NAME=URL`, see
 * docs/SPEC.md §10) and its mirror, not started; on a failure closes those
 * opened and throws a {@linkcode Fatal} (exit 1: the primary did not answer,
 * a log is locked…).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { openMirrors } from "./streams.ts";
 * import { settingsFrom } from "./config.ts";
 * import { Logger } from "../../common/logger.ts";
 * import { serve, Stream } from "../../mod.ts";
 * const tmp = await Deno.makeTempDir();
 * const primary = await Stream.open("ticks", {
 *   root: tmp,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([primary], { port: 0, onListen: () => {} });
 * const root = await Deno.makeTempDir();
 * const s = await settingsFrom({ follow: [`ticks=${server.url}/ticks`], root });
 * const { streams, mirrors } = await openMirrors(s, Logger.silent());
 * equal(mirrors.length, 1); // not started: `serve` starts them once it listens
 * equal(streams[0].name, "ticks");
 * await Promise.all(streams.map((st) => st.close()));
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * await Deno.remove(tmp, { recursive: true });
 * ```
 */
export async function openMirrors(
  s: Settings,
  logger: Logger,
): Promise<{ streams: Stream[]; mirrors: Mirror[] }> {
  const streams: Stream[] = [];
  const mirrors: Mirror[] = [];
  try {
    for (const [name, url] of s.follow) {
      try {
        const { stream, mirror } = await openMirror(name, url, {
          root: s.root,
          logOptions: baseLogOptions(s, logger),
          token: s.followToken,
          logger,
          pollMs: s.followPoll * 1000,
          retryMaxMs: s.followRetryMax * 1000,
          timeoutMs: s.followTimeout * 1000,
          maxManifestBytes: s.followMaxManifestBytes,
          startWaitMs: s.followStartWait * 1000,
          archive: s.archive,
          streamOptions: {
            minFreeBytes: s.minFreeBytes,
            ...(s.maxBacklog !== undefined ? { maxBacklog: s.maxBacklog } : {}),
            ...(s.maxReplay !== undefined ? { maxReplay: s.maxReplay } : {}),
            ...(s.maxSubscribers !== undefined ? { maxSubscribers: s.maxSubscribers } : {}),
            ...(s.stallTimeout !== undefined
              ? { stallTimeoutMs: Math.round(s.stallTimeout * 1000) }
              : {}),
            ...(s.followKeys.has(name) ? { key: s.followKeys.get(name) } : {}),
            ...(s.followKeys.has(name) && s.maxKeys !== undefined ? { maxKeys: s.maxKeys } : {}),
          },
        });
        streams.push(stream);
        mirrors.push(mirror);
      } catch (err) {
        throw new Fatal(`${show(name)}: ${oneLine(err)}`, 1);
      }
    }
  } catch (err) {
    await Promise.allSettled(streams.map((st) => st.close()));
    throw err;
  }
  return { streams, mirrors };
}

/**
 * The options of declared stream `decl` but its schema and root: its log's
 * (the log's own events — chunk worker, deletions — go through the server's
 * logger), its archive, its Iceberg table, its limits.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { streamOptionsOf } from "./streams.ts";
 * import { settingsFrom } from "./config.ts";
 * const s = await settingsFrom({ stream: ["t=t.json"], "max-backlog": "7" });
 * equal(streamOptionsOf(s, s.streams.get("t")!).maxBacklog, 7);
 * ```
 */
export function streamOptionsOf(
  s: Settings,
  decl: StreamDecl,
  logger?: Logger,
): Omit<StreamOptions, "schema"> {
  return {
    logOptions: baseLogOptions(s, logger, decl),
    ...(s.archive && !decl.ephemeral ? { archive: s.archive, replayArchive: s.replayArchive } : {}),
    ...(decl.ephemeral ? {} : { minFreeBytes: s.minFreeBytes }),
    ...(decl.iceberg
      ? {
        iceberg: s.icebergCommitBytes === undefined
          ? true
          : { maxCommitBytes: s.icebergCommitBytes },
      }
      : {}),
    ...(s.maxBacklog !== undefined ? { maxBacklog: s.maxBacklog } : {}),
    ...(s.maxReplay !== undefined ? { maxReplay: s.maxReplay } : {}),
    ...(s.maxSubscribers !== undefined ? { maxSubscribers: s.maxSubscribers } : {}),
    ...(s.stallTimeout !== undefined ? { stallTimeoutMs: Math.round(s.stallTimeout * 1000) } : {}),
    ...(decl.key ? { key: decl.key } : {}),
    ...(decl.key && s.maxKeys !== undefined ? { maxKeys: s.maxKeys } : {}),
  };
}

/**
 * Opens every declared stream (its log under `s.root` unless ephemeral); on
 * a failure closes those opened and throws a {@linkcode Fatal}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { loadSchemas, openStreams } from "./streams.ts";
 * import { settingsFrom } from "./config.ts";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/t.json`, '{"type":"object","properties":{"v":{"type":"number"}},"required":["v"]}');
 * const s = await settingsFrom({ stream: [`t=${dir}/t.json`], root: dir });
 * const streams = await openStreams(s, await loadSchemas(s));
 * await Promise.all(streams.map((st) => st.close()));
 * equal(streams.length, 1);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function openStreams(
  s: Settings,
  schemas: Map<string, Record<string, unknown>>,
  logger?: Logger,
): Promise<Stream[]> {
  const opened: Stream[] = [];
  try {
    for (const [name, decl] of s.streams) {
      try {
        opened.push(
          await Stream.open(name, {
            ...streamOptionsOf(s, decl, logger),
            schema: schemas.get(name)!,
            root: decl.ephemeral ? undefined : s.root,
          }),
        );
      } catch (err) {
        if (err instanceof LogLockedError || err instanceof LogCorruptError) {
          throw new Fatal(`${show(name)}: ${oneLine(err)}`, 1);
        }
        if (err instanceof RangeError) throw new Fatal(`${show(name)}: ${oneLine(err)}`, 2);
        throw new Fatal(`${show(name)}: cannot open its log under ${s.root}: ${oneLine(err)}`, 1);
      }
    }
  } catch (err) {
    await Promise.allSettled(opened.map((st) => st.close()));
    throw err;
  }
  return opened;
}
