/**
 * The table's manifests and manifest lists: what a manifest entry says
 * about a data file (partition, counts, the bounds of the offset and time
 * columns), and the files themselves, written and read as Avro with the
 * schemas of `avro_schemas.ts`.
 *
 * New entries leave their sequence numbers null (inherited from the
 * manifest list, as the spec's sequence-number inheritance says), so a
 * manifest written for a commit is valid whatever number the commit gets.
 * Entries copied into a merged manifest (status EXISTING) carry theirs.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { readAvro, writeAvro } from "./avro_file.ts";
import {
  MANIFEST_ENTRY_SCHEMA,
  MANIFEST_FILE_SCHEMA,
  PARTITION_FIELD,
  PARTITION_FIELD_ID,
} from "./avro_schemas.ts";
import type { IcebergSchema } from "./schema.ts";

/**
 * The table's partition spec (JSON form): `day(streamcast_time)`.
 */
export const PARTITION_SPEC = {
  "spec-id": 0,
  fields: [{
    "source-id": 2,
    "field-id": PARTITION_FIELD_ID,
    name: PARTITION_FIELD,
    transform: "day",
  }],
} as const;

/**
 * Manifest entry status: the file was added by the entry's snapshot.
 */
export const ADDED = 1;
/**
 * Manifest entry status: the file was added by an earlier snapshot.
 */
export const EXISTING = 0;

/**
 * A data file of the table, as its manifest entry describes it.
 */
export interface DataFile {
  /** Its absolute URI. */
  path: string;
  /** Its partition: days since 1970-01-01 of its rows' `streamcast_time`. */
  day: number;
  /** Rows. */
  rows: number;
  /** Size in bytes. */
  bytes: number;
  /** Its first and last offsets (the bounds of field 1). */
  firstOffset: number;
  /** @see firstOffset */
  lastOffset: number;
  /** Its first and last append times, µs (the bounds of field 2). */
  firstTimeUs: number;
  /** @see firstTimeUs */
  lastTimeUs: number;
}

/**
 * One record of a manifest (`manifest_entry`), as Avro holds it.
 */
export interface ManifestEntry {
  /** 0 EXISTING, 1 ADDED, 2 DELETED. */
  status: number;
  /** The snapshot that added the file (null: inherited). */
  snapshot_id: number | null;
  /** The file's data sequence number (null: inherited). */
  sequence_number: number | null;
  /** The file's file sequence number (null: inherited). */
  file_sequence_number: number | null;
  /** The data file. */
  data_file: Record<string, unknown> & { record_count: number; file_path: string };
}

/**
 * One record of a manifest list (`manifest_file`), as Avro holds it.
 */
export interface ManifestFile {
  manifest_path: string;
  manifest_length: number;
  partition_spec_id: number;
  content: number;
  sequence_number: number;
  min_sequence_number: number;
  added_snapshot_id: number;
  added_files_count: number;
  existing_files_count: number;
  deleted_files_count: number;
  added_rows_count: number;
  existing_rows_count: number;
  deleted_rows_count: number;
  partitions: {
    contains_null: boolean;
    contains_nan: boolean | null;
    lower_bound: Uint8Array | null;
    upper_bound: Uint8Array | null;
  }[] | null;
  key_metadata: Uint8Array | null;
}

/**
 * A long as the spec's single-value serialization writes it: 8 bytes, little-endian.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { longBytes } from "./manifests.ts";
 * deepEqual([...longBytes(258)], [2, 1, 0, 0, 0, 0, 0, 0]);
 * ```
 */
export function longBytes(v: number): Uint8Array {
  // A Buffer: the Avro library takes bytes values as Buffers.
  const b = Buffer.alloc(8);
  b.writeBigInt64LE(BigInt(v));
  return b;
}

/**
 * An int (or a date) as the single-value serialization writes it: 4 bytes, little-endian.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { intBytes } from "./manifests.ts";
 * deepEqual([...intBytes(20000)], [32, 78, 0, 0]);
 * ```
 */
export function intBytes(v: number): Uint8Array {
  const b = Buffer.alloc(4);
  b.writeInt32LE(v);
  return b;
}

// Sync markers from the file's name: the same file is the same bytes.
function syncMarker(name: string): Uint8Array {
  return createHash("sha256").update(name).digest().subarray(0, 16);
}

