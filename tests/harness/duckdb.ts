// Helpers for the Arrow and Parquet suites: a DuckDB connection, and rows.
import { DuckDBInstance } from "@duckdb/node-api";

/** Runs `sql` in a fresh in-memory DuckDB and returns the rows as JS values (closed after). */
export async function duck(sql: string): Promise<unknown[][]> {
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  try {
    const reader = await connection.runAndReadAll(sql);
    return reader.getRowsJS() as unknown[][];
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

/** `DESCRIBE` of a Parquet file: column name to DuckDB type. */
export async function duckTypes(path: string): Promise<Record<string, string>> {
  const rows = await duck(`DESCRIBE SELECT * FROM read_parquet('${path}')`);
  return Object.fromEntries(rows.map((r) => [r[0] as string, r[1] as string]));
}

/** A schema with one column of every type, nullable and not. */
export const ALL_TYPES = {
  type: "object",
  properties: {
    b: { type: "boolean" },
    nb: { type: ["boolean", "null"] },
    i32: { type: "integer", format: "int32" },
    ni32: { type: ["integer", "null"], format: "int32" },
    i64: { type: "integer", format: "int64" },
    ni64: { type: ["integer", "null"] },
    f: { type: "number", format: "float" },
    nf: { type: ["number", "null"], format: "float" },
    d: { type: "number", format: "double" },
    nd: { type: ["number", "null"] },
    s: { type: "string" },
    ns: { type: ["string", "null"] },
  },
  required: ["b", "nb", "i32", "ni32", "i64", "ni64", "f", "nf", "d", "nd", "s", "ns"],
};

/** Row `i` of {@linkcode ALL_TYPES}: every third nullable value is null; floats exact in float32. */
export function allTypesRow(i: number): Record<string, unknown> {
  const nul = i % 3 === 0;
  return {
    b: i % 2 === 0,
    nb: nul ? null : i % 2 === 1,
    i32: i * 1000 - 2_000_000,
    ni32: nul ? null : -i,
    i64: 1_700_000_000_000_000 + i,
    ni64: nul ? null : -(2 ** 52) - i,
    f: i + 0.25,
    nf: nul ? null : -i - 0.5,
    d: i / 7,
    nd: nul ? null : 1e300 / (i + 1),
    s: ["BTC-USD", "ÉTH €", "𝄞 clef", 'quote " and \\ and \n', ""][i % 5],
    ns: nul ? null : `note ${i}`,
  };
}
