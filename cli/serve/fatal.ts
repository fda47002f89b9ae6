/**
 * How `serve` says what went wrong: {@linkcode Fatal} (one line and an exit
 * code) and the helpers that make its messages one line.
 *
 * @module
 */

/**
 * A reason to stop before or while serving: one line on stderr, and an exit code.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Fatal } from "./fatal.ts";
 * const err = new Fatal("cannot listen on 127.0.0.1:8765: the address is in use", 1);
 * equal(err.code, 1);
 * ```
 */
export class Fatal extends Error {
  /** The exit code. */
  readonly code: number;
  /** Makes the error. */
  constructor(message: string, code: number) {
    super(message);
    this.name = "Fatal";
    this.code = code;
  }
}

/**
 * How messages name a stream.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { show } from "./fatal.ts";
 * equal(show("trades"), 'stream "trades"');
 * equal(show(""), "the unnamed stream");
 * ```
 */
export function show(name: string): string {
  return name === "" ? "the unnamed stream" : `stream "${name}"`;
}

/**
 * An error's message on one line (runtime errors may span several).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { oneLine } from "./fatal.ts";
 * equal(oneLine(new Error("first\n  second")), "first second");
 * ```
 */
export function oneLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  // Module errors quote the source under the message; the location line says enough.
  const line = text.split("\n").map((l) => l.trim())
    .filter((l) => l !== "" && !/^(\d+\s*)?\|/.test(l)).join(" ");
  return line.length > 400 ? line.slice(0, 397) + "..." : line;
}

/**
 * Why a file could not be read, in a few words.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { fileError } from "./fatal.ts";
 * equal(fileError(new Deno.errors.NotFound("x")), "no such file");
 * ```
 */
export function fileError(err: unknown): string {
  if (err instanceof Deno.errors.NotFound) return "no such file";
  if (err instanceof Deno.errors.PermissionDenied) return "permission denied";
  if (err instanceof Deno.errors.IsADirectory) return "it is a directory";
  return oneLine(err);
}
