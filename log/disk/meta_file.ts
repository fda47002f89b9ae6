/**
 * Checked metadata files: `log.json`, `manifest.json` (a checksum member
 * inside the JSON) and `schema.json` (a checksum in a sidecar file, because
 * the schema file is read as a bare JSON Schema by other tools).
 *
 * ```text
 * in-file form (log.json, manifest.json):
 *   {"stream":"t",...,"crc32":"1a2b3c4d"}\n
 *   crc32 = CRC-32 (IEEE, 8 lowercase hex digits) of the UTF-8 bytes of
 *           JSON.stringify(body), where body is the object without "crc32",
 *           members in file order: the canonical body.
 *
 * sidecar form (schema.json + schema.json.crc32):
 *   schema.json        any text (the schema, pretty-printed)
 *   schema.json.crc32  {"file":"schema.json","sums":["1a2b3c4d"],"crc32":"…"}\n
 *                      (itself in the in-file form); sums are CRC-32s of the
 *                      whole text of schema.json: the text is intact when its
 *                      CRC-32 is one of them.
 * ```
 *
 * A file without a checksum (written before checksums existed) still reads,
 * as unchecked; so that damage to the checksum member's own name cannot pass
 * for such a file, an unchecked object with a member outside the file's
 * known names is damage. Rewriting a sidecar-checked file is crash-safe: the
 * sidecar first lists the new and the old text's sums, then the text is
 * replaced, then the sidecar lists the new sum only.
 *
 * @module
 */

import { crc32 } from "node:zlib";
import { basename } from "node:path";
import { writeFileAtomic } from "./atomic_write.ts";
import { type LogIo, REAL_IO } from "./io.ts";
import { LogCorruptError } from "../errors.ts";

/** The name of the checksum member of a checked JSON file. */
export const CHECKSUM_MEMBER = "crc32";
/** The suffix of a sidecar checksum file (`schema.json.crc32`). */
export const SIDECAR_SUFFIX = ".crc32";

/** What {@linkcode readCheckedJson} read. */
export interface CheckedJson<T> {
  /** The body, without its checksum member. */
  value: T;
  /** Whether the file carried a checksum (and it matched). */
  checked: boolean;
}

function crcHex(text: string): string {
  return (crc32(new TextEncoder().encode(text)) >>> 0).toString(16).padStart(8, "0");
}

function withoutChecksum(body: Record<string, unknown>): Record<string, unknown> {
  if (!(CHECKSUM_MEMBER in body)) return body;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) if (k !== CHECKSUM_MEMBER) out[k] = v;
  return out;
}

/**
 * The text of a checked JSON file holding `body` (one line, with its
 * checksum member last).
 *
 * @example
 * ```ts
 * import { match } from "node:assert/strict";
 * import { encodeCheckedJson } from "./meta_file.ts";
 * match(encodeCheckedJson({ a: 1 }), /^\{"a":1,"crc32":"[0-9a-f]{8}"\}\n$/);
 * ```
 */
export function encodeCheckedJson(body: object): string {
  const plain = withoutChecksum(body as Record<string, unknown>);
  const text = JSON.stringify(plain);
  const sum = crcHex(text);
  return text === "{}"
    ? `{"${CHECKSUM_MEMBER}":"${sum}"}\n`
    : `${text.slice(0, -1)},"${CHECKSUM_MEMBER}":"${sum}"}\n`;
}

/**
 * Writes `body` to `path` as a checked JSON file, atomically (through `io`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readCheckedJson, writeCheckedJson } from "./meta_file.ts";
 * const dir = await Deno.makeTempDir();
 * const path = `${dir}/log.json`;
 * await writeCheckedJson(path, { stream_id: "x" });
 * equal((await readCheckedJson(path, ["stream_id"]))?.checked, true);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeCheckedJson(
  path: string,
  body: object,
  io: LogIo = REAL_IO,
): Promise<void> {
  await writeFileAtomic(path, encodeCheckedJson(body), io);
}

/**
 * Parses the text of a checked JSON file; `known` are the member names an
 * unchecked (old) file may have. Throws {@linkcode LogCorruptError} naming
 * `path` when the text is damaged.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { encodeCheckedJson, parseCheckedJson } from "./meta_file.ts";
 * const text = encodeCheckedJson({ a: 1 });
 * deepStrictEqual(parseCheckedJson(text, "a.json", ["a"]).value, { a: 1 });
 * ```
 */
