/**
 * The Avro schemas of an Iceberg (format version 2) manifest — a
 * `manifest_entry` per data file — and of a manifest list — a
 * `manifest_file` per manifest — with the spec's field ids, for a table
 * partitioned by `day(streamcast_time)`.
 *
 * ```text
 * manifest_entry                          manifest_file
 *   0 status            int                 500 manifest_path        string
 *   1 snapshot_id       long?               501 manifest_length      long
 *   3 sequence_number   long?               502 partition_spec_id    int
 *   4 file_sequence_number long?            517 content              int
 *   2 data_file                             515 sequence_number      long
 *     134 content       int                 516 min_sequence_number  long
 *     100 file_path     string              503 added_snapshot_id    long
 *     101 file_format   string              504 added_files_count    int
 *     102 partition {1000 streamcast_time_day date?}   505 existing_files_count int
 *     103 record_count  long                506 deleted_files_count  int
 *     104 file_size_in_bytes long           512 added_rows_count     long
 *     108 column_sizes  map<117 int,118 long>?   513 existing_rows_count long
 *     109 value_counts  map<119 int,120 long>?   514 deleted_rows_count long
 *     110 null_value_counts map<121,122>?   507 partitions list<508 field_summary>?
 *     137 nan_value_counts  map<138,139>?         509 contains_null  boolean
 *     125 lower_bounds  map<126 int,127 binary>?  518 contains_nan   boolean?
 *     128 upper_bounds  map<129 int,130 binary>?  510 lower_bound    binary?
 *     131 key_metadata  binary?                   511 upper_bound    binary?
 *     132 split_offsets list<133 long>?     519 key_metadata         binary?
 *     135 equality_ids  list<136 int>?
 *     140 sort_order_id int?
 * ```
 *
 * Maps with int keys are Avro arrays of key/value records with the logical
 * type `map`, as the spec's Appendix A says.
 *
 * @module
 */

import type { AvroSchema } from "./avro_file.ts";

/**
 * The partition field's id (the first partition field id, as Iceberg assigns them).
 */
export const PARTITION_FIELD_ID = 1000;
/**
 * The partition field's name.
 */
export const PARTITION_FIELD = "streamcast_time_day";

function optional(type: unknown, name: string, id: number): Record<string, unknown> {
  return { name, type: ["null", type], default: null, "field-id": id };
}

function intMap(name: string, id: number, keyId: number, valueId: number, value: string) {
  return optional(
    {
      type: "array",
      logicalType: "map",
      items: {
        type: "record",
        name: `k${keyId}_v${valueId}`,
        fields: [
          { name: "key", type: "int", "field-id": keyId },
          { name: "value", type: value, "field-id": valueId },
        ],
      },
    },
    name,
    id,
  );
}

/**
 * The Avro schema of a manifest's records (`manifest_entry`).
 */
export const MANIFEST_ENTRY_SCHEMA: AvroSchema = {
  type: "record",
  name: "manifest_entry",
  fields: [
    { name: "status", type: "int", "field-id": 0 },
    optional("long", "snapshot_id", 1),
    optional("long", "sequence_number", 3),
    optional("long", "file_sequence_number", 4),
    {
      name: "data_file",
      "field-id": 2,
      type: {
        type: "record",
        name: "r2",
        fields: [
          { name: "content", type: "int", "field-id": 134 },
          { name: "file_path", type: "string", "field-id": 100 },
          { name: "file_format", type: "string", "field-id": 101 },
          {
            name: "partition",
            "field-id": 102,
            type: {
              type: "record",
              name: "r102",
              fields: [
                optional({ type: "int", logicalType: "date" }, PARTITION_FIELD, PARTITION_FIELD_ID),
              ],
            },
          },
          { name: "record_count", type: "long", "field-id": 103 },
          { name: "file_size_in_bytes", type: "long", "field-id": 104 },
          intMap("column_sizes", 108, 117, 118, "long"),
          intMap("value_counts", 109, 119, 120, "long"),
          intMap("null_value_counts", 110, 121, 122, "long"),
          intMap("nan_value_counts", 137, 138, 139, "long"),
          intMap("lower_bounds", 125, 126, 127, "bytes"),
          intMap("upper_bounds", 128, 129, 130, "bytes"),
          optional("bytes", "key_metadata", 131),
          optional({ type: "array", items: "long", "element-id": 133 }, "split_offsets", 132),
          optional({ type: "array", items: "int", "element-id": 136 }, "equality_ids", 135),
          optional("int", "sort_order_id", 140),
        ],
      },
    },
  ],
};

/**
 * The Avro schema of a manifest list's records (`manifest_file`).
 */
export const MANIFEST_FILE_SCHEMA: AvroSchema = {
  type: "record",
  name: "manifest_file",
  fields: [
    { name: "manifest_path", type: "string", "field-id": 500 },
    { name: "manifest_length", type: "long", "field-id": 501 },
    { name: "partition_spec_id", type: "int", "field-id": 502 },
    { name: "content", type: "int", "field-id": 517 },
    { name: "sequence_number", type: "long", "field-id": 515 },
    { name: "min_sequence_number", type: "long", "field-id": 516 },
    { name: "added_snapshot_id", type: "long", "field-id": 503 },
    { name: "added_files_count", type: "int", "field-id": 504 },
    { name: "existing_files_count", type: "int", "field-id": 505 },
    { name: "deleted_files_count", type: "int", "field-id": 506 },
    { name: "added_rows_count", type: "long", "field-id": 512 },
    { name: "existing_rows_count", type: "long", "field-id": 513 },
    { name: "deleted_rows_count", type: "long", "field-id": 514 },
    optional(
      {
        type: "array",
        "element-id": 508,
        items: {
          type: "record",
          name: "r508",
          fields: [
            { name: "contains_null", type: "boolean", "field-id": 509 },
            optional("boolean", "contains_nan", 518),
            optional("bytes", "lower_bound", 510),
            optional("bytes", "upper_bound", 511),
          ],
        },
      },
      "partitions",
      507,
    ),
    optional("bytes", "key_metadata", 519),
  ],
};
