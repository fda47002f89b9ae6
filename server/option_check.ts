/**
 * Checks of an options object at the call that takes it: a wrong type is a
 * `TypeError`, a wrong value a `RangeError`, an unknown key a `TypeError`,
 * each naming the option and the value seen, e.g.
 * `serve: options.port must be an integer 0..65535, got "80"`.
 * Private to `server/`.
 *
 * @module
 */

/**
 * A value as a message shows it: strings quoted, objects by kind.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { shown } from "./option_check.ts";
 * equal(shown("80"), '"80"');
 * equal(shown(null), "null");
 * equal(shown([1]), "an array");
 * ```
 */
export function shown(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v.length > 80 ? v.slice(0, 80) + "…" : v);
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return `an object (${v.constructor?.name ?? "Object"})`;
  if (typeof v === "function") return "a function";
  if (typeof v === "bigint") return `${v}n`;
  return String(v);
}

/**
 * Checks `options` is an object (or absent) whose keys are all in `known`.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { checkKeys } from "./option_check.ts";
 * throws(() => checkKeys("serve", { prot: 1 }, ["port"]), {
 *   name: "TypeError",
 *   message: 'serve: unknown option "prot" (known: port)',
 * });
 * ```
 */
export function checkKeys(
  where: string,
  options: unknown,
  known: readonly string[],
): Record<string, unknown> {
  if (options === undefined) return {};
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw new TypeError(`${where}: options must be an object, got ${shown(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) {
      throw new TypeError(
        `${where}: unknown option ${JSON.stringify(key)} (known: ${known.join(", ")})`,
      );
    }
  }
  return options as Record<string, unknown>;
}

/**
 * Reads the options of one call, checking each: messages name `where`
 * ("serve") and the option ("port").
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { OptionCheck } from "./option_check.ts";
 * const o = new OptionCheck("serve", { port: 80 });
 * equal(o.int("port", 0, 65535, 8765), 80);
 * equal(o.bool("closeStreams", true), true); // absent: the fallback
 * ```
 */
export class OptionCheck {
  readonly #where: string;
  readonly #o: Record<string, unknown>;

  /** Checks the options of `where`. */
  constructor(where: string, options: Record<string, unknown>) {
    this.#where = where;
    this.#o = options;
  }

  #name(key: string): string {
    return `${this.#where}: options.${key}`;
  }

  /** The option's value, undefined when absent (or set to undefined). */
  get(key: string): unknown {
    return this.#o[key];
  }

  /**
   * An integer in `[min, max]`, or `fallback` when absent; `nullable` also
   * accepts `null`.
   */
  int(key: string, min: number, max: number, fallback: number): number;
  int(
    key: string,
    min: number,
    max: number,
    fallback: number | null,
    nullable: true,
  ): number | null;
  int(
    key: string,
    min: number,
    max: number,
    fallback: number | null,
    nullable = false,
  ): number | null {
    const v = this.#o[key];
    if (v === undefined) return fallback;
    if (v === null && nullable) return null;
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `${min}..${max}`;
    const what = `${this.#name(key)} must be an integer ${range}${nullable ? " or null" : ""}`;
    if (typeof v !== "number") throw new TypeError(`${what}, got ${shown(v)}`);
    if (!Number.isSafeInteger(v) || v < min || v > max) throw new RangeError(`${what}, got ${v}`);
    return v;
  }

  /** A finite number `>= min` (`> min` unless `inclusive`), or `fallback` when absent. */
  number(key: string, min: number, inclusive: boolean, fallback: number): number {
    const v = this.#o[key];
    if (v === undefined) return fallback;
    const what = `${this.#name(key)} must be a number ${inclusive ? ">=" : ">"} ${min}`;
    if (typeof v !== "number") throw new TypeError(`${what}, got ${shown(v)}`);
    if (!Number.isFinite(v) || (inclusive ? v < min : v <= min)) {
      throw new RangeError(`${what}, got ${v}`);
    }
    return v;
  }

  /** A boolean, or `fallback` when absent. */
  bool(key: string, fallback: boolean): boolean {
    const v = this.#o[key];
    if (v === undefined) return fallback;
    if (typeof v !== "boolean") {
      throw new TypeError(`${this.#name(key)} must be a boolean, got ${shown(v)}`);
    }
    return v;
  }

  /** A non-empty string, or `fallback` when absent. */
  string(key: string, fallback: string): string;
  string(key: string, fallback: undefined): string | undefined;
  string(key: string, fallback: string | undefined): string | undefined {
    const v = this.#o[key];
    if (v === undefined) return fallback;
    if (typeof v !== "string") {
      throw new TypeError(`${this.#name(key)} must be a string, got ${shown(v)}`);
    }
    if (v === "") throw new RangeError(`${this.#name(key)} must not be empty, got ""`);
    return v;
  }

  /** A function, or undefined when absent. */
  fn<F>(key: string): F | undefined {
    const v = this.#o[key];
    if (v === undefined) return undefined;
    if (typeof v !== "function") {
      throw new TypeError(`${this.#name(key)} must be a function, got ${shown(v)}`);
    }
    return v as F;
  }

  /** An instance of `kind`, or undefined when absent (`nullable`: null too). */
  instance<T>(
    key: string,
    kind: { readonly prototype: T; readonly name: string },
    nullable = false,
  ): T | null | undefined {
    const v = this.#o[key];
    if (v === undefined || (v === null && nullable)) return v as null | undefined;
    if (!(v instanceof (kind as unknown as typeof Object))) {
      throw new TypeError(
        `${this.#name(key)} must be ${/^[AEIOU]/.test(kind.name) ? "an" : "a"} ${kind.name}` +
          `${nullable ? " or null" : ""}, got ${shown(v)}`,
      );
    }
    return v as T;
  }

  /** A plain object (not null, not an array), or undefined when absent. */
  object(key: string): Record<string, unknown> | undefined {
    const v = this.#o[key];
    if (v === undefined) return undefined;
    if (v === null || typeof v !== "object" || Array.isArray(v)) {
      throw new TypeError(`${this.#name(key)} must be an object, got ${shown(v)}`);
    }
    return v as Record<string, unknown>;
  }

  /** Throws the `TypeError` of option `key`, `what` it must be. */
  typeError(key: string, what: string): never {
    throw new TypeError(`${this.#name(key)} must be ${what}, got ${shown(this.#o[key])}`);
  }

  /** Throws the `RangeError` of option `key`, `what` it must be. */
  rangeError(key: string, what: string): never {
    throw new RangeError(`${this.#name(key)} must be ${what}, got ${shown(this.#o[key])}`);
  }
}
