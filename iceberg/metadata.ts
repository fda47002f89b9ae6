/**
 * The table metadata (`metadata/vN.metadata.json`, format version 2): a new
 * table's, and the next version's after an `append` commit — its snapshot
 * with the standard summary and the offsets it added
 * (`streamcast.first-offset`, `streamcast.last-offset`), the schemas of the
 * stream's schema history, bounded history lists.
 *
 * The table's `table-uuid` is the stream id, so a table is tied to one log
 * for life: a log wiped and made again (a new stream id, offsets from 1)
 * never appends to the old table.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { PARTITION_FIELD_ID } from "./avro_schemas.ts";
import { PARTITION_SPEC } from "./manifests.ts";
import type { IcebergSchema } from "./schema.ts";

/**
 * Snapshots kept in the metadata (older ones are expired from it).
 */
export const KEPT_SNAPSHOTS = 100;
/**
 * Earlier metadata files listed in `metadata-log` (older ones are deleted).
 */
export const KEPT_METADATA_FILES = 100;
/**
 * The snapshot summary key of the first offset a snapshot added.
 */
export const FIRST_OFFSET_KEY = "streamcast.first-offset";
/**
 * The snapshot summary key of the last offset a snapshot added.
 */
export const LAST_OFFSET_KEY = "streamcast.last-offset";

/**
 * A snapshot (JSON form).
 */
export interface Snapshot {
  "snapshot-id": number;
  "parent-snapshot-id"?: number;
  "sequence-number": number;
  "timestamp-ms": number;
  "manifest-list": string;
  summary: Record<string, string>;
  "schema-id": number;
}

/**
 * Table metadata (JSON form): the fields this writer reads and writes; any
 * others are kept as they are.
 */
export interface TableMetadata {
  "format-version": 2;
  "table-uuid": string;
  location: string;
  "last-sequence-number": number;
  "last-updated-ms": number;
  "last-column-id": number;
  "current-schema-id": number;
  schemas: IcebergSchema[];
  "default-spec-id": number;
  "partition-specs": unknown[];
  "last-partition-id": number;
  "default-sort-order-id": number;
  "sort-orders": unknown[];
  properties: Record<string, string>;
  "current-snapshot-id"?: number;
  refs: Record<string, { "snapshot-id": number; type: string }>;
  snapshots: Snapshot[];
  "snapshot-log": { "snapshot-id": number; "timestamp-ms": number }[];
  "metadata-log": { "metadata-file": string; "timestamp-ms": number }[];
  [key: string]: unknown;
}

/**
 * A stream id (32 hex digits) as a UUID, the table's `table-uuid`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { tableUuid } from "./metadata.ts";
 * equal(tableUuid("0123456789abcdef0123456789abcdef"), "01234567-89ab-cdef-0123-456789abcdef");
 * ```
 */
export function tableUuid(streamId: string): string {
  const h = streamId.toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(h)) {
    throw new TypeError(`a stream id is 32 hex digits, got ${streamId}`);
  }
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * The metadata of a new, empty table at `location`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { newTable } from "./metadata.ts";
 * import { tableSchemas } from "./schema.ts";
 * const schemas = tableSchemas([{ type: "object", properties: { n: { type: "integer" } }, required: ["n"] }]);
 * const m = newTable("file:///data/t/iceberg", "trades", "0123456789abcdef0123456789abcdef", schemas, 1);
 * equal(m["format-version"], 2);
 * equal(m["last-column-id"], 3);
 * equal(m.snapshots.length, 0);
 * ```
 */
export function newTable(
  location: string,
  stream: string,
  streamId: string,
  schemas: { schemas: IcebergSchema[]; lastColumnId: number },
  nowMs: number,
): TableMetadata {
  return {
    "format-version": 2,
    "table-uuid": tableUuid(streamId),
    location,
    "last-sequence-number": 0,
    "last-updated-ms": nowMs,
    "last-column-id": schemas.lastColumnId,
    "current-schema-id": schemas.schemas.length - 1,
    schemas: schemas.schemas,
    "default-spec-id": 0,
    "partition-specs": [PARTITION_SPEC],
    "last-partition-id": PARTITION_FIELD_ID,
    "default-sort-order-id": 0,
    "sort-orders": [{ "order-id": 0, fields: [] }],
    properties: {
      "write.format.default": "parquet",
      "write.parquet.compression-codec": "zstd",
      "streamcast.stream": stream,
    },
    refs: {},
    snapshots: [],
    "snapshot-log": [],
    "metadata-log": [],
  };
}

/**
 * The current snapshot, or null for an empty table.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { currentSnapshot, newTable } from "./metadata.ts";
 * import { tableSchemas } from "./schema.ts";
 * const schemas = tableSchemas([{ type: "object", properties: { n: { type: "integer" } }, required: ["n"] }]);
 * equal(currentSnapshot(newTable("file:///t", "t", "0".repeat(32), schemas, 1)), null);
 * ```
 */
