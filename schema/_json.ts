/**
 * Small helpers on parsed JSON and JSON Pointers that the schema modules share.
 *
 * @module
 */

/**
 * Whether `value` is a JSON object (not null, not an array).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { isObject } from "./_json.ts";
 * equal(isObject({}), true);
 * equal(isObject([]), false);
 * equal(isObject(null), false);
 * ```
 */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The JSON kind of `value` as a message names it: `null`, `array`, or `typeof`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { kindOf } from "./_json.ts";
 * equal(kindOf([]), "array");
 * equal(kindOf(null), "null");
 * equal(kindOf(1), "number");
 * ```
 */
export function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/**
 * `text` as is when it reads unambiguously on one line, else JSON-quoted
 * (whitespace, quotes, backslashes, control and format characters, lone
 * surrogates), so every message stays one line and every name is recoverable.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { display } from "./_json.ts";
 * equal(display("/price"), "/price");
 * equal(display("a b"), '"a b"');
 * ```
 */
export function display(text: string): string {
  return /^[^\s"\\\p{C}]+$/u.test(text) ? text : JSON.stringify(text);
}

/**
 * Escapes a key as one JSON Pointer token (`~` as `~0`, `/` as `~1`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { pointerEscape } from "./_json.ts";
 * equal(pointerEscape("a/b~c"), "a~1b~0c");
 * ```
 */
export function pointerEscape(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}

/**
 * The key a JSON Pointer token stands for: the inverse of {@linkcode pointerEscape}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { pointerUnescape } from "./_json.ts";
 * equal(pointerUnescape("a~1b~0c"), "a/b~c");
 * ```
 */
export function pointerUnescape(token: string): string {
  return token.replaceAll("~1", "/").replaceAll("~0", "~");
}

/**
 * Freezes `value` and everything in it; returns it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { deepFreeze } from "./_json.ts";
 * const json = deepFreeze({ properties: { n: { type: "integer" } } });
 * equal(Object.isFrozen(json.properties.n), true);
 * ```
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const item of Object.values(value)) deepFreeze(item);
    Object.freeze(value);
  }
  return value;
}
