/**
 * The row validator: the checked schema compiled once by ajv (one shared
 * instance, with ajv-formats and the number formats of {@linkcode NUMBER_FORMATS}),
 * and ajv's first error turned into one line in JSON Schema terms.
 *
 * @module
 */

import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
// Both packages are CommonJS. Deno's types see `export default` as the
// module's `default` property while at run time the default import is
// `module.exports`; both packages set `module.exports.default` to the plugin,
// and ajv exports its class by name, so these two spellings agree.
import ajvFormats from "ajv-formats";
const addFormats = ajvFormats.default;
import { display, kindOf, pointerUnescape } from "./_json.ts";
import { checkNestedValue } from "./nested.ts";
import { FORMAT_RULES, NUMBER_FORMATS } from "./rules.ts";
import { refuse, SchemaError } from "./schema_error.ts";

/**
 * How many schemas one ajv instance compiles before it is replaced. A new
 * instance costs ~10 ms (it compiles its meta-schema); each compile leaves a
 * few values in the instance's code scope for good, even after
 * `removeSchema`. Replacing it now and then bounds that at a trivial cost.
 */
const COMPILES_PER_AJV = 256;

let shared: AjvContext | undefined;
let compilesLeft = 0;

/**
 * An ajv instance and the string formats it knows, from {@linkcode getAjv}.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { type AjvContext, getAjv } from "./validator.ts";
 * const context: AjvContext = getAjv();
 * ok(context.stringFormats.includes("date-time"));
 * ```
 */
export interface AjvContext {
  /** The instance, with ajv-formats and the number formats added. */
  readonly ajv: Ajv;
  /** The formats a `string` column may name, sorted. */
  readonly stringFormats: readonly string[];
}

/**
 * The ajv instance to compile the next schema with. Derived schemas carry no
 * `$id`, and each is removed from ajv's cache after compiling (the validate
 * function keeps what it needs), so streams never collide.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { getAjv } from "./validator.ts";
 * const { ajv } = getAjv();
 * equal(ajv.compile({ type: "integer", format: "int32" })(2 ** 31), false);
 * ```
 */
export function getAjv(): AjvContext {
  if (shared !== undefined && compilesLeft > 0) {
    compilesLeft--;
    return shared;
  }
  const ajv = new Ajv({
    allErrors: false,
    strict: true,
    strictNumbers: true, // `type: "number"` refuses NaN and ±Infinity
    allowUnionTypes: true, // [T, "null"]
    // Not ownProperties: it more than doubles the cost of a row, and a row's
    // column value is `row[name]` either way. Object.prototype holds only
    // functions (and __proto__, which is checked apart from ajv), so an
    // inherited member never passes as a column value; `describe` reports
    // it as the missing property it is.
  });
  addFormats(ajv);
  for (const [name, validate] of Object.entries(NUMBER_FORMATS)) {
    ajv.addFormat(name, { type: "number", validate });
  }
  const stringFormats = Object.keys(ajv.formats).filter((name) => !(name in NUMBER_FORMATS)).sort();
  shared = { ajv, stringFormats };
  compilesLeft = COMPILES_PER_AJV - 1;
  return shared;
}

/**
 * Builds `validate` over ajv, from each column's name and the schema ajv
 * compiles for it (in column order): `null` for a valid row, else one line
 * in JSON Schema terms. ajv ignores a property named `__proto__`
 * (its `properties` and `additionalProperties` skip that name), so such a
 * column is checked beside ajv: its own compiled subschema, an own-property
 * test, and a walk over the row's own keys in place of `additionalProperties`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { buildValidator, getAjv } from "./validator.ts";
 * const validate = buildValidator(getAjv().ajv, [["n", { type: "integer", format: "int64" }]]);
 * equal(validate({ n: 1 }), null);
 * equal(validate({ n: "1" }), "/n: must be integer");
 * ```
 */
export function buildValidator(
  ajv: Ajv,
  derived: readonly [string, Record<string, unknown>][],
): (row: unknown) => string | null {
  const types = new Map(derived.map(([name, prop]) => [name, typeText(prop.type)]));
  const proto = derived.find(([name]) => name === "__proto__")?.[1];
  const rest = derived.filter(([name]) => name !== "__proto__");
  const check = compileValidator(ajv, {
    type: "object",
    // fromEntries defines own properties, so no name can reach a prototype.
    properties: Object.fromEntries(rest),
    required: rest.map(([name]) => name),
    ...(proto === undefined ? { additionalProperties: false } : {}),
  });
  const checkProto = proto === undefined ? undefined : compileValidator(ajv, proto);
  const names = new Set(derived.map(([name]) => name));
  const nested = nestedNames(derived);

  return function validate(row: unknown): string | null {
    if (typeof row !== "object" || row === null || Array.isArray(row)) {
      return `must be object, got ${kindOf(row)}`;
    }
    const fields = row as Record<string, unknown>;
    if (!check(fields)) return describe(firstError(check), fields, "", types);
    if (nested !== null) {
      const problem = checkNested(fields, nested);
      if (problem !== null) return problem;
    }
    if (checkProto === undefined) return null;
    if (!Object.hasOwn(fields, "__proto__")) return "must have required property __proto__";
    if (!checkProto(fields["__proto__"])) {
      return describe(firstError(checkProto), fields, "/__proto__", types);
    }
    for (const key of Object.keys(fields)) {
      if (!names.has(key)) return `must NOT have additional property ${display(key)}`;
    }
    return null;
  };
}

