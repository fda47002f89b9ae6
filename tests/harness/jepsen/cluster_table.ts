// The Iceberg table of a cluster's stream `t`, kept in the S3 archive the
// nodes share (s3rver): the flags that ask for it, its last offset as its
// current snapshot names it, its rows read as engines read them (DuckDB over
// the data files the manifests list, and icebird following the metadata
// itself, which must agree), and the check against the final log: every
// offset of the log in the table exactly once, with the log's row, and
// nothing else.
import { duckRows, type Fetcher, icebirdRows, viewTable } from "../read_table.ts";

/** The archive the nodes share. */
export const TABLE_ARCHIVE = "s3://archive/cluster";
/** Where stream `t`'s table is. */
export const TABLE_LOCATION = `${TABLE_ARCHIVE}/t/iceberg`;
/** How often the leader seals its tail (the table takes sealed rows), s. */
export const TABLE_SEAL_EVERY_S = 1;

/** The flags of a node that keeps `t`'s table in the archive at `endpoint`. */
export function tableFlags(endpoint: string): string[] {
  return [
    "--archive",
    TABLE_ARCHIVE,
    "--s3-endpoint",
    endpoint,
    "--s3-path-style",
    "--iceberg",
    "t",
    "--seal-every",
    String(TABLE_SEAL_EVERY_S),
  ];
}

/** The table's last offset (its current snapshot's `streamcast.last-offset`), 0 when none. */
export async function tableLast(get: Fetcher): Promise<number> {
  try {
    const m = (await viewTable(TABLE_LOCATION, get)).metadata;
    const s = m.snapshots.find((x: { "snapshot-id": number }) =>
      x["snapshot-id"] === m["current-snapshot-id"]
    );
    return s ? Number(s.summary["streamcast.last-offset"]) : 0;
  } catch {
    return 0; // no table yet
  }
}

/** A row of the table: its offset and the stream's columns. */
export type TableRow = [offset: number, row: { p: string; seq: number; i: number }];

/** Every row of the table in offset order, read by DuckDB; icebird must read the same. */
export async function tableRows(get: Fetcher, problems: string[]): Promise<TableRow[]> {
  const view = await viewTable(TABLE_LOCATION, get);
  const duck = (await duckRows(view.dataFiles, get, "streamcast_offset, p, seq, i"))
    .map((r): TableRow => [
      Number(r.streamcast_offset),
      { p: String(r.p), seq: Number(r.seq), i: Number(r.i) },
    ]);
  const ice = (await icebirdRows(TABLE_LOCATION, get))
    .map((r) => Number(r.streamcast_offset)).sort((a, b) => a - b);
  const offsets = duck.map(([o]) => o);
  if (JSON.stringify(ice) !== JSON.stringify(offsets)) {
    problems.push(
      `icebird reads ${ice.length} rows of the table, DuckDB ${offsets.length}: they differ`,
    );
  }
  return duck;
}

/**
 * The table holds each row of `log` (offset → row) exactly once, as the log
 * has it, and no other row: each difference is one problem naming the
 * offset (at most `limit` of them, then a count).
 */
export function checkTable(
  rows: readonly TableRow[],
  log: ReadonlyMap<number, { p: string; seq: number; i: number }>,
  problems: string[],
  limit = 20,
): void {
  const found: string[] = [];
  const seen = new Map<number, number>();
  for (const [o, r] of rows) {
    seen.set(o, (seen.get(o) ?? 0) + 1);
    const want = log.get(o);
    if (!want) found.push(`the table holds offset ${o} (${JSON.stringify(r)}), the log does not`);
    else if (want.p !== r.p || want.seq !== r.seq || want.i !== r.i) {
      found.push(
        `offset ${o}: the table holds ${JSON.stringify(r)}, the log ${JSON.stringify(want)}`,
      );
    }
  }
  for (const [o, n] of seen) if (n > 1) found.push(`the table holds offset ${o} ${n} times`);
  for (const o of log.keys()) {
    if (!seen.has(o)) found.push(`offset ${o} of the log is missing from the table`);
  }
  problems.push(...found.slice(0, limit).map((f) => `iceberg: ${f}`));
  if (found.length > limit) problems.push(`iceberg: ${found.length - limit} more differences`);
}
