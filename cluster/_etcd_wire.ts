/**
 * The shapes of etcd 3.4's JSON gateway (grpc-gateway over the v3 API) and
 * their translation: keys and values travel as base64 of their bytes,
 * 64-bit integers as decimal strings, and members equal to their default
 * (`0`, `false`, the first enum value) are left out of answers.
 *
 * Revisions, versions and TTLs stay far below 2^53 and become numbers; lease
 * ids use all 64 bits and stay strings.
 *
 * @module
 */

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Base64 of the UTF-8 bytes of `s`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { b64 } from "./_etcd_wire.ts";
 * equal(b64("/a"), "L2E=");
 * ```
 */
export function b64(s: string | Uint8Array): string {
  const bytes = typeof s === "string" ? enc.encode(s) : s;
  let bin = "";
  for (let i = 0; i < bytes.length; i++) bin += String.fromCharCode(bytes[i]);
  return btoa(bin);
}

/**
 * The UTF-8 text of base64 `s` ("" for an absent member).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { unb64 } from "./_etcd_wire.ts";
 * equal(unb64("L2E="), "/a");
 * ```
 */
export function unb64(s: string | undefined): string {
  if (!s) return "";
  const bin = atob(s);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return dec.decode(bytes);
}

/**
 * The end of the key range holding every key that starts with `prefix`:
 * the prefix with its last byte incremented (bytes of 0xff dropped first).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { prefixEnd, unb64 } from "./_etcd_wire.ts";
 * equal(unb64(prefixEnd("/s/")), "/s0");
 * ```
 */
export function prefixEnd(prefix: string): string {
  const bytes = enc.encode(prefix);
  for (let i = bytes.length - 1; i >= 0; i--) {
    if (bytes[i] < 0xff) {
      const end = bytes.slice(0, i + 1);
      end[i]++;
      return b64(end);
    }
  }
  return b64(new Uint8Array([0])); // every key
}

/** An integer member of an answer (absent means 0). */
export function int(v: string | number | undefined): number {
  return v === undefined ? 0 : Number(v);
}

/** A key-value pair as the gateway sends it. */
export interface WireKv {
  key?: string;
  value?: string;
  create_revision?: string;
  mod_revision?: string;
  version?: string;
  lease?: string;
}

/**
 * A key with its value and revisions, as etcd keeps it.
 */
export interface KeyValue {
  /** The key, as text. */
  key: string;
  /** The value, as text. */
  value: string;
  /** The revision that created the key (0: it does not exist). */
  createRevision: number;
  /** The revision of its last change. */
  modRevision: number;
  /** How many times it was written since it was created. */
  version: number;
  /** The id of the lease it is attached to ("0": none). */
  lease: string;
}

/**
 * A {@linkcode KeyValue} from the gateway's shape.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { fromWireKv } from "./_etcd_wire.ts";
 * equal(fromWireKv({ key: "L2E=", mod_revision: "4" }).modRevision, 4);
 * ```
 */
export function fromWireKv(kv: WireKv): KeyValue {
  return {
    key: unb64(kv.key),
    value: unb64(kv.value),
    createRevision: int(kv.create_revision),
    modRevision: int(kv.mod_revision),
    version: int(kv.version),
    lease: kv.lease ?? "0",
  };
}

/**
 * One condition of a transaction: the key's `target` compared with `value`
 * (a missing key has 0 for every revision and the empty value).
 */
export interface Compare {
  /** The key compared. */
  key: string;
  /** What of it: its create or mod revision, version, value, or lease id. */
  target: "create" | "mod" | "version" | "value" | "lease";
  /** How. */
  op: "==" | "!=" | ">" | "<";
  /** With what: a number for revisions and versions, text for value and lease. */
  value: number | string;
}

/**
 * One operation of a transaction: put (optionally with a lease), range
 * (one key, or every key under a prefix) or delete.
 */
export type TxnOp =
  | { put: { key: string; value: string; lease?: string } }
  | { range: { key: string; prefix?: boolean } }
  | { delete: { key: string; prefix?: boolean } };

const TARGETS = {
  create: ["CREATE", "create_revision"],
  mod: ["MOD", "mod_revision"],
  version: ["VERSION", "version"],
  value: ["VALUE", "value"],
  lease: ["LEASE", "lease"],
} as const;

const RESULTS = { "==": "EQUAL", "!=": "NOT_EQUAL", ">": "GREATER", "<": "LESS" } as const;

/**
 * The gateway's form of a {@linkcode Compare}.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { toWireCompare } from "./_etcd_wire.ts";
 * deepEqual(toWireCompare({ key: "/a", target: "create", op: "==", value: 0 }), {
 *   key: "L2E=", target: "CREATE", result: "EQUAL", create_revision: "0",
 * });
 * ```
 */
export function toWireCompare(c: Compare): Record<string, string> {
  const [target, member] = TARGETS[c.target];
  const value = c.target === "value" ? b64(String(c.value)) : String(c.value);
  return { key: b64(c.key), target, result: RESULTS[c.op], [member]: value };
}

/** A range request's body for one key or a prefix. */
export function rangeBody(key: string, prefix = false): Record<string, string> {
  return prefix ? { key: b64(key), range_end: prefixEnd(key) } : { key: b64(key) };
}

/**
 * The gateway's form of a {@linkcode TxnOp}.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { toWireOp } from "./_etcd_wire.ts";
 * deepEqual(toWireOp({ delete: { key: "/a" } }), { request_delete_range: { key: "L2E=" } });
 * ```
 */
export function toWireOp(op: TxnOp): Record<string, unknown> {
  if ("put" in op) {
    const p = op.put;
    const body: Record<string, string> = { key: b64(p.key), value: b64(p.value) };
    if (p.lease !== undefined && p.lease !== "0") body.lease = p.lease;
    return { request_put: body };
  }
  if ("range" in op) return { request_range: rangeBody(op.range.key, op.range.prefix) };
  return { request_delete_range: rangeBody(op.delete.key, op.delete.prefix) };
}
