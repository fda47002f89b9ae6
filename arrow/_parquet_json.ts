/**
 * Marks JSON text columns of a Parquet file with Parquet's JSON logical
 * type. parquet-wasm writes an `arrow.json` column as a plain UTF-8 string
 * (logical type STRING, converted type UTF8); the footer is patched in place
 * to say JSON (logical type JSON = union field 12, converted type JSON = 19).
 * Both encodings take the same number of bytes in Thrift's compact protocol
 * (the union's field header `0x1C` becomes `0xCC`, the converted type's
 * zigzag varint 0 becomes 38), so the file keeps its length and offsets.
 *
 * ```text
 * file:   "PAR1" … footer (Thrift compact FileMetaData) u32le(footer length) "PAR1"
 * FileMetaData.2 schema: list<SchemaElement>, depth first from the root
 * SchemaElement: 4 name (binary), 5 num_children (i32), 6 converted_type (i32),
 *                10 logicalType (union LogicalType { 1 STRING, …, 12 JSON })
 * ```
 *
 * @module
 */

const STRUCT = 12;

class Compact {
  pos = 0;
  constructor(readonly buf: Uint8Array) {}
  byte(): number {
    if (this.pos >= this.buf.length) throw new RangeError("Parquet footer ends early");
    return this.buf[this.pos++];
  }
  varint(): number {
    let shift = 0;
    let out = 0;
    for (;;) {
      const b = this.byte();
      out += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return out;
      shift += 7;
    }
  }
  zigzag(): number {
    const v = this.varint();
    return v % 2 === 0 ? v / 2 : -(v + 1) / 2;
  }
  /** The next field header: [id, type]; type 0 is the end of the struct. */
  field(last: number): [number, number] {
    const b = this.byte();
    const type = b & 0x0f;
    if (type === 0) return [0, 0];
    const delta = b >> 4;
    return [delta === 0 ? this.zigzag() : last + delta, type];
  }
  skip(type: number): void {
    switch (type) {
      case 1:
      case 2:
        return; // a bool field carries its value in the header
      case 3:
        this.pos++;
        return;
      case 4:
      case 5:
      case 6:
        this.varint();
        return;
      case 7:
        this.pos += 8;
        return;
      case 8:
        this.pos += this.varint();
        return;
      case 9:
      case 10: {
        const h = this.byte();
        const n = (h >> 4) === 15 ? this.varint() : h >> 4;
        const t = h & 0x0f;
        for (let i = 0; i < n; i++) t === 1 || t === 2 ? this.pos++ : this.skip(t);
        return;
      }
      case 11: {
        const n = this.varint();
        if (n === 0) return;
        const kv = this.byte();
        for (let i = 0; i < n; i++) {
          this.skip(kv >> 4);
          this.skip(kv & 0x0f);
        }
        return;
      }
      case STRUCT: {
        let id = 0;
        for (;;) {
          const [next, t] = this.field(id);
          if (t === 0) return;
          this.skip(t);
          id = next;
        }
      }
    }
    throw new RangeError(`Parquet footer: unknown Thrift type ${type} at byte ${this.pos}`);
  }
}

interface Element {
  name: string;
  children: number;
  /** Where the converted type's value byte is (-1: none). */
  converted: number;
  /** Where the logical type union's field header is (-1: none). */
  logical: number;
}

function readElement(c: Compact): Element {
  const e: Element = { name: "", children: 0, converted: -1, logical: -1 };
  let id = 0;
  for (;;) {
    const [next, t] = c.field(id);
    if (t === 0) return e;
    id = next;
    if (id === 4 && t === 8) {
      const n = c.varint();
      e.name = new TextDecoder().decode(c.buf.subarray(c.pos, c.pos + n));
      c.pos += n;
    } else if (id === 5 && t === 5) e.children = c.zigzag();
    else if (id === 6 && t === 5) {
      e.converted = c.pos;
      c.varint();
    } else if (id === 10 && t === STRUCT) {
      e.logical = c.pos;
      c.skip(t);
    } else c.skip(t);
  }
}