export function currentSnapshot(m: TableMetadata): Snapshot | null {
  const id = m["current-snapshot-id"];
  if (id === undefined || id === null || id === -1) return null;
  const s = m.snapshots.find((x) => x["snapshot-id"] === id);
  if (!s) throw new Error(`table metadata: current snapshot ${id} is not in "snapshots"`);
  return s;
}

/**
 * The last offset the table holds: `streamcast.last-offset` of the current
 * snapshot (0 for an empty table).
 *
 * @throws {Error} If the current snapshot does not say (another writer's).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { lastOffset, newTable } from "./metadata.ts";
 * import { tableSchemas } from "./schema.ts";
 * const schemas = tableSchemas([{ type: "object", properties: { n: { type: "integer" } }, required: ["n"] }]);
 * equal(lastOffset(newTable("file:///t", "t", "0".repeat(32), schemas, 1)), 0);
 * ```
 */
export function lastOffset(m: TableMetadata): number {
  const s = currentSnapshot(m);
  if (s === null) return 0;
  const v = Number(s.summary?.[LAST_OFFSET_KEY]);
  if (!Number.isSafeInteger(v) || v < 0) {
    throw new Error(
      `the current snapshot ${s["snapshot-id"]} of ${m.location} has no ${LAST_OFFSET_KEY} ` +
        "in its summary: it was not committed by streamcast, which is the table's only writer",
    );
  }
  return v;
}

/**
 * A snapshot id for the commit of offsets `first`..`last` of stream
 * `streamId`: positive, below 2^53, the same for the same commit.
 *
 * @example
 * ```ts
 * import { equal, notEqual } from "node:assert/strict";
 * import { snapshotId } from "./metadata.ts";
 * equal(snapshotId("ab", 1, 10), snapshotId("ab", 1, 10));
 * notEqual(snapshotId("ab", 1, 10), snapshotId("ab", 11, 20));
 * for (let last = 1; last < 2000; last++) {
 *   const id = snapshotId("0123456789abcdef0123456789abcdef", 1, last);
 *   equal(id > 0 && id <= 2 ** 52 + 1 && Number.isSafeInteger(id), true);
 * }
 * ```
 */
export function snapshotId(streamId: string, first: number, last: number): number {
  const d = createHash("sha256").update(`${streamId}:${first}:${last}`).digest();
  // 52 bits (48 + 4), plus one: positive, never 0, always a safe integer. No
  // bitwise operator on the 48 bits: it would cut them to a signed 32-bit int.
  return d.readUIntBE(0, 6) + (d[6] & 0x0f) * 2 ** 48 + 1;
}

/**
 * What an append commit adds: its snapshot's id, files and counts.
 */
export interface AppendCommit {
  snapshotId: number;
  manifestList: string;
  firstOffset: number;
  lastOffset: number;
  addedFiles: number;
  addedRecords: number;
  addedBytes: number;
  changedPartitions: number;
  nowMs: number;
}

/**
 * The table's schemas merged with the stream's (the same ids for the same
 * versions; versions the table lacks are added, the last made current).
 *
 * @throws {Error} If a schema id the table has differs from the stream's.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { newTable, withSchemas } from "./metadata.ts";
 * import { tableSchemas } from "./schema.ts";
 * const v1 = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
 * const v2 = { ...v1, properties: { ...v1.properties, m: { type: ["string", "null"] } }, required: ["n", "m"] };
 * const m = newTable("file:///t", "t", "0".repeat(32), tableSchemas([v1]), 1);
 * const next = withSchemas(m, tableSchemas([v1, v2]));
 * equal(next["current-schema-id"], 1);
 * equal(next["last-column-id"], 4);
 * ```
 */
export function withSchemas(
  m: TableMetadata,
  schemas: { schemas: IcebergSchema[]; lastColumnId: number },
): TableMetadata {
  const out = [...m.schemas];
  for (const s of schemas.schemas) {
    const have = out.find((x) => x["schema-id"] === s["schema-id"]);
    if (have === undefined) out.push(s);
    else if (JSON.stringify(have.fields) !== JSON.stringify(s.fields)) {
      throw new Error(
        `table ${m.location}: schema ${s["schema-id"]} is not the stream's schema version ` +
          `${s["schema-id"]} (was the table made for another stream?)`,
      );
    }
  }
  const current = schemas.schemas.length - 1;
  return {
    ...m,
    schemas: out,
    "current-schema-id": Math.max(m["current-schema-id"], current),
    "last-column-id": Math.max(m["last-column-id"], schemas.lastColumnId),
  };
}

function sumOf(summary: Record<string, string> | undefined, key: string): number {
  const v = Number(summary?.[key] ?? 0);
  return Number.isFinite(v) ? v : 0;
}

