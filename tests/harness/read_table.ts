// Reads an Iceberg table as engines do, with no streamcast code on the way:
// the metadata JSON from the version hint, the manifest list and manifests
// through an Avro library (avsc, decoding with the files' own schemas), the
// data files through DuckDB's read_parquet, and the whole table through an
// independent Iceberg reader from npm (icebird), which follows the metadata
// itself. Files are fetched from local disk (file://) or from the S3 server
// (s3://, through the SDK), so the same checks run on both.
import avro from "avsc";
import { Buffer } from "node:buffer";
import { fileURLToPath } from "node:url";
import { DuckDBInstance } from "@duckdb/node-api";
import { icebergRead } from "icebird";
import { S3Bucket } from "../../common/s3.ts";

/** Gets a table file's bytes by its absolute URI (null when missing). */
export type Fetcher = (uri: string) => Promise<Uint8Array | null>;

/** file:// URIs from the local disk. */
export const localFiles: Fetcher = async (uri) => {
  try {
    return await Deno.readFile(fileURLToPath(uri));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
};

/** s3:// URIs from the S3 server at `endpoint` (path-style). */
export function s3Files(endpoint: string): Fetcher {
  const buckets = new Map<string, S3Bucket>();
  return async (uri) => {
    const m = /^s3:\/\/([^/]+)\/(.+)$/.exec(uri);
    if (!m) throw new Error(`not an s3:// URI: ${uri}`);
    let b = buckets.get(m[1]);
    if (!b) {
      b = new S3Bucket({ uri: `s3://${m[1]}`, endpoint, forcePathStyle: true });
      buckets.set(m[1], b);
    }
    try {
      return await b.getBytes(m[2]);
    } catch (err) {
      const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
      if (e.name === "NoSuchKey" || e.$metadata?.httpStatusCode === 404) return null;
      throw err;
    }
  };
}

export interface AvroRead {
  schema: Record<string, unknown>;
  meta: Record<string, string>;
  records: Record<string, unknown>[];
}

/** Decodes an Avro object container file with avsc (the writer's schema from its header). */
export function readAvro(bytes: Uint8Array): Promise<AvroRead> {
  return new Promise((resolve, reject) => {
    const decoder = new avro.streams.BlockDecoder();
    const out: AvroRead = { schema: {}, meta: {}, records: [] };
    decoder.on("metadata", (_t: unknown, _c: unknown, header: { meta: Record<string, Buffer> }) => {
      for (const [k, v] of Object.entries(header.meta)) {
        if (k === "avro.schema") out.schema = JSON.parse(v.toString());
        else out.meta[k] = v.toString();
      }
    });
    decoder.on("data", (r: Record<string, unknown>) => out.records.push(r));
    decoder.on("end", () => resolve(out));
    decoder.on("error", reject);
    decoder.end(Buffer.from(bytes));
  });
}

export interface TableView {
  version: number;
  // deno-lint-ignore no-explicit-any
  metadata: any;
  manifestList: AvroRead | null;
  manifests: AvroRead[];
  /** Data file URIs of the current snapshot, in manifest order. */
  dataFiles: string[];
}

/** The current snapshot of the table at `location`, followed from the version hint. */
export async function viewTable(location: string, get: Fetcher): Promise<TableView> {
  const hint = await get(`${location}/metadata/version-hint.text`);
  if (hint === null) throw new Error(`${location} has no version-hint.text`);
  const version = Number(new TextDecoder().decode(hint).trim());
  const text = await get(`${location}/metadata/v${version}.metadata.json`);
  if (text === null) throw new Error(`${location}: v${version}.metadata.json is missing`);
  const metadata = JSON.parse(new TextDecoder().decode(text));
  const current = metadata["current-snapshot-id"];
  const snap = metadata.snapshots.find((s: { "snapshot-id": number }) =>
    s["snapshot-id"] === current
  );
  if (!snap) return { version, metadata, manifestList: null, manifests: [], dataFiles: [] };
  const list = await readAvro((await get(snap["manifest-list"]))!);
  const manifests: AvroRead[] = [];
  const dataFiles: string[] = [];
  for (const m of list.records) {
    const bytes = await get(m.manifest_path as string);
    if (bytes === null) throw new Error(`manifest ${m.manifest_path} is missing`);
    const man = await readAvro(bytes);
    manifests.push(man);
    for (const e of man.records) {
      if (e.status === 2) continue;
      dataFiles.push((e.data_file as { file_path: string }).file_path);
    }
  }
  return { version, metadata, manifestList: list, manifests, dataFiles };
}

/** The rows of the data files, through DuckDB's read_parquet (S3 files are downloaded first). */
export async function duckRows(
  files: readonly string[],
  get: Fetcher,
  columns = "*",
): Promise<Record<string, unknown>[]> {
  if (files.length === 0) return [];
  const tmp = await Deno.makeTempDir({ prefix: "streamcast-duck-" });
  try {
    const paths: string[] = [];
    for (const [i, uri] of files.entries()) {
      if (uri.startsWith("file:")) paths.push(fileURLToPath(uri));
      else {
        const p = `${tmp}/${i}.parquet`;
        await Deno.writeFile(p, (await get(uri))!);
        paths.push(p);
      }
    }
    const db = await DuckDBInstance.create(":memory:");
    const c = await db.connect();
    try {
      const list = paths.map((p) => `'${p}'`).join(", ");
      const r = await c.runAndReadAll(
        `SELECT ${columns} FROM read_parquet([${list}], union_by_name = true) ORDER BY streamcast_offset`,
      );
      return r.getRowObjectsJson() as Record<string, unknown>[];
    } finally {
      c.closeSync();
      db.closeSync();
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

/** The field ids DuckDB reads from a data file's Parquet schema, by column name. */
export async function parquetFieldIds(bytes: Uint8Array): Promise<Record<string, number | null>> {
  const tmp = await Deno.makeTempFile({ suffix: ".parquet" });
  try {
    await Deno.writeFile(tmp, bytes);
    const db = await DuckDBInstance.create(":memory:");
    const c = await db.connect();
    try {
      const r = await c.runAndReadAll(`SELECT name, field_id FROM parquet_schema('${tmp}')`);
      const out: Record<string, number | null> = {};
      for (const row of r.getRowObjectsJson()) {
        out[row.name as string] = row.field_id === null ? null : Number(row.field_id);
      }
      return out;
    } finally {
      c.closeSync();
      db.closeSync();
    }
  } finally {
    await Deno.remove(tmp);
  }
}

/**
 * The table's rows through icebird, an Iceberg reader from npm that follows
 * the table's own metadata (hint, metadata JSON, manifest list, manifests,
 * Parquet files with ranged reads). Its requests are answered from `get`:
 * file:// URIs, and s3:// ones (which it asks of `https://BUCKET.s3.amazonaws.com/KEY`).
 */
export async function icebirdRows(
  location: string,
  get: Fetcher,
): Promise<Record<string, unknown>[]> {
  const real = globalThis.fetch;
  globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = String(input instanceof Request ? input.url : input);
    const s3 = /^https:\/\/([^.]+)\.s3\.amazonaws\.com\/(.+)$/.exec(url);
    const uri = s3 ? `s3://${s3[1]}/${s3[2]}` : url;
    if (!uri.startsWith("file:") && !uri.startsWith("s3:")) return real(input, init);
    const bytes = await get(uri);
    if (bytes === null) return new Response("not found", { status: 404 });
    const headers = new Headers(init?.headers);
    if (init?.method === "HEAD") {
      return new Response(null, { headers: { "content-length": String(bytes.length) } });
    }
    const range = /bytes=(\d+)-(\d*)/.exec(headers.get("range") ?? "");
    if (range) {
      const end = range[2] === "" ? bytes.length : Number(range[2]) + 1;
      return new Response(bytes.slice(Number(range[1]), end), { status: 206 });
    }
    return new Response(bytes.slice());
  };
  try {
    return await icebergRead({ tableUrl: location });
  } finally {
    globalThis.fetch = real;
  }
}
