/**
 * The table writer: appends a log's sealed rows to its Iceberg table, each
 * row exactly once, whatever step a crash interrupts.
 *
 * The table says what it holds: the current snapshot's summary carries
 * `streamcast.last-offset`, the last offset committed. A commit of version
 * N+1 takes the rows past that offset (from the log's chunks, up to a
 * bound of bytes) and, in this order:
 *
 * 1. writes the data files, one per day, named by their first and last
 *    offsets (`data/streamcast_time_day=YYYY-MM-DD/FIRST-LAST.parquet`);
 * 2. writes the manifest listing them (`metadata/FIRST-LAST-m0.avro`);
 * 3. writes the snapshot's manifest list — the parent's manifests, then
 *    the new one (`metadata/snap-ID-FIRST-LAST.avro`);
 * 4. creates `metadata/vN+1.metadata.json`, which must not exist: this
 *    creation is the commit;
 * 5. writes `metadata/version-hint.text` (N+1).
 *
 * Invariants: a file is referenced only once it is whole (each is written
 * before what refers to it, and every write is atomic); version N+1 is
 * created from version N's last offset, and only one creation of N+1 can
 * succeed. So a crash after 1, 2 or 3 leaves files nothing refers to: the
 * table is still version N, and the next attempt commits the same rows
 * (writing the same names again). A crash after 4 leaves the commit made
 * and the hint one behind: opening the table reads the hint, then looks for
 * later versions (as the file-system catalog does), so it finds N+1 and its
 * last offset, commits nothing twice, and writes the hint forward (readers
 * such as DuckDB follow the hint alone). After 5 the commit is done.
 *
 * A writer whose right to write can end (a cluster's leader) is given
 * `beforeCommit`, asked just before step 4 (and before the table's first
 * version is created): when it answers false nothing is created and the
 * commit is refused ({@linkcode CommitRefusedError}); what steps 1–3 wrote is
 * left for whoever writes next, which writes the same names again. It is
 * asked again before step 5: a writer whose right ended after its version
 * was created leaves the hint alone (the next writer finds the version and
 * writes the hint forward when it opens the table, with or without rows to
 * commit).
 *
 * @module
 */

import { ArchiveStore } from "../log/chunk/archive.ts";
import type { ArchiveOptions } from "../common/s3.ts";
import { readSchemaHistory } from "../log/schema_history.ts";
import { OffsetHoleError, pendingChunks, readRows } from "./commit_rows.ts";
import { DataFileBuilder, dayText } from "./data_files.ts";
import {
  addedEntry,
  asExisting,
  type DataFile,
  listRecord,
  type ManifestFile,
  readManifest,
  readManifestList,
  writeManifest,
  writeManifestList,
} from "./manifests.ts";
import {
  appendSnapshot,
  currentSnapshot,
  lastOffset,
  metadataFileName,
  newTable,
  parseMetadata,
  snapshotId,
  type TableMetadata,
  tableUuid,
  withSchemas,
} from "./metadata.ts";
import { tableSchemas } from "./schema.ts";
import { pathInTable, type TableStore } from "./table_store.ts";
import { DEFAULT_MAX_COMMIT_BYTES } from "./options.ts";

/**
 * The steps of a commit, in order (see the module doc); a test may stop the
 * writer after any of them.
 */
export const COMMIT_STEPS = [
  "data-written",
  "manifest-written",
  "manifest-list-written",
  "metadata-written",
  "hint-written",
] as const;

/**
 * A step of a commit.
 */
export type CommitStep = typeof COMMIT_STEPS[number];

/**
 * Manifests smaller than this are merged once a snapshot lists `mergeManifestsAt` of them.
 */
export const MERGE_BELOW_BYTES = 8 << 20;

const HINT = "metadata/version-hint.text";

/**
 * Options of {@linkcode TableWriter}.
 */
export interface TableWriterOptions {
  /** The table's files. */
  store: TableStore;
  /** The log folder whose chunks the table takes. */
  dir: string;
  /** The stream's name. */
  stream: string;
  /** The log's stream id (the table's `table-uuid`). */
  streamId: string;
  /** The log's archive, for rows only it still holds. @default null */
  archive?: ArchiveOptions | null;
  /** Rows (bytes as stored) per commit at most. @default 64 MiB */
  maxCommitBytes?: number;
  /**
   * How many small manifests a snapshot may list before they are merged
   * into one (as Iceberg's `commit.manifest.min-count-to-merge`). @default 100
   */
  mergeManifestsAt?: number;
  /** The clock, ms. @default Date.now */
  clock?: () => number;
  /** Called after each step of a commit (tests stop the writer there). */
  afterStep?: (step: CommitStep) => void | Promise<void>;
  /**
   * Asked just before a version is created: false refuses the commit
   * ({@linkcode CommitRefusedError}), nothing created. @default always true
   */
  beforeCommit?: () => boolean | Promise<boolean>;
}

