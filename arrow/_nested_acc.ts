/**
 * Filling a Struct or List column straight into growable typed arrays
 * (apache-arrow's generic builders cost several times more per value), from
 * the stored bytes or from parsed JSON values.
 *
 * - `scan(buf, p, end, write)` reads the value at `buf[p]` as the row
 *   builder's scan reads a row: no whitespace, numbers of up to 15 digits,
 *   plain ASCII strings; a struct's members in any order. It returns the
 *   index after the value, or -1 for anything else (the caller then parses
 *   the value exactly). With `write` it appends as it reads; `truncate(n)`
 *   drops what a row that did not scan after all left behind (also part of
 *   a value that failed half-way). With `write` false it only checks.
 * - `push(v)` appends a parsed value, checking it against the type; `false`
 *   on a mismatch, and the caller names the place (`nested_type.ts`
 *   `toArrowValue` throws the message).
 *
 * @module
 */

import { scanEnd, scanNumber } from "./number_scanner.ts";

import {
  Bool,
  type Data,
  type DataType,
  type Field,
  Float32,
  Float64,
  Int32,
  Int64,
  type List,
  makeData,
  type Struct,
  Type,
  Utf8,
} from "apache-arrow";

const TWO_32 = 4294967296;
const utf8 = new TextEncoder();

/** A column being filled. */
export interface NestedAcc {
  /** Appends `v` (null for a null slot); false when it does not fit the type. */
  push(v: unknown): boolean;
  /** Appends a slot under a null parent: null if nullable, else a default value. */
  pad(): void;
  /** Reads (and with `write`, appends) the value at `buf[p]`; the index after it, or -1. */
  scan(buf: Uint8Array, p: number, end: number, write: boolean): number;
  /** How many slots it holds. */
  readonly length: number;
  /** Drops the slots from `n` on (a row that did not scan after all). */
  truncate(n: number): void;
  /** The Arrow data of what was appended. */
  data(): Data;
}

class Validity {
  bits = new Uint8Array(16);
  n = 0;
  nulls = 0;
  push(valid: boolean): void {
    if (this.n >> 3 >= this.bits.length) {
      const next = new Uint8Array(this.bits.length * 2);
      next.set(this.bits);
      this.bits = next;
    }
    if (valid) this.bits[this.n >> 3] |= 1 << (this.n & 7);
    else this.nulls++;
    this.n++;
  }
  /** Drops the slots from `n` on. */
  truncate(n: number): void {
    for (let i = n; i < this.n; i++) {
      const bit = 1 << (i & 7);
      if ((this.bits[i >> 3] & bit) === 0) this.nulls--;
      else this.bits[i >> 3] &= ~bit;
    }
    this.n = Math.min(n, this.n);
  }
  common(): { length: number; nullCount: number; nullBitmap?: Uint8Array } {
    return this.nulls === 0
      ? { length: this.n, nullCount: 0 }
      : { length: this.n, nullCount: this.nulls, nullBitmap: this.bits };
  }
}

type Numbers = Int32Array | Float32Array | Float64Array;