/**
 * The next version's metadata: `m` with the append's snapshot made current
 * (and the previous metadata file, `previousFile`, in the metadata log).
 * Snapshots past {@linkcode KEPT_SNAPSHOTS} and metadata log entries past
 * {@linkcode KEPT_METADATA_FILES} are dropped; `expired` lists the manifest
 * lists and metadata files no longer referenced, for deletion.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { appendSnapshot, lastOffset, newTable } from "./metadata.ts";
 * import { tableSchemas } from "./schema.ts";
 * const schemas = tableSchemas([{ type: "object", properties: { n: { type: "integer" } }, required: ["n"] }]);
 * const m = newTable("file:///t", "t", "0".repeat(32), schemas, 1);
 * const { metadata } = appendSnapshot(m, "file:///t/metadata/v1.metadata.json", {
 *   snapshotId: 7, manifestList: "file:///t/metadata/snap-7.avro", firstOffset: 1, lastOffset: 9,
 *   addedFiles: 1, addedRecords: 9, addedBytes: 900, changedPartitions: 1, nowMs: 2,
 * });
 * equal(lastOffset(metadata), 9);
 * equal(metadata.snapshots[0].summary["total-records"], "9");
 * equal(metadata["last-sequence-number"], 1);
 * ```
 */
export function appendSnapshot(
  m: TableMetadata,
  previousFile: string,
  c: AppendCommit,
): { metadata: TableMetadata; expired: string[] } {
  const parent = currentSnapshot(m);
  const seq = m["last-sequence-number"] + 1;
  const total = (key: string, added: number) => String(sumOf(parent?.summary, key) + added);
  const snapshot: Snapshot = {
    "sequence-number": seq,
    "snapshot-id": c.snapshotId,
    ...(parent ? { "parent-snapshot-id": parent["snapshot-id"] } : {}),
    "timestamp-ms": c.nowMs,
    "manifest-list": c.manifestList,
    summary: {
      operation: "append",
      "added-data-files": String(c.addedFiles),
      "added-records": String(c.addedRecords),
      "added-files-size": String(c.addedBytes),
      "changed-partition-count": String(c.changedPartitions),
      "total-records": total("total-records", c.addedRecords),
      "total-files-size": total("total-files-size", c.addedBytes),
      "total-data-files": total("total-data-files", c.addedFiles),
      "total-delete-files": "0",
      "total-position-deletes": "0",
      "total-equality-deletes": "0",
      [FIRST_OFFSET_KEY]: String(c.firstOffset),
      [LAST_OFFSET_KEY]: String(c.lastOffset),
    },
    "schema-id": m["current-schema-id"],
  };
  const snapshots = [...m.snapshots, snapshot];
  const dropped = snapshots.splice(0, Math.max(0, snapshots.length - KEPT_SNAPSHOTS));
  const kept = new Set(snapshots.map((s) => s["snapshot-id"]));
  const log = [...m["metadata-log"], {
    "metadata-file": previousFile,
    "timestamp-ms": m["last-updated-ms"],
  }];
  const oldFiles = log.splice(0, Math.max(0, log.length - KEPT_METADATA_FILES));
  return {
    metadata: {
      ...m,
      "last-sequence-number": seq,
      "last-updated-ms": c.nowMs,
      "current-snapshot-id": c.snapshotId,
      refs: { ...m.refs, main: { "snapshot-id": c.snapshotId, type: "branch" } },
      snapshots,
      "snapshot-log": [
        ...m["snapshot-log"].filter((e) => kept.has(e["snapshot-id"])),
        { "snapshot-id": c.snapshotId, "timestamp-ms": c.nowMs },
      ],
      "metadata-log": log,
    },
    expired: [
      ...dropped.map((s) => s["manifest-list"]),
      ...oldFiles.map((e) => e["metadata-file"]),
    ],
  };
}

/**
 * The metadata file name of version `n`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { metadataFileName } from "./metadata.ts";
 * equal(metadataFileName(3), "v3.metadata.json");
 * ```
 */
export function metadataFileName(n: number): string {
  return `v${n}.metadata.json`;
}

/**
 * Parses a metadata file's text, checking what this writer relies on.
 *
 * @throws {Error} For text that is not v2 table metadata (naming `where`).
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { parseMetadata } from "./metadata.ts";
 * throws(() => parseMetadata('{"format-version":1}', "v1.metadata.json"), /format-version 1/);
 * ```
 */
export function parseMetadata(text: string, where: string): TableMetadata {
  let m: TableMetadata;
  try {
    m = JSON.parse(text);
  } catch (err) {
    throw new Error(`${where} is not JSON: ${(err as Error).message}`);
  }
  if (typeof m !== "object" || m === null || Array.isArray(m)) {
    throw new Error(`${where} is not a JSON object`);
  }
  if (m["format-version"] !== 2) {
    throw new Error(
      `${where} has format-version ${m["format-version"]}; streamcast writes version 2 tables`,
    );
  }
  for (const key of ["schemas", "snapshots", "snapshot-log", "metadata-log"] as const) {
    m[key] ??= [] as never;
    if (!Array.isArray(m[key])) throw new Error(`${where}: "${key}" is not a list`);
  }
  m.refs ??= {};
  m.properties ??= {};
  return m;
}