/**
 * What one commit added.
 */
export interface CommitReport {
  /** The table version made. */
  version: number;
  /** Its snapshot. */
  snapshotId: number;
  /** The first and last offsets added. */
  firstOffset: number;
  /** @see firstOffset */
  lastOffset: number;
  /** Rows added. */
  rows: number;
  /** Data files added. */
  files: number;
}

/**
 * Another writer committed the version this writer was making.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { CommitConflictError } from "./table_writer.ts";
 * equal(new CommitConflictError("file:///t", 3).name, "CommitConflictError");
 * ```
 */
export class CommitConflictError extends Error {
  /** Makes the error. */
  constructor(location: string, version: number) {
    super(
      `${location}: version ${version} was committed by another writer while this one made it ` +
        "(the table has one writer: the stream's)",
    );
    this.name = "CommitConflictError";
  }
}

/**
 * The writer may not commit now (its `beforeCommit` said so: a cluster
 * node that no longer leads the stream); nothing was created.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { CommitRefusedError } from "./table_writer.ts";
 * equal(new CommitRefusedError("file:///t", 3).message.includes("version 3"), true);
 * ```
 */
export class CommitRefusedError extends Error {
  /** Makes the error. */
  constructor(location: string, version: number) {
    super(
      `${location}: version ${version} not made: this writer may not commit now ` +
        "(it no longer writes the stream)",
    );
    this.name = "CommitRefusedError";
  }
}

type Settings =
  & Required<Omit<TableWriterOptions, "archive" | "afterStep" | "beforeCommit">>
  & Pick<TableWriterOptions, "afterStep" | "beforeCommit">;

const pad = (n: number) => String(n).padStart(20, "0");

