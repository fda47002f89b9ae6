/**
 * A cursor kept in a file, for Deno (not for browsers: it uses `Deno.*`).
 *
 * The file holds one JSON line, `{"offset":N,"stream_id":"…","saved_at":"…"}`,
 * where `offset` is the NEXT offset to read. Saves are atomic and durable:
 * write a temporary file beside it, `fsync` it, rename it over the cursor,
 * then `fsync` the folder, so a crash leaves the old or the new cursor.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { FileCursor } from "./file_cursor.ts";
 * const dir = await Deno.makeTempDir();
 * const cursor = new FileCursor(`${dir}/trades.cursor`);
 * equal(await cursor.load(), null);
 * await cursor.save({ offset: 1862, streamId: "0123456789abcdef0123456789abcdef" });
 * equal((await cursor.load())?.offset, 1862);
 * await Deno.remove(dir, { recursive: true });
 * ```
 *
 * @module
 */

import { checkCursor, type Cursor, type CursorStore } from "./cursor.ts";

const utf8 = new TextEncoder();

/**
 * A {@linkcode CursorStore} in a file (Deno only). Pass it as the `cursor`
 * option of `connect`.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { connect } from "./connect.ts";
 * import { FileCursor } from "./file_cursor.ts";
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("ticks", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * await stream.sendMany([{ v: 1 }, { v: 2 }, { v: 3 }]);
 * const seen: [number, number | null][] = [];
 * for (let run = 1; run <= 2; run++) {
 *   const sub = await connect(`${server.url}/ticks`, {
 *     offset: "earliest", // used only while the file does not exist
 *     cursor: new FileCursor(`${root}/ticks.cursor`),
 *   });
 *   for await (const [offset] of sub) {
 *     seen.push([run, offset]);
 *     if (offset === 2) break;
 *   }
 * }
 * // Breaking out at row 2 left it unhandled: the second run starts there.
 * deepStrictEqual(seen, [[1, 1], [1, 2], [2, 2]]);
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export class FileCursor implements CursorStore {
  /** The cursor file's path. */
  readonly path: string;
  #saving: Promise<void> = Promise.resolve();

  /** A store at `path` (the file need not exist yet). */
  constructor(path: string) {
    if (typeof path !== "string" || path === "") {
      throw new TypeError(`FileCursor needs a file path, got ${JSON.stringify(path)}`);
    }
    this.path = path;
  }

  /** The saved cursor, or `null` when the file does not exist. */
  async load(): Promise<Cursor | null> {
    let text: string;
    try {
      text = await Deno.readTextFile(this.path);
    } catch (err) {
      // No file yet: nothing was saved.
      if (err instanceof Deno.errors.NotFound) return null;
      throw err;
    }
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(text);
    } catch {
      throw new TypeError(
        `cursor file ${this.path} is not JSON: ${JSON.stringify(text.slice(0, 80))}; ` +
          `fix or delete it`,
      );
    }
    return checkCursor(
      { offset: v?.offset, streamId: v?.stream_id ?? null },
      `cursor file ${this.path}`,
    );
  }

  /** Saves `cursor` atomically and durably (temp file, fsync, rename, fsync dir). */
  save(cursor: Cursor): Promise<void> {
    const c = checkCursor(cursor, `FileCursor.save(${this.path})`);
    // One save at a time: two renames racing could leave the older cursor.
    const run = () => this.#write(c);
    this.#saving = this.#saving.then(run, run);
    return this.#saving;
  }

  async #write(c: Cursor): Promise<void> {
    const line = JSON.stringify({
      offset: c.offset,
      stream_id: c.streamId,
      saved_at: new Date().toISOString(),
    }) + "\n";
    const tmp = `${this.path}.${crypto.randomUUID().slice(0, 8)}.tmp`;
    try {
      const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
      try {
        const bytes = utf8.encode(line);
        let done = 0;
        while (done < bytes.length) done += await f.write(bytes.subarray(done));
        await f.syncData();
      } finally {
        f.close();
      }
      await Deno.rename(tmp, this.path);
    } catch (err) {
      await Deno.remove(tmp).catch(() => {});
      throw err;
    }
    await syncDir(dirOf(this.path));
  }
}

function dirOf(path: string): string {
  const i = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  return i < 0 ? "." : i === 0 ? "/" : path.slice(0, i);
}

async function syncDir(dir: string): Promise<void> {
  let d: Deno.FsFile;
  try {
    d = await Deno.open(dir, { read: true });
  } catch {
    // Some platforms (Windows) cannot open a folder; the rename is still atomic.
    return;
  }
  try {
    await d.sync();
  } catch {
    // Not every filesystem syncs a folder handle; the rename is still atomic.
  } finally {
    d.close();
  }
}