class ScalarAcc implements NestedAcc {
  readonly #valid = new Validity();
  #nums: Numbers | null = null;
  #words: Int32Array | null = null; // Int64 as two words per value
  #bits: Validity | null = null; // Bool values
  #offs: Int32Array | null = null; // Utf8
  #bytes = new Uint8Array(0);
  #at = 0;
  constructor(readonly type: DataType, readonly nullable: boolean) {
    switch (type.typeId) {
      case Type.Bool:
        this.#bits = new Validity();
        break;
      case Type.Int:
        if ((type as Int64).bitWidth === 64) this.#words = new Int32Array(32);
        else this.#nums = new Int32Array(16);
        break;
      case Type.Float:
        this.#nums = (type as Float32).precision === 1
          ? new Float32Array(16)
          : new Float64Array(16);
        break;
      case Type.Utf8:
        this.#offs = new Int32Array(17);
        this.#bytes = new Uint8Array(256);
        break;
    }
  }
  push(v: unknown): boolean {
    const i = this.#valid.n;
    this.#room(i); // a null takes a slot too
    const ok = v === null || v === undefined ? this.nullable : this.#set(i, v);
    if (!ok) return false;
    this.#valid.push(v !== null && v !== undefined);
    if (v === null || v === undefined) {
      if (this.#bits) this.#bits.push(false);
      if (this.#offs) this.#offs[i + 1] = this.#at;
    }
    return true;
  }
  get length(): number {
    return this.#valid.n;
  }
  truncate(n: number): void {
    if (n >= this.#valid.n) return;
    if (this.#bits) {
      // A value bit that is clear stands for false, not a null: recount nothing.
      for (let i = n; i < this.#bits.n; i++) this.#bits.bits[i >> 3] &= ~(1 << (i & 7));
      this.#bits.n = n;
      this.#bits.nulls = 0;
    }
    if (this.#offs) this.#at = this.#offs[n];
    this.#valid.truncate(n);
  }
  scan(buf: Uint8Array, p: number, end: number, write: boolean): number {
    const b = buf[p];
    if (b === 110) { // null
      if (!this.nullable || buf[p + 1] !== 117 || buf[p + 2] !== 108 || buf[p + 3] !== 108) {
        return -1;
      }
      if (write) this.push(null);
      return p + 4;
    }
    switch (this.type.typeId) {
      case Type.Bool:
        if (b === 116 && buf[p + 1] === 114 && buf[p + 2] === 117 && buf[p + 3] === 101) {
          if (write) this.push(true);
          return p + 4;
        }
        if (
          b === 102 && buf[p + 1] === 97 && buf[p + 2] === 108 && buf[p + 3] === 115 &&
          buf[p + 4] === 101
        ) {
          if (write) this.push(false);
          return p + 5;
        }
        return -1;
      case Type.Int:
      case Type.Float: {
        const v = scanNumber(buf, p);
        if (v !== v) return -1;
        const q = scanEnd[0];
        const words = this.#words;
        if (words !== null) {
          if (!Number.isInteger(v)) return -1;
        } else if (this.type.typeId === Type.Int && (v | 0) !== v) return -1;
        if (write) {
          // The common case written in place (push would check it again).
          const i = this.#valid.n;
          if (words !== null ? 2 * i + 1 >= words.length : i >= this.#nums!.length) this.#room(i);
          if (words !== null) {
            const hi = Math.floor(v / TWO_32);
            this.#words![2 * i] = v - hi * TWO_32;
            this.#words![2 * i + 1] = hi;
          } else this.#nums![i] = v;
          this.#valid.push(true);
        }
        return q;
      }
      case Type.Utf8: {
        if (b !== 34) return -1;
        let q = p + 1;
        let x = buf[q];
        while (x !== 34 && x !== 92 && x < 0x80 && x >= 0x20 && q < end) x = buf[++q];
        if (x !== 34 || q >= end) return -1;
        if (write) {
          const i = this.#valid.n;
          this.#room(i);
          const n = q - p - 1;
          if (this.#at + n > this.#bytes.length) {
            const next = new Uint8Array(Math.max(this.#bytes.length * 2, this.#at + n));
            next.set(this.#bytes.subarray(0, this.#at));
            this.#bytes = next;
          }
          this.#bytes.set(buf.subarray(p + 1, q), this.#at);
          this.#at += n;
          if (this.#at > 0x7fff_ffff) throw new RangeError("more than 2 GiB of text in a batch");
          this.#offs![i + 1] = this.#at;
          this.#valid.push(true);
        }
        return q + 1;
      }
    }
    return -1;
  }
  pad(): void {
    if (this.nullable) {
      this.push(null);
      return;
    }
    const t = this.type.typeId;
    this.#set(this.#valid.n, t === Type.Bool ? false : t === Type.Utf8 ? "" : 0);
    this.#valid.push(true);
  }
  #room(i: number): void {
    if (this.#nums && i >= this.#nums.length) {
      const next = new (this.#nums.constructor as new (n: number) => Numbers)(
        this.#nums.length * 2,
      );
      next.set(this.#nums);
      this.#nums = next;
    }
    if (this.#words && 2 * i + 1 >= this.#words.length) {
      const next = new Int32Array(this.#words.length * 2);
      next.set(this.#words);
      this.#words = next;
    }
    if (this.#offs && i + 1 >= this.#offs.length) {
      const next = new Int32Array(this.#offs.length * 2);
      next.set(this.#offs);
      this.#offs = next;
    }
  }
  #set(i: number, v: unknown): boolean {
    this.#room(i);
    switch (this.type.typeId) {
      case Type.Bool:
        if (typeof v !== "boolean") return false;
        this.#bits!.push(v);
        return true;
      case Type.Int:
        if (this.#words) {
          if (!Number.isSafeInteger(v)) return false;
          const hi = Math.floor((v as number) / TWO_32);
          this.#words[2 * i] = (v as number) - hi * TWO_32;
          this.#words[2 * i + 1] = hi;
          return true;
        }
        if (typeof v !== "number" || (v | 0) !== v) return false;
        this.#nums![i] = v;
        return true;
      case Type.Float:
        if (typeof v !== "number") return false;
        this.#nums![i] = v;
        return true;
      case Type.Utf8: {
        if (typeof v !== "string") return false;
        if (this.#at + v.length * 3 > this.#bytes.length) {
          const next = new Uint8Array(Math.max(this.#bytes.length * 2, this.#at + v.length * 3));
          next.set(this.#bytes.subarray(0, this.#at));
          this.#bytes = next;
        }
        this.#at += utf8.encodeInto(v, this.#bytes.subarray(this.#at)).written;
        if (this.#at > 0x7fff_ffff) throw new RangeError("more than 2 GiB of text in a batch");
        this.#offs![i + 1] = this.#at;
        return true;
      }
    }
    return false;
  }
  data(): Data {
    const n = this.#valid.n;
    const common = this.#valid.common();
    switch (this.type.typeId) {
      case Type.Bool:
        return makeData({ type: new Bool(), ...common, data: this.#bits!.bits });
      case Type.Int:
        return this.#words
          ? makeData({
            type: new Int64(),
            ...common,
            data: new BigInt64Array(this.#words.buffer, 0, n),
          })
          : makeData({
            type: new Int32(),
            ...common,
            data: (this.#nums as Int32Array).subarray(0, n),
          });
      case Type.Float:
        return (this.type as Float32).precision === 1
          ? makeData({
            type: new Float32(),
            ...common,
            data: (this.#nums as Float32Array).subarray(0, n),
          })
          : makeData({
            type: new Float64(),
            ...common,
            data: (this.#nums as Float64Array).subarray(0, n),
          });
      default:
        return makeData({
          type: new Utf8(),
          ...common,
          data: this.#bytes.subarray(0, this.#at),
          valueOffsets: this.#offs!.subarray(0, n + 1),
        });
    }
  }
}

class ListAcc implements NestedAcc {
  readonly #valid = new Validity();
  #offs = new Int32Array(17);
  #items = 0;
  readonly #child: NestedAcc;
  constructor(readonly type: List, readonly nullable: boolean) {
    const f = type.children[0];
    this.#child = makeNestedAcc(f.type, f.nullable);
  }
  push(v: unknown): boolean {
    const i = this.#valid.n;
    if (v === null || v === undefined) {
      if (!this.nullable) return false;
    } else {
      if (!Array.isArray(v)) return false;
      for (let k = 0; k < v.length; k++) if (!this.#child.push(v[k])) return false;
      this.#items += v.length;
    }
    if (i + 1 >= this.#offs.length) {
      const next = new Int32Array(this.#offs.length * 2);
      next.set(this.#offs);
      this.#offs = next;
    }
    this.#offs[i + 1] = this.#items;
    this.#valid.push(v !== null && v !== undefined);
    return true;
  }
  pad(): void {
    this.push(this.nullable ? null : []);
  }
  get length(): number {
    return this.#valid.n;
  }
  truncate(n: number): void {
    // Children may hold more than the committed slots (a value that failed part-way).
    if (n > this.#valid.n) return;
    this.#items = this.#offs[n];
    this.#child.truncate(this.#items);
    this.#valid.truncate(n);
  }
  scan(buf: Uint8Array, p: number, end: number, write: boolean): number {
    if (buf[p] === 110) {
      if (!this.nullable || buf[p + 1] !== 117 || buf[p + 2] !== 108 || buf[p + 3] !== 108) {
        return -1;
      }
      if (write) this.push(null);
      return p + 4;
    }
    if (buf[p] !== 91) return -1;
    let q = p + 1;
    let count = 0;
    if (buf[q] === 93) q++;
    else {
      for (;;) {
        q = this.#child.scan(buf, q, end, write);
        if (q < 0) return -1;
        count++;
        const c = buf[q++];
        if (c === 93) break;
        if (c !== 44) return -1;
      }
    }
    if (q > end) return -1;
    if (write) {
      const i = this.#valid.n;
      if (i + 1 >= this.#offs.length) {
        const next = new Int32Array(this.#offs.length * 2);
        next.set(this.#offs);
        this.#offs = next;
      }
      this.#items += count;
      this.#offs[i + 1] = this.#items;
      this.#valid.push(true);
    }
    return q;
  }
  data(): Data {
    const n = this.#valid.n;
    return makeData({
      type: this.type,
      ...this.#valid.common(),
      valueOffsets: this.#offs.subarray(0, n + 1),
      child: this.#child.data(),
    });
  }
}

class StructAcc implements NestedAcc {
  readonly #valid = new Validity();
  readonly #names: string[];
  readonly #children: NestedAcc[];
  readonly #nullable: boolean[];
  /** Each field's name as the bytes of its JSON key (`"name"`), for the scan. */
  readonly #keys: Uint8Array[];
  readonly #seen: Uint8Array;
  constructor(readonly type: Struct, readonly nullable: boolean) {
    const fields = type.children as Field[];
    this.#names = fields.map((f) => f.name);
    this.#keys = fields.map((f) => utf8.encode(JSON.stringify(f.name)));
    this.#seen = new Uint8Array(fields.length);
    this.#nullable = fields.map((f) => f.nullable);
    this.#children = fields.map((f) => makeNestedAcc(f.type, f.nullable));
  }
  get length(): number {
    return this.#valid.n;
  }
  truncate(n: number): void {
    // Children may hold more than the committed slots (a value that failed part-way).
    if (n > this.#valid.n) return;
    for (const c of this.#children) c.truncate(n);
    this.#valid.truncate(n);
  }
  scan(buf: Uint8Array, p: number, end: number, write: boolean): number {
    if (buf[p] === 110) {
      if (!this.nullable || buf[p + 1] !== 117 || buf[p + 2] !== 108 || buf[p + 3] !== 108) {
        return -1;
      }
      if (write) this.push(null);
      return p + 4;
    }
    if (buf[p] !== 123) return -1;
    const seen = this.#seen;
    seen.fill(0);
    const keys = this.#keys;
    let q = p + 1;
    if (buf[q] === 125) q++;
    else {
      // Members come in the producer's order, usually the same from one
      // value to the next: the field after the last one matched is tried first.
      let guess = 0;
      for (;;) {
        let k = -1;
        for (let t = 0; t < keys.length; t++) {
          const f = guess + t < keys.length ? guess + t : guess + t - keys.length;
          const key = keys[f];
          let match = seen[f] === 0 && buf[q + key.length] === 58;
          for (let j = 0; match && j < key.length; j++) match = buf[q + j] === key[j];
          if (match) {
            k = f;
            break;
          }
        }
        if (k < 0) return -1;
        guess = k + 1 === keys.length ? 0 : k + 1;
        seen[k] = 1;
        q = this.#children[k].scan(buf, q + keys[k].length + 1, end, write);
        if (q < 0) return -1;
        const c = buf[q++];
        if (c === 125) break;
        if (c !== 44) return -1;
      }
    }
    if (q > end) return -1;
    for (let f = 0; f < keys.length; f++) {
      if (seen[f] === 0) {
        if (!this.#nullable[f]) return -1;
        if (write) this.#children[f].push(null);
      }
    }
    if (write) this.#valid.push(true);
    return q;
  }
  pad(): void {
    if (this.nullable) this.push(null);
    else {
      for (const c of this.#children) c.pad();
      this.#valid.push(true);
    }
  }
  push(v: unknown): boolean {
    if (v === null || v === undefined) {
      if (!this.nullable) return false;
      // Under a null struct every child still takes a slot.
      for (const c of this.#children) c.pad();
    } else {
      if (typeof v !== "object" || Array.isArray(v)) return false;
      const o = v as Record<string, unknown>;
      for (let k = 0; k < this.#names.length; k++) {
        const name = this.#names[k];
        const x = Object.hasOwn(o, name) ? o[name] : null;
        if ((x === null && !this.#nullable[k]) || !this.#children[k].push(x)) return false;
      }
    }
    this.#valid.push(v !== null && v !== undefined);
    return true;
  }
  data(): Data {
    return makeData({
      type: this.type,
      ...this.#valid.common(),
      children: this.#children.map((c) => c.data()),
    });
  }
}

/**
 * A {@linkcode NestedAcc} for `type` (Struct, List, or one of their leaves).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Field, Float64, List } from "apache-arrow";
 * import { makeNestedAcc } from "./_nested_acc.ts";
 * const acc = makeNestedAcc(new List(new Field("item", new Float64())), false);
 * acc.push([1.5, 2]);
 * equal(acc.data().length, 1);
 * ```
 */
export function makeNestedAcc(type: DataType, nullable: boolean): NestedAcc {
  if (type.typeId === Type.List) return new ListAcc(type as List, nullable);
  if (type.typeId === Type.Struct) return new StructAcc(type as Struct, nullable);
  return new ScalarAcc(type, nullable);
}
