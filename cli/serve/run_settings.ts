/**
 * What `serve` runs with once its flags and config file are read and merged:
 * the declared streams and upstreams, and the whole {@linkcode Settings}
 * object whose scalar fields are named by the settings table's config keys.
 *
 * @module
 */

import type { LogFormat, LogLevel } from "../../common/logger.ts";
import type { ArchiveOptions } from "../../log/mod.ts";

/**
 * A stream's schema: the path of its file, or an inline schema from the config.
 */
export type SchemaSource = { path: string } | { inline: Record<string, unknown>; where: string };

/**
 * A declared stream.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import type { StreamDecl } from "./run_settings.ts";
 * import { settingsFrom } from "./config.ts";
 * const s = await settingsFrom({ stream: ["book=book.json"], ephemeral: ["book"] });
 * const decl: StreamDecl | undefined = s.streams.get("book");
 * deepStrictEqual(decl, { schema: { path: "book.json" }, ephemeral: true, publish: false });
 * ```
 */
export interface StreamDecl {
  schema: SchemaSource;
  ephemeral: boolean;
  /** Opened for network publishing (`--publish`, config `"publish": true`). */
  publish?: boolean;
  /** Keeps an Iceberg table (`--iceberg`, config `"iceberg": true`). */
  iceberg?: boolean;
  /** A keyed stream's key columns (`--key NAME=COL,…`, config `"key": [COL, …]`). */
  key?: string[];
  /** Its own retention age, seconds (config `"retainAge"`; absent: the server's). */
  retainAge?: number;
  /** Its own retention size, bytes (config `"retainBytes"`; absent: the server's). */
  retainBytes?: number;
}

/**
 * A stream's upstream.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import type { UpstreamDecl } from "./run_settings.ts";
 * import { settingsFrom } from "./config.ts";
 * const s = await settingsFrom({
 *   stream: ["book=book.json"],
 *   upstream: ["book=wss://feed.example/book"],
 * });
 * const up: UpstreamDecl | undefined = s.upstreams.get("book");
 * deepStrictEqual(up, { url: "wss://feed.example/book", handler: null }); // the default handler
 * ```
 */
export interface UpstreamDecl {
  url: string;
  /** This upstream's own handler module, or null for the default one. */
  handler: string | null;
}

/**
 * Everything `serve` runs with, after the config file and the flags are
 * merged. The scalar fields are named by their config keys in the settings table (`SETTINGS`, `settings.ts`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { Settings } from "./run_settings.ts";
 * import { settingsFrom } from "./config.ts";
 * const where = (s: Settings): string => `${s.host}:${s.port}`;
 * equal(where(await settingsFrom({ stream: ["t=t.json"], port: "9000" })), "127.0.0.1:9000");
 * ```
 */
export interface Settings {
  root: string;
  host: string;
  port: number;
  streams: Map<string, StreamDecl>;
  stdin: string | null;
  upstreams: Map<string, UpstreamDecl>;
  handler: string | null;
  maxBacklog?: number;
  maxReplay?: number | null;
  segmentBytes?: number;
  /** Seconds. */
  sealEvery?: number;
  /** Retention by age, seconds (null: none). */
  retainAge: number | null;
  /** Retention by size, bytes of local history per stream (null: none). */
  retainBytes: number | null;
  /** Free space under which durable streams take no rows, bytes. */
  minFreeBytes: number;
  fsync: boolean;
  /** Seconds. */
  pingInterval?: number;
  /** Seconds. */
  mallocTrimEvery?: number;
  archive: ArchiveOptions | null;
  replayArchive: boolean;
  maxConnections?: number;
  maxStreams?: number;
  maxSubscribers?: number;
  maxUrlBytes?: number;
  maxRowBytes?: number;
  maxReplayReaders?: number;
  sendBufferBytes?: number;
  fanoutTurnBytes?: number;
  compressFrameBytes?: number;
  /** Seconds. */
  stallTimeout?: number;
  maxPublishBytes?: number;
  maxInFlight?: number;
  maxPublishInflightBytes?: number;
  maxPublishServerBytes?: number;
  /** Seconds. */
  publishBodyTimeout?: number;
  maxProducers?: number;
  maxProducerHolders?: number;
  icebergCommitBytes?: number;
  maxKeys?: number;
  /** The tokens file, or null for no access control. */
  tokens: string | null;
  /** Signed tokens' public keys (a JWKS or PEM), or null. */
  jwtKeys: string | null;
  /** Signed tokens' HS256 secret, or null. */
  jwtSecretFile: string | null;
  jwtIssuer: string | null;
  jwtAudience: string | null;
  maxTokenBytes?: number;
  tlsCert: string | null;
  tlsKey: string | null;
  logLevel: LogLevel;
  logFormat: LogFormat;
  // Mirrors (follow_settings.ts): followed stream → primary URL.
  follow: Map<string, string>;
  /** A followed stream's key columns (`--key NAME=…` naming it): its mirror keeps its own index. */
  followKeys: Map<string, string[]>;
  followToken: string | null;
  /** Seconds. */
  followPoll: number;
  /** Seconds. */
  followRetryMax: number;
  /** Seconds. */
  followTimeout: number;
  followMaxManifestBytes: number;
  /** Seconds. */
  followStartWait: number;
  // A cluster (cluster_settings.ts): etcd endpoints, comma-separated, or null.
  cluster: string | null;
  node: string | null;
  /** `http://HOST:PORT`, or null for the listening address. */
  advertise: string | null;
  replicas: number;
  /** Whole seconds. */
  leaseSeconds: number;
  replicaLagMs: number;
  /** Bytes of recent commits a leader keeps for its followers. */
  replicaRingBytes: number;
  clusterPrefix: string;
  clusterToken: string | null;
  /** Replication sockets open at once on this node. */
  maxReplicaLinks: number;
}
