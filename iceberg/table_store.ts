/**
 * Where a table's files live: the {@linkcode TableStore} interface the
 * commit protocol writes through, and its local-disk implementation. The
 * S3 one is `s3_table_store.ts`.
 *
 * Two kinds of write, as the commit protocol needs them:
 * - `write` puts a whole file in place, replacing one of the same name; a
 *   reader never sees it torn (local: a temporary file, synced, renamed
 *   over, the folder synced; S3: one PUT).
 * - `create` puts a file that must not exist yet and says whether it did:
 *   the commit of table version N+1 is the creation of
 *   `metadata/vN+1.metadata.json`, which only one writer may win (local:
 *   the synced temporary file is hard-linked to the name, which fails if
 *   the name exists — the atomic no-replace rename).
 *
 * @module
 */

import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/**
 * A table's files, by path relative to the table's location
 * (`metadata/v1.metadata.json`, `data/…/x.parquet`).
 */
export interface TableStore {
  /** The table's location: an absolute URI, no trailing slash. */
  readonly location: string;
  /** A file's bytes, or null when there is none. */
  read(path: string): Promise<Uint8Array | null>;
  /** Writes a whole file, replacing one of the same name; never seen torn. */
  write(path: string, bytes: Uint8Array): Promise<void>;
  /** Writes a file that must not exist: false (nothing written) when it does. */
  create(path: string, bytes: Uint8Array): Promise<boolean>;
  /** Deletes a file; one that is not there is no error. */
  remove(path: string): Promise<void>;
  /** Releases what the store holds. */
  close(): void;
}

/**
 * The path of `uri` inside the table at `location`, or null when it is not
 * under it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { pathInTable } from "./table_store.ts";
 * equal(pathInTable("s3://b/p/t", "s3://b/p/t/metadata/v1.metadata.json"), "metadata/v1.metadata.json");
 * equal(pathInTable("s3://b/p/t", "s3://b/other"), null);
 * ```
 */
export function pathInTable(location: string, uri: string): string | null {
  return uri.startsWith(`${location}/`) ? uri.slice(location.length + 1) : null;
}

async function syncDir(dir: string): Promise<void> {
  const f = await Deno.open(dir, { read: true });
  try {
    await f.syncData();
  } finally {
    f.close();
  }
}

/**
 * A table in a local folder (`file://` locations).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { LocalTableStore } from "./table_store.ts";
 * const dir = await Deno.makeTempDir();
 * const store = new LocalTableStore(dir);
 * const bytes = new TextEncoder().encode("{}");
 * equal(await store.create("metadata/v1.metadata.json", bytes), true);
 * equal(await store.create("metadata/v1.metadata.json", bytes), false);
 * equal(new TextDecoder().decode((await store.read("metadata/v1.metadata.json"))!), "{}");
 * equal(store.location.startsWith("file:///"), true);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class LocalTableStore implements TableStore {
  /** The table's folder. */
  readonly dir: string;
  /** `file://` URI of the folder. */
  readonly location: string;

  /** The table in folder `dir` (made on the first write). */
  constructor(dir: string) {
    this.dir = dir;
    this.location = pathToFileURL(dir).href.replace(/\/$/, "");
  }

  /** The local path of a table file given by its URI (null: not a local file). */
  static pathOf(uri: string): string | null {
    return uri.startsWith("file:") ? fileURLToPath(uri) : null;
  }

  async read(path: string): Promise<Uint8Array | null> {
    try {
      return await Deno.readFile(join(this.dir, path));
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return null;
      throw err;
    }
  }

  // A synced temporary file beside `target`, for a rename or link onto it.
  async #temp(target: string, bytes: Uint8Array): Promise<string> {
    await Deno.mkdir(dirname(target), { recursive: true });
    const tmp = `${target}.tmp-${crypto.randomUUID().slice(0, 8)}`;
    const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
    try {
      let done = 0;
      while (done < bytes.length) done += await f.write(bytes.subarray(done));
      await f.syncData();
    } catch (err) {
      f.close();
      await Deno.remove(tmp).catch(() => {});
      throw err;
    }
    f.close();
    return tmp;
  }

  async write(path: string, bytes: Uint8Array): Promise<void> {
    const target = join(this.dir, path);
    const tmp = await this.#temp(target, bytes);
    await Deno.rename(tmp, target);
    await syncDir(dirname(target));
  }

  async create(path: string, bytes: Uint8Array): Promise<boolean> {
    const target = join(this.dir, path);
    const tmp = await this.#temp(target, bytes);
    try {
      await Deno.link(tmp, target);
    } catch (err) {
      if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
      return false;
    } finally {
      await Deno.remove(tmp).catch(() => {});
    }
    await syncDir(dirname(target));
    return true;
  }

  async remove(path: string): Promise<void> {
    await Deno.remove(join(this.dir, path)).catch((err) => {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    });
  }

  close(): void {}
}