/**
 * The manifest entry of a data file added by `snapshotId`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { addedEntry } from "./manifests.ts";
 * const e = addedEntry({
 *   path: "file:///t/data/a.parquet", day: 1, rows: 3, bytes: 10,
 *   firstOffset: 1, lastOffset: 3, firstTimeUs: 5, lastTimeUs: 9,
 * }, 42);
 * equal(e.data_file.record_count, 3);
 * equal(e.sequence_number, null);
 * ```
 */
export function addedEntry(f: DataFile, snapshotId: number): ManifestEntry {
  const counts = (v: number) => [{ key: 1, value: v }, { key: 2, value: v }];
  return {
    status: ADDED,
    snapshot_id: snapshotId,
    sequence_number: null,
    file_sequence_number: null,
    data_file: {
      content: 0,
      file_path: f.path,
      file_format: "PARQUET",
      partition: { [PARTITION_FIELD]: f.day },
      record_count: f.rows,
      file_size_in_bytes: f.bytes,
      column_sizes: null,
      value_counts: counts(f.rows),
      null_value_counts: counts(0),
      nan_value_counts: null,
      lower_bounds: [
        { key: 1, value: longBytes(f.firstOffset) },
        { key: 2, value: longBytes(f.firstTimeUs) },
      ],
      upper_bounds: [
        { key: 1, value: longBytes(f.lastOffset) },
        { key: 2, value: longBytes(f.lastTimeUs) },
      ],
      key_metadata: null,
      split_offsets: null,
      equality_ids: null,
      sort_order_id: null,
    },
  };
}

function dayOf(entry: ManifestEntry): number | null {
  const p = entry.data_file.partition as Record<string, number | null> | undefined;
  return p?.[PARTITION_FIELD] ?? null;
}

/**
 * Writes a manifest holding `entries`, whose files were written with `schema`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { addedEntry, readManifest, writeManifest } from "./manifests.ts";
 * import { tableSchemas } from "./schema.ts";
 * const { schemas } = tableSchemas([{ type: "object", properties: { n: { type: "integer" } }, required: ["n"] }]);
 * const entry = addedEntry({
 *   path: "file:///t/data/a.parquet", day: 1, rows: 3, bytes: 10,
 *   firstOffset: 1, lastOffset: 3, firstTimeUs: 5, lastTimeUs: 9,
 * }, 42);
 * const bytes = await writeManifest("m.avro", schemas[0], [entry]);
 * const back = await readManifest(bytes);
 * equal(back.entries[0].data_file.file_path, "file:///t/data/a.parquet");
 * equal(back.metadata["partition-spec-id"], "0");
 * ```
 */
export function writeManifest(
  name: string,
  schema: IcebergSchema,
  entries: readonly ManifestEntry[],
): Promise<Uint8Array> {
  return writeAvro(MANIFEST_ENTRY_SCHEMA, entries as never, {
    schema: JSON.stringify(schema),
    "schema-id": String(schema["schema-id"]),
    "partition-spec": JSON.stringify(PARTITION_SPEC.fields),
    "partition-spec-id": "0",
    "format-version": "2",
    content: "data",
  }, syncMarker(name));
}

/**
 * A manifest's entries and header metadata.
 *
 * @example
 * ```ts
 * import { rejects } from "node:assert/strict";
 * import { readManifest } from "./manifests.ts";
 * await rejects(readManifest(new Uint8Array(4)));
 * ```
 */
export async function readManifest(
  bytes: Uint8Array,
): Promise<{ entries: ManifestEntry[]; metadata: Record<string, string> }> {
  const file = await readAvro(bytes);
  return { entries: file.records as unknown as ManifestEntry[], metadata: file.metadata };
}

/**
 * The manifest list record of a manifest written for snapshot `snapshotId`
 * with sequence number `sequence`: its `entries` are either all added by
 * that snapshot, or all existing (a merge of older manifests).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { addedEntry, listRecord } from "./manifests.ts";
 * const entry = addedEntry({
 *   path: "file:///t/data/a.parquet", day: 1, rows: 3, bytes: 10,
 *   firstOffset: 1, lastOffset: 3, firstTimeUs: 5, lastTimeUs: 9,
 * }, 42);
 * const r = listRecord("file:///t/metadata/m.avro", 900, [entry], 42, 7);
 * equal(r.added_rows_count, 3);
 * equal(r.min_sequence_number, 7);
 * ```
 */