export function parseCheckedJson<T>(
  text: string,
  path: string,
  known: readonly string[],
): CheckedJson<T> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new LogCorruptError(path, 0, "not valid JSON");
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new LogCorruptError(path, 0, "not a JSON object");
  }
  const obj = parsed as Record<string, unknown>;
  if (CHECKSUM_MEMBER in obj) {
    const said = obj[CHECKSUM_MEMBER];
    const body = withoutChecksum(obj);
    const sum = crcHex(JSON.stringify(body));
    if (said !== sum) {
      throw new LogCorruptError(
        path,
        0,
        `checksum mismatch (the file says ${JSON.stringify(said)}, its contents sum to "${sum}")`,
      );
    }
    return { value: body as T, checked: true };
  }
  const unknown = Object.keys(obj).filter((k) => !known.includes(k));
  if (unknown.length > 0) {
    throw new LogCorruptError(
      path,
      0,
      `no checksum, and an unknown member ${JSON.stringify(unknown[0])} (damaged)`,
    );
  }
  return { value: obj as T, checked: false };
}

/**
 * Reads a checked JSON file; `null` when it does not exist. See
 * {@linkcode parseCheckedJson}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readCheckedJson } from "./meta_file.ts";
 * const dir = await Deno.makeTempDir();
 * equal(await readCheckedJson(`${dir}/none.json`, []), null);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readCheckedJson<T>(
  path: string,
  known: readonly string[],
): Promise<CheckedJson<T> | null> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
  return parseCheckedJson<T>(text, path, known);
}

interface Sidecar {
  file: string;
  sums: string[];
}

async function readSidecar(path: string): Promise<Sidecar | null> {
  const side = path + SIDECAR_SUFFIX;
  const r = await readCheckedJson<Sidecar>(side, []);
  if (r === null) return null;
  const s = r.value;
  if (!r.checked || !Array.isArray(s.sums) || !s.sums.every((x) => typeof x === "string")) {
    throw new LogCorruptError(side, 0, "not a checksum file");
  }
  return s;
}

async function readTextOrNull(path: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

/**
 * Replaces the text file `path` by `text` and keeps its checksum in the
 * sidecar `path.crc32` (crash-safe at every step).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readCheckedText, writeCheckedText } from "./meta_file.ts";
 * const dir = await Deno.makeTempDir();
 * const path = `${dir}/schema.json`;
 * await writeCheckedText(path, '{"type":"object"}\n');
 * equal((await readCheckedText(path))?.checked, true);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeCheckedText(path: string, text: string): Promise<void> {
  const sum = crcHex(text);
  const side = path + SIDECAR_SUFFIX;
  const old = await readTextOrNull(path);
  const file = basename(path);
  if (old !== null && crcHex(old) !== sum) {
    await writeCheckedJson(side, { file, sums: [sum, crcHex(old)] });
  }
  await writeFileAtomic(path, text);
  await writeCheckedJson(side, { file, sums: [sum] });
}

/**
 * Reads a text file kept with {@linkcode writeCheckedText}; `null` when it
 * does not exist. `checked` is false for a file without a sidecar. Throws
 * {@linkcode LogCorruptError} naming the file (or its sidecar) when damaged.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { readCheckedText } from "./meta_file.ts";
 * const dir = await Deno.makeTempDir();
 * const path = `${dir}/schema.json`;
 * await Deno.writeTextFile(path, "{}");
 * deepStrictEqual(await readCheckedText(path), { text: "{}", checked: false });
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readCheckedText(
  path: string,
): Promise<{ text: string; checked: boolean } | null> {
  const text = await readTextOrNull(path);
  if (text === null) return null;
  const side = await readSidecar(path);
  if (side === null) return { text, checked: false };
  const sum = crcHex(text);
  if (!side.sums.includes(sum)) {
    throw new LogCorruptError(
      path,
      0,
      `checksum mismatch (its text sums to "${sum}", ${basename(path)}${SIDECAR_SUFFIX} ` +
        `says ${side.sums.map((s) => `"${s}"`).join(" or ")})`,
    );
  }
  return { text, checked: true };
}

/**
 * Checks every sidecar-checked file in `dir` (each `X.crc32` and its `X`):
 * throws {@linkcode LogCorruptError} naming the first damaged one.
 *
 * @example
 * ```ts
 * import { checkSidecarFiles, writeCheckedText } from "./meta_file.ts";
 * const dir = await Deno.makeTempDir();
 * await writeCheckedText(`${dir}/schema.json`, "{}");
 * await checkSidecarFiles(dir); // passes
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function checkSidecarFiles(dir: string): Promise<void> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (e.isFile && e.name.endsWith(SIDECAR_SUFFIX)) names.push(e.name);
  }
  for (const n of names.sort()) {
    const path = `${dir}/${n.slice(0, -SIDECAR_SUFFIX.length)}`;
    await readCheckedText(path);
  }
}
