/**
 * Avro object container files in memory, through `avsc`: the table's
 * manifests and manifest lists are written and read with it. The schema is
 * written into the file's header exactly as given, so the Iceberg
 * attributes on it (`field-id`, `element-id`, logical types) reach readers.
 *
 * @module
 */

import avro from "avsc";
import { Buffer } from "node:buffer";

/**
 * An Avro schema, as JSON.
 */
export type AvroSchema = Record<string, unknown>;

/**
 * Encodes `records` as an Avro object container file with `schema`, the
 * `deflate` codec and `metadata` in its header. The sync marker is given
 * (16 bytes), so the same input makes the same bytes.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { readAvro, writeAvro } from "./avro_file.ts";
 * const schema = { type: "record", name: "r", fields: [{ name: "n", type: "long", "field-id": 7 }] };
 * const bytes = await writeAvro(schema, [{ n: 1 }, { n: 2 }], { "format-version": "2" }, new Uint8Array(16));
 * const file = await readAvro(bytes);
 * deepEqual(file.records.map((r) => r.n), [1, 2]);
 * deepEqual(file.metadata["format-version"], "2");
 * deepEqual((file.schema.fields as { "field-id": number }[])[0]["field-id"], 7);
 * ```
 */
export async function writeAvro(
  schema: AvroSchema,
  records: readonly Record<string, unknown>[],
  metadata: Record<string, string>,
  syncMarker: Uint8Array,
): Promise<Uint8Array> {
  const meta: Record<string, Buffer> = {};
  for (const [k, v] of Object.entries(metadata)) meta[k] = Buffer.from(v, "utf8");
  // The schema as JSON (not a parsed type), so the header keeps every attribute.
  const encoder = new avro.streams.BlockEncoder(schema as never, {
    codec: "deflate",
    metadata: meta,
    syncMarker: Buffer.from(syncMarker),
    writeHeader: true,
  } as never);
  const parts: Uint8Array[] = [];
  const done = new Promise<void>((resolve, reject) => {
    encoder.on("data", (b: Uint8Array) => parts.push(b));
    encoder.on("end", () => resolve());
    encoder.on("error", reject);
  });
  for (const r of records) encoder.write(r);
  encoder.end();
  await done;
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/**
 * An Avro file as read: its header's schema and metadata, and its records.
 */
export interface AvroFile {
  /** The writer's schema (from the header). */
  schema: AvroSchema;
  /** The header's metadata (besides `avro.schema` and `avro.codec`), as text. */
  metadata: Record<string, string>;
  /** The records, decoded with the writer's schema. */
  records: Record<string, unknown>[];
}

/**
 * Decodes an Avro object container file (codec `null` or `deflate`).
 *
 * @throws {Error} If the bytes are not such a file.
 *
 * @example
 * ```ts
 * import { rejects } from "node:assert/strict";
 * import { readAvro } from "./avro_file.ts";
 * await rejects(readAvro(new TextEncoder().encode("not avro")));
 * ```
 */
export function readAvro(bytes: Uint8Array): Promise<AvroFile> {
  return new Promise((resolve, reject) => {
    const decoder = new avro.streams.BlockDecoder({ noDecode: false } as never);
    const records: Record<string, unknown>[] = [];
    let schema: AvroSchema = {};
    const metadata: Record<string, string> = {};
    decoder.on(
      "metadata",
      (_type: unknown, _codec: string, header: { meta: Record<string, Buffer> }) => {
        for (const [k, v] of Object.entries(header.meta)) {
          if (k === "avro.schema") schema = JSON.parse(v.toString("utf8"));
          else if (k !== "avro.codec") metadata[k] = v.toString("utf8");
        }
      },
    );
    decoder.on("data", (r: Record<string, unknown>) => records.push(r));
    decoder.on("end", () => resolve({ schema, metadata, records }));
    decoder.on("error", reject);
    decoder.end(Buffer.from(bytes));
  });
}