/**
 * Appends a log's sealed rows to its table (see the module doc).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log/mod.ts";
 * import { writeSchemaHistory } from "../log/schema_history.ts";
 * import { LocalTableStore } from "./table_store.ts";
 * import { TableWriter } from "./table_writer.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { chunks: true, timers: false });
 * await writeSchemaHistory(dir, [{ from: 1, schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }]);
 * await log.appendMany(['{"n":1}', '{"n":2}']);
 * await log.roll();
 * await log.chunks.settled();
 * const writer = new TableWriter({
 *   store: new LocalTableStore(`${dir}/iceberg`), dir, stream: "t", streamId: log.streamId,
 * });
 * await log.close();
 * const report = await writer.commit();
 * equal(report?.rows, 2);
 * equal(await writer.commit(), null); // nothing more to take
 * equal(await writer.lastOffset(), 2);
 * writer.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class TableWriter {
  readonly #o: Settings;
  readonly #archive: ArchiveStore | null;
  // The current version and its metadata, once read (this is the table's only writer).
  #version = 0;
  #metadata: TableMetadata | null = null;
  // The archive holds no chunk this writer needs below this offset.
  #archiveKnown = 0;

  /** A writer of `options.store`'s table (nothing is read until the first call). */
  constructor(options: TableWriterOptions) {
    this.#o = {
      maxCommitBytes: DEFAULT_MAX_COMMIT_BYTES,
      mergeManifestsAt: 100,
      clock: Date.now,
      ...options,
    };
    const a = options.archive ?? null;
    this.#archive = a ? new ArchiveStore(a, options.stream) : null;
  }

  /** The table's location. */
  get location(): string {
    return this.#o.store.location;
  }

  /** The last offset the table holds (0: none), read from the table. */
  async lastOffset(): Promise<number> {
    return lastOffset(await this.#current());
  }

  /** The current version and its metadata: the hint, then any later version. */
  async #current(): Promise<TableMetadata> {
    if (this.#metadata) return this.#metadata;
    const { store } = this.#o;
    const hint = await store.read(HINT);
    let n = hint === null ? 0 : Number.parseInt(new TextDecoder().decode(hint).trim(), 10);
    if (!Number.isSafeInteger(n) || n < 0) n = 0;
    let text: Uint8Array | null = n > 0
      ? await store.read(`metadata/${metadataFileName(n)}`)
      : null;
    if (text === null) n = 0;
    const hinted = n;
    // Later versions than the hint says (a commit whose hint was not written).
    while (true) {
      const later = await store.read(`metadata/${metadataFileName(n + 1)}`);
      if (later === null) break;
      n++;
      text = later;
    }
    let m: TableMetadata;
    if (text === null) {
      m = await this.#create();
      n = 1;
    } else {
      m = parseMetadata(
        new TextDecoder().decode(text),
        `${store.location}/metadata/${metadataFileName(n)}`,
      );
    }
    const uuid = tableUuid(this.#o.streamId);
    if (m["table-uuid"] !== uuid) {
      throw new Error(
        `${store.location} is the table of stream ${m["table-uuid"]}, not of this log ` +
          `(${uuid}): a log made anew starts a new table; move the old one away`,
      );
    }
    this.#version = n;
    this.#metadata = m;
    if (n > hinted && text !== null && (await this.#allowed())) {
      // The hint is behind the table (a crash, or a writer whose right ended,
      // between steps 4 and 5): readers that follow the hint would see an
      // older version until the next commit, which may never come.
      await store.write(HINT, new TextEncoder().encode(`${n}\n`));
    }
    return m;
  }

  async #create(): Promise<TableMetadata> {
    const { store } = this.#o;
    const m = newTable(
      store.location,
      this.#o.stream,
      this.#o.streamId,
      await this.#schemas(),
      this.#o.clock(),
    );
    const bytes = new TextEncoder().encode(JSON.stringify(m, null, 2) + "\n");
    await this.#mayCommit(1);
    if (!(await store.create(`metadata/${metadataFileName(1)}`, bytes))) {
      throw new CommitConflictError(store.location, 1);
    }
    await store.write(HINT, new TextEncoder().encode("1\n"));
    return m;
  }

  async #allowed(): Promise<boolean> {
    return (await this.#o.beforeCommit?.()) ?? true;
  }

  // Refuses the creation of `version` when the writer may not commit now.
  async #mayCommit(version: number): Promise<void> {
    if (!(await this.#allowed())) {
      // Another writer may commit meanwhile: read the table afresh next time.
      this.#metadata = null;
      throw new CommitRefusedError(this.#o.store.location, version);
    }
  }

  async #history(): Promise<Record<string, unknown>[]> {
    const h = await readSchemaHistory(this.#o.dir);
    if (h === null) throw new Error(`${this.#o.dir} keeps no schema (schema.json)`);
    return h.versions.map((v) => v.schema);
  }

  async #schemas(): Promise<ReturnType<typeof tableSchemas>> {
    return tableSchemas(await this.#history());
  }

  /**
   * Commits the rows past the table's last offset (at most
   * `maxCommitBytes` of them) as one append snapshot; null when there are none.
   *
   * @throws {CommitConflictError} If another writer made the version first
   *   (the state is read again on the next call).
   * @throws {CommitRefusedError} If `beforeCommit` answered false.
   * @throws {OffsetHoleError} If the rows right past the table's last offset
   *   are in no chunk the writer can read and no fence of the log accounts
   *   for them (nothing is committed; rows before a later hole are).
   */
  async commit(): Promise<CommitReport | null> {
    const { store, dir, afterStep } = this.#o;
    const base = await this.#current();
    const version = this.#version;
    const after = lastOffset(base);
    const { chunks, localFirst, hole } = await pendingChunks(
      dir,
      after,
      this.#archive,
      this.#archiveKnown,
    );
    // With a hole, the archive is read again next time: it may be filled there.
    if (!hole && !chunks.some((c) => c.archived)) this.#archiveKnown = localFirst;
    if (chunks.length === 0) {
      if (hole) throw new OffsetHoleError(hole.from, hole.to, this.#archive !== null);
      return null;
    }
    const history = await this.#history();
    const schemas = tableSchemas(history);
    const metadata = withSchemas(base, schemas);
    const schema = schemas.schemas[schemas.schemas.length - 1];
    const builder = new DataFileBuilder(schema, history[history.length - 1]);
    let first = 0;
    let last = 0;
    for await (const b of readRows(dir, chunks, after, this.#archive, this.#o.maxCommitBytes)) {
      if (first === 0) first = b.offsets[0];
      last = b.offsets[b.count - 1];
      builder.add(b);
    }
    if (builder.rows === 0) return null;
    const made = await builder.finish();
    const files: DataFile[] = [];
    for (const f of made) {
      const path = `data/streamcast_time_day=${dayText(f.day)}/${pad(f.firstOffset)}-${
        pad(f.lastOffset)
      }.parquet`;
      await store.write(path, f.bytes);
      files.push({ ...f, path: `${store.location}/${path}`, bytes: f.bytes.length });
    }
    await afterStep?.("data-written");

    const id = snapshotId(this.#o.streamId, first, last);
    const seq = metadata["last-sequence-number"] + 1;
    const name = `${pad(first)}-${pad(last)}`;
    const manifestPath = `metadata/${name}-m0.avro`;
    const entries = files.map((f) => addedEntry(f, id));
    const manifest = await writeManifest(manifestPath, schema, entries);
    await store.write(manifestPath, manifest);
    await afterStep?.("manifest-written");

    const listed = await this.#parentManifests(metadata, `${name}-m1`, id, seq, schema);
    listed.push(listRecord(`${store.location}/${manifestPath}`, manifest.length, entries, id, seq));
    const listPath = `metadata/snap-${id}-${name}.avro`;
    const parent = currentSnapshot(metadata);
    await store.write(
      listPath,
      await writeManifestList(listPath, listed, id, parent?.["snapshot-id"] ?? null, seq),
    );
    await afterStep?.("manifest-list-written");

    const bytes = files.reduce((n, f) => n + f.bytes, 0);
    const now = Math.max(this.#o.clock(), metadata["last-updated-ms"]);
    const next = appendSnapshot(
      metadata,
      `${store.location}/metadata/${metadataFileName(version)}`,
      {
        snapshotId: id,
        manifestList: `${store.location}/${listPath}`,
        firstOffset: first,
        lastOffset: last,
        addedFiles: files.length,
        addedRecords: builder.rows,
        addedBytes: bytes,
        changedPartitions: new Set(files.map((f) => f.day)).size,
        nowMs: now,
      },
    );
    const text = new TextEncoder().encode(JSON.stringify(next.metadata, null, 2) + "\n");
    await this.#mayCommit(version + 1);
    if (!(await store.create(`metadata/${metadataFileName(version + 1)}`, text))) {
      this.#metadata = null;
      throw new CommitConflictError(store.location, version + 1);
    }
    this.#version = version + 1;
    this.#metadata = next.metadata;
    await afterStep?.("metadata-written");
    // A writer whose right ended meanwhile leaves the hint to the next one:
    // a late hint would name a version older than the next writer's.
    if (await this.#allowed()) {
      await store.write(HINT, new TextEncoder().encode(`${version + 1}\n`));
    }
    await afterStep?.("hint-written");
    // What no kept snapshot or metadata log refers to any more.
    for (const uri of next.expired) {
      const path = pathInTable(store.location, uri);
      if (path !== null) await store.remove(path).catch(() => {});
    }
    return {
      version: version + 1,
      snapshotId: id,
      firstOffset: first,
      lastOffset: last,
      rows: builder.rows,
      files: files.length,
    };
  }

  /**
   * The manifests of the current snapshot, to list again in the next; once
   * `mergeManifestsAt` of them are small, those are merged into
   * one manifest (`NAME.avro`) whose entries are EXISTING, so a snapshot
   * lists a bounded number of manifests however many commits there were.
   */
  async #parentManifests(
    m: TableMetadata,
    name: string,
    id: number,
    seq: number,
    schema: TableMetadata["schemas"][number],
  ): Promise<ManifestFile[]> {
    const parent = currentSnapshot(m);
    if (parent === null) return [];
    const { store } = this.#o;
    const listPath = pathInTable(store.location, parent["manifest-list"]);
    const bytes = listPath === null ? null : await store.read(listPath);
    if (bytes === null) {
      throw new Error(`${store.location}: the manifest list ${parent["manifest-list"]} is missing`);
    }
    const records = (await readManifestList(bytes)).records;
    const small = records.filter((r) => r.manifest_length < MERGE_BELOW_BYTES);
    if (small.length < this.#o.mergeManifestsAt) return records;
    const entries = [];
    for (const r of small) {
      const path = pathInTable(store.location, r.manifest_path);
      const manifest = path === null ? null : await store.read(path);
      if (manifest === null) {
        throw new Error(`${store.location}: manifest ${r.manifest_path} is missing`);
      }
      entries.push(...asExisting((await readManifest(manifest)).entries, r));
    }
    const path = `metadata/${name}.avro`;
    const merged = await writeManifest(path, schema, entries);
    await store.write(path, merged);
    const kept = records.filter((r) => !small.includes(r));
    return [...kept, listRecord(`${store.location}/${path}`, merged.length, entries, id, seq)];
  }

  /** Releases the store and the archive. */
  close(): void {
    this.#o.store.close();
    this.#archive?.close();
  }
}