export function listRecord(
  path: string,
  length: number,
  entries: readonly ManifestEntry[],
  snapshotId: number,
  sequence: number,
): ManifestFile {
  let added = 0;
  let existing = 0;
  let addedRows = 0;
  let existingRows = 0;
  let minSeq = sequence;
  let lo: number | null = null;
  let hi: number | null = null;
  let nulls = false;
  for (const e of entries) {
    if (e.status === ADDED) {
      added++;
      addedRows += e.data_file.record_count;
    } else {
      existing++;
      existingRows += e.data_file.record_count;
    }
    if (e.sequence_number !== null) minSeq = Math.min(minSeq, e.sequence_number);
    const day = dayOf(e);
    if (day === null) nulls = true;
    else {
      lo = lo === null ? day : Math.min(lo, day);
      hi = hi === null ? day : Math.max(hi, day);
    }
  }
  return {
    manifest_path: path,
    manifest_length: length,
    partition_spec_id: 0,
    content: 0,
    sequence_number: sequence,
    min_sequence_number: minSeq,
    added_snapshot_id: snapshotId,
    added_files_count: added,
    existing_files_count: existing,
    deleted_files_count: 0,
    added_rows_count: addedRows,
    existing_rows_count: existingRows,
    deleted_rows_count: 0,
    partitions: [{
      contains_null: nulls,
      contains_nan: false,
      lower_bound: lo === null ? null : intBytes(lo),
      upper_bound: hi === null ? null : intBytes(hi),
    }],
    key_metadata: null,
  };
}

/**
 * Writes a manifest list for snapshot `snapshotId` (child of `parentId`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readManifestList, writeManifestList } from "./manifests.ts";
 * const bytes = await writeManifestList("snap.avro", [], 42, null, 1);
 * const back = await readManifestList(bytes);
 * equal(back.records.length, 0);
 * equal(back.metadata["parent-snapshot-id"], "null");
 * ```
 */
export function writeManifestList(
  name: string,
  records: readonly ManifestFile[],
  snapshotId: number,
  parentId: number | null,
  sequence: number,
): Promise<Uint8Array> {
  return writeAvro(MANIFEST_FILE_SCHEMA, records as never, {
    "snapshot-id": String(snapshotId),
    "parent-snapshot-id": parentId === null ? "null" : String(parentId),
    "sequence-number": String(sequence),
    "format-version": "2",
  }, syncMarker(name));
}

/**
 * A manifest list's records and header metadata.
 *
 * @example
 * ```ts
 * import { rejects } from "node:assert/strict";
 * import { readManifestList } from "./manifests.ts";
 * await rejects(readManifestList(new Uint8Array(4)));
 * ```
 */
export async function readManifestList(
  bytes: Uint8Array,
): Promise<{ records: ManifestFile[]; metadata: Record<string, string> }> {
  const file = await readAvro(bytes);
  return { records: file.records as unknown as ManifestFile[], metadata: file.metadata };
}

/**
 * `entries` of a manifest listed as `listed`, as a merged manifest carries
 * them: status EXISTING, with the snapshot and sequence numbers they
 * inherited written out.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { addedEntry, asExisting } from "./manifests.ts";
 * const e = addedEntry({
 *   path: "file:///t/a.parquet", day: 1, rows: 3, bytes: 10,
 *   firstOffset: 1, lastOffset: 3, firstTimeUs: 5, lastTimeUs: 9,
 * }, 42);
 * const [x] = asExisting([e], { sequence_number: 4, added_snapshot_id: 42 });
 * equal(x.status, 0);
 * equal(x.sequence_number, 4);
 * ```
 */
export function asExisting(
  entries: readonly ManifestEntry[],
  listed: Pick<ManifestFile, "sequence_number" | "added_snapshot_id">,
): ManifestEntry[] {
  return entries.filter((e) => e.status !== 2).map((e) => ({
    ...e,
    status: EXISTING,
    snapshot_id: e.snapshot_id ?? listed.added_snapshot_id,
    sequence_number: e.sequence_number ?? listed.sequence_number,
    file_sequence_number: e.file_sequence_number ?? listed.sequence_number,
  }));
}