// --- nested columns ------------------------------------------------------

/** The names of the object and array columns, with their pointers; null: none. */
function nestedNames(
  derived: readonly [string, Record<string, unknown>][],
): [string, string][] | null {
  const out: [string, string][] = [];
  for (const [name, prop] of derived) {
    const types = Array.isArray(prop.type) ? prop.type : [prop.type];
    if (types.includes("object") || types.includes("array")) {
      out.push([name, `/${name.replaceAll("~", "~0").replaceAll("/", "~1")}`]);
    }
  }
  return out.length === 0 ? null : out;
}

/** The first nested value that is not plain JSON (see `nested.ts`), or null. */
function checkNested(fields: Record<string, unknown>, nested: [string, string][]): string | null {
  for (let i = 0; i < nested.length; i++) {
    const v = fields[nested[i][0]];
    if (v === null || typeof v !== "object") continue;
    const problem = checkNestedValue(v, nested[i][1]);
    if (problem !== null) return problem;
  }
  return null;
}

/**
 * Compiles a nested column's schema on its own, so that a sub-schema ajv
 * refuses is refused at its column (`at`), in ajv's words.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { checkSubSchema, getAjv } from "./validator.ts";
 * const { ajv } = getAjv();
 * checkSubSchema(ajv, { type: "array", items: { type: "number" } }, "/properties/a");
 * throws(
 *   () => checkSubSchema(ajv, { type: "array", items: { type: "numbr" } }, "/properties/a"),
 *   /schema \/properties\/a: /,
 * );
 * ```
 */
export function checkSubSchema(ajv: Ajv, schema: Record<string, unknown>, at: string): void {
  try {
    ajv.compile(schema);
  } catch (err) {
    if (!(err instanceof Error)) throw err;
    throw refuse(at, err.message.replace(/^schema is invalid: /, "").split(", data")[0]);
  } finally {
    ajv.removeSchema(schema);
  }
}

/** The value at JSON Pointer `path` in `row`, or undefined. */
function valueAt(row: unknown, path: string): unknown {
  let v = row;
  for (const token of path.split("/").slice(1)) {
    if (typeof v !== "object" || v === null) return undefined;
    const key = pointerUnescape(token);
    if (!Object.hasOwn(v, key)) return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

function firstError(check: ValidateFunction): ErrorObject {
  return (check.errors as ErrorObject[])[0];
}

function compileValidator(ajv: Ajv, schema: Record<string, unknown>): ValidateFunction {
  let check: ValidateFunction;
  try {
    check = ajv.compile(schema);
  } catch (err) {
    // The checks above should leave nothing for ajv to refuse; if it still
    // does, the stream is refused all the same, in ajv's words.
    if (!(err instanceof Error)) throw err;
    throw new SchemaError(`schema: ${err.message}`);
  } finally {
    ajv.removeSchema(schema);
  }
  return check;
}

/** Turns ajv's first error into one line in JSON Schema terms. */
function describe(
  error: ErrorObject,
  row: Record<string, unknown>,
  prefix: string,
  types: Map<string, string>,
): string {
  const path = prefix + error.instancePath;
  const name = pointerUnescape(path.slice(1));
  const where = path === "" ? "" : `${display(path)}: `;
  const params = error.params as Record<string, unknown>;
  // Inside a nested column: the place is deeper than one column name.
  if (path.indexOf("/", 1) > 0) {
    const value = valueAt(row, path);
    if (error.keyword === "type") {
      return `${where}must be ${typeText(params.type)}${
        typeof value === "number" && !Number.isFinite(value)
          ? `, got ${value} (JSON has no NaN or Infinity)`
          : ""
      }`;
    }
    const rule = error.keyword === "format" ? FORMAT_RULES[String(params.format)] : undefined;
    if (rule !== undefined) {
      return `${where}must match format "${params.format}" (${rule}), got ${value}`;
    }
  }
  switch (error.keyword) {
    case "required":
      return `${where}must have required property ${display(String(params.missingProperty))}`;
    case "additionalProperties":
      return `${where}must NOT have additional property ${
        display(String(params.additionalProperty))
      }`;
    case "type": {
      if (path !== "" && !Object.hasOwn(row, name)) {
        return `must have required property ${display(name)}`;
      }
      const value = row[name];
      const expected = types.get(name) ?? String(params.type);
      if (typeof value === "number" && !Number.isFinite(value)) {
        return `${where}must be ${expected}, got ${value} (JSON has no NaN or Infinity)`;
      }
      return `${where}must be ${expected}`;
    }
    case "format": {
      const rule = FORMAT_RULES[String(params.format)];
      if (rule !== undefined) {
        return `${where}must match format "${params.format}" (${rule}), got ${row[name]}`;
      }
      return `${where}${error.message}`;
    }
    default:
      return `${where}${error.message}`;
  }
}

/** `"integer"`, or `"integer or null"` with null last whatever order the schema lists them in. */
function typeText(type: unknown): string {
  if (typeof type === "string" && type.includes(",")) type = type.split(",");
  if (!Array.isArray(type)) return String(type);
  return [...type.filter((t) => t !== "null"), "null"].join(" or ");
}