/**
 * Patches the Parquet footer `footer` (the Thrift bytes, without the length
 * and magic) so that the top-level string columns named in `names` have
 * the JSON logical type; returns how many were marked.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { markJsonColumns } from "./_parquet_json.ts";
 * // A FileMetaData with no members (just the stop byte): nothing to mark.
 * equal(markJsonColumns(new Uint8Array([0x00]), new Set(["x"])), 0);
 * ```
 */
export function markJsonColumns(footer: Uint8Array, names: ReadonlySet<string>): number {
  const c = new Compact(footer);
  let id = 0;
  for (;;) {
    const [next, t] = c.field(id);
    if (t === 0) return 0;
    id = next;
    if (id !== 2 || t !== 9) {
      c.skip(t);
      continue;
    }
    const h = c.byte();
    const n = (h >> 4) === 15 ? c.varint() : h >> 4;
    const elements: Element[] = [];
    for (let i = 0; i < n; i++) elements.push(readElement(c));
    let marked = 0;
    // The root's children, each followed by its subtree.
    let i = 1;
    const subtree = (k: number): number => {
      let end = k + 1;
      for (let j = 0; j < elements[k].children; j++) end = subtree(end);
      return end;
    };
    for (let k = 0; k < (elements[0]?.children ?? 0) && i < elements.length; k++) {
      const e = elements[i];
      if (e.children === 0 && names.has(e.name)) {
        if (e.converted >= 0 && footer[e.converted] === 0) footer[e.converted] = 38;
        if (e.logical >= 0 && footer[e.logical] === 0x1c) {
          footer[e.logical] = 0xcc;
          marked++;
        }
      }
      i = subtree(i);
    }
    return marked;
  }
}

/**
 * Marks the JSON columns `names` in the Parquet file open at `file` (read
 * and write), in place. Returns how many were marked.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { writeAll } from "../common/write_all.ts";
 * import { ArrowRowBuilder } from "./row_builder.ts";
 * import { writeParquet } from "./parquet_writer.ts";
 * import { markParquetJson } from "./_parquet_json.ts";
 * const builder = new ArrowRowBuilder({
 *   type: "object",
 *   properties: { meta: { type: "object" } }, // a JSON text column
 *   required: ["meta"],
 * });
 * const path = await Deno.makeTempFile({ suffix: ".parquet" });
 * using file = await Deno.open(path, { read: true, write: true });
 * async function* batches() {
 *   yield builder.fromJson([1], ['{"meta":{"a":1}}']);
 * }
 * await writeParquet(batches(), builder, { rowGroupRows: 1024, write: (b) => writeAll(file, b) });
 * equal(await markParquetJson(file, new Set(["meta"])), 1);
 * await Deno.remove(path);
 * ```
 */
export async function markParquetJson(
  file: Deno.FsFile,
  names: ReadonlySet<string>,
): Promise<number> {
  if (names.size === 0) return 0;
  const size = (await file.stat()).size;
  const tail = new Uint8Array(8);
  await file.seek(size - 8, Deno.SeekMode.Start);
  await readFull(file, tail);
  const length = new DataView(tail.buffer).getUint32(0, true);
  const start = size - 8 - length;
  const footer = new Uint8Array(length);
  await file.seek(start, Deno.SeekMode.Start);
  await readFull(file, footer);
  const marked = markJsonColumns(footer, names);
  if (marked > 0) {
    await file.seek(start, Deno.SeekMode.Start);
    let done = 0;
    while (done < footer.length) done += await file.write(footer.subarray(done));
  }
  await file.seek(0, Deno.SeekMode.End);
  return marked;
}

async function readFull(file: Deno.FsFile, buf: Uint8Array): Promise<void> {
  let at = 0;
  while (at < buf.length) {
    const n = await file.read(buf.subarray(at));
    if (n === null) throw new RangeError("Parquet file ends early");
    at += n;
  }
}
