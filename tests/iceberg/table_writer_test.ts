// The table writer against real files, read back as engines read a table:
// Avro through avsc, data files through DuckDB, the table through icebird.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { LocalTableStore } from "../../iceberg/table_store.ts";
import { COMMIT_STEPS, type CommitStep, TableWriter } from "../../iceberg/table_writer.ts";
import { fedLog, row, SCHEMA } from "./_fixture.ts";
import {
  duckRows,
  icebirdRows,
  localFiles,
  parquetFieldIds,
  readAvro,
  viewTable,
} from "../harness/read_table.ts";

const DAY_MS = 86_400_000;
const T0 = Date.UTC(2026, 0, 1, 12);

function writer(
  dir: string,
  streamId: string,
  more: Partial<ConstructorParameters<typeof TableWriter>[0]> = {},
) {
  return new TableWriter({
    store: new LocalTableStore(`${dir}/iceberg`),
    dir,
    stream: "trades",
    streamId,
    ...more,
  });
}

async function commitAll(w: TableWriter): Promise<number> {
  let n = 0;
  while (await w.commit()) n++;
  return n;
}

/** Every offset in the table exactly once, as DuckDB reads the data files. */
async function offsetsOf(location: string): Promise<number[]> {
  const view = await viewTable(location, localFiles);
  const rows = await duckRows(view.dataFiles, localFiles, "streamcast_offset");
  return rows.map((r) => Number(r.streamcast_offset));
}

function range(a: number, b: number): number[] {
  return Array.from({ length: b - a + 1 }, (_, i) => a + i);
}

Deno.test("iceberg table holds each sealed row once with its values, read by avsc, DuckDB and icebird", async () => {
  await using f = await fedLog();
  await f.feed(5, T0);
  await f.feed(1, T0 + 1000);
  await f.feed(7, T0 + 2000);
  const w = writer(f.dir, f.log.streamId);
  assertEquals(await commitAll(w), 1, "three sealed chunks, one commit");
  await f.feed(4, T0 + 3000);
  assertEquals(await commitAll(w), 1);
  const location = w.location;
  assert(location.startsWith("file:///"), location);

  const view = await viewTable(location, localFiles);
  const m = view.metadata;
  assertEquals(view.version, 3, "v1 (empty), then one version per commit");
  assertEquals(m["format-version"], 2);
  assertEquals(m["table-uuid"].replaceAll("-", ""), f.log.streamId);
  assertEquals(m.location, location);
  assertEquals(m["partition-specs"][0].fields, [
    { "source-id": 2, "field-id": 1000, name: "streamcast_time_day", transform: "day" },
  ]);
  const fields = m.schemas[0].fields;
  assertEquals(
    fields.map((
      x: { id: number; name: string; type: unknown; required: boolean },
    ) => [x.id, x.name, x.required]),
    [
      [1, "streamcast_offset", true],
      [2, "streamcast_time", true],
      [3, "symbol", true],
      [4, "price", true],
      [5, "qty", true],
      [6, "side", true],
      [7, "trade_id", true],
      [8, "venue", false],
      [9, "taker", true],
      [10, "fill", true],
      [11, "levels", true],
      [12, "meta", false],
    ],
  );
  assertEquals(
    fields.map((x: { type: unknown }) =>
      typeof x.type === "string" ? x.type : (x.type as { type: string }).type
    ),
    [
      "long",
      "timestamptz",
      "string",
      "double",
      "float",
      "int",
      "long",
      "string",
      "boolean",
      "struct",
      "list",
      "string",
    ],
  );
  assertEquals(fields[9].type.fields.map((x: { id: number }) => x.id), [13, 14]);
  assertEquals(fields[10].type["element-id"], 15);
  assertEquals(fields[10].type.element["element-id"], 16);
  assertEquals(m["last-column-id"], 16);

  const snaps = m.snapshots;
  assertEquals(snaps.length, 2);
  for (const s of snaps) {
    assert(Number.isSafeInteger(s["snapshot-id"]) && s["snapshot-id"] > 0, `${s["snapshot-id"]}`);
  }
  assertEquals(snaps[1]["parent-snapshot-id"], snaps[0]["snapshot-id"]);
  assertEquals(snaps[0].summary.operation, "append");
  assertEquals(
    [snaps[0].summary["streamcast.first-offset"], snaps[0].summary["streamcast.last-offset"]],
    ["1", "13"],
  );
  assertEquals(snaps[0].summary["added-records"], "13");
  assertEquals(snaps[1].summary["added-records"], "4");
  assertEquals(snaps[1].summary["total-records"], "17");
  assertEquals(snaps[1].summary["total-data-files"], "2");
  assertEquals(m["current-snapshot-id"], snaps[1]["snapshot-id"]);
  assertEquals(m.refs.main, { "snapshot-id": snaps[1]["snapshot-id"], type: "branch" });
  assertEquals(m["last-sequence-number"], 2);

  // The manifest list and manifests, as Avro with the spec's field ids.
  const list = view.manifestList!;
  assertEquals(list.meta["format-version"], "2");
  assertEquals(list.meta["snapshot-id"], String(snaps[1]["snapshot-id"]));
  const listFields = list.schema.fields as { name: string; "field-id": number }[];
  assertEquals(listFields.find((x) => x.name === "manifest_path")?.["field-id"], 500);
  assertEquals(listFields.find((x) => x.name === "added_rows_count")?.["field-id"], 512);
  assertEquals(list.records.map((r) => [r.sequence_number, r.added_rows_count]), [[1, 13], [2, 4]]);
  const man = view.manifests[0];
  assertEquals(man.meta["format-version"], "2");
  assertEquals(man.meta.content, "data");
  assertEquals(JSON.parse(man.meta.schema).fields.length, 12);
  const entry = man.records[0] as { status: number; data_file: Record<string, unknown> };
  assertEquals(entry.status, 1);
  assertEquals(entry.data_file.file_format, "PARQUET");
  assertEquals(entry.data_file.record_count, 13);
  assertEquals(
    (entry.data_file.partition as Record<string, number>).streamcast_time_day,
    Math.floor(T0 / DAY_MS),
  );
  const dataFile = man.schema.fields as {
    name: string;
    type: { fields: { name: string; "field-id": number }[] };
  }[];
  const df = dataFile.find((x) => x.name === "data_file")!.type.fields;
  assertEquals(df.find((x) => x.name === "file_path")?.["field-id"], 100);
  assertEquals(df.find((x) => x.name === "record_count")?.["field-id"], 103);
  const lower = entry.data_file.lower_bounds as { key: number; value: Uint8Array }[];
  assertEquals(
    new DataView(lower[0].value.buffer, lower[0].value.byteOffset).getBigInt64(0, true),
    1n,
  );

  // The Parquet files carry the field ids.
  const ids = await parquetFieldIds((await localFiles(view.dataFiles[0]))!);
  assertEquals([
    ids.streamcast_offset,
    ids.streamcast_time,
    ids.symbol,
    ids.fill,
    ids.px,
    ids.levels,
  ], [1, 2, 3, 10, 13, 11]);

  // DuckDB: every row once, its values as published.
  const rows = await duckRows(
    view.dataFiles,
    localFiles,
    "* EXCLUDE (streamcast_time), epoch_us(streamcast_time) AS t",
  );
  assertEquals(rows.map((r) => Number(r.streamcast_offset)), range(1, 17));
  for (const r of rows) {
    const o = Number(r.streamcast_offset);
    const want = JSON.parse(f.rows.get(o)!.json);
    assertEquals(Number(r.t), f.rows.get(o)!.timeUs, `time of ${o}`);
    assertEquals(r.symbol, want.symbol);
    assertEquals(Number(r.price), want.price);
    assertEquals(Number(r.qty), Math.fround(want.qty));
    assertEquals(Number(r.side), want.side);
    assertEquals(String(r.trade_id), String(want.trade_id));
    assertEquals(r.venue, want.venue);
    assertEquals(r.taker, want.taker);
    assertEquals({
      px: Number((r.fill as { px: number }).px),
      n: Number((r.fill as { n: number }).n),
    }, want.fill);
    assertEquals((r.levels as number[][]).map((l) => l.map(Number)), want.levels);
    assertEquals(r.meta === null ? null : JSON.parse(r.meta as string), want.meta);
  }

  // icebird, through the metadata.
  const ice = await icebirdRows(location, localFiles);
  assertEquals(ice.map((r) => Number(r.streamcast_offset)), range(1, 17));
  for (const r of ice) {
    const o = Number(r.streamcast_offset);
    const want = JSON.parse(f.rows.get(o)!.json);
    assertEquals((r.streamcast_time as Date).getTime(), f.rows.get(o)!.timeUs / 1000);
    assertEquals(r.symbol, want.symbol);
    assertEquals(r.trade_id, BigInt(want.trade_id));
    assertEquals(r.venue ?? null, want.venue);
  }
  await f.log.close();
  w.close();
});

Deno.test("iceberg rows of one chunk that span midnight go to one data file per day", async () => {
  await using f = await fedLog();
  const midnight = Date.UTC(2026, 0, 2);
  await f.feed(3, midnight - 2000);
  await f.feed(2, midnight - 1);
  await f.feed(4, midnight);
  await f.feed(1, midnight + DAY_MS + 5);
  const w = writer(f.dir, f.log.streamId);
  assertEquals(await commitAll(w), 1);
  const view = await viewTable(w.location, localFiles);
  assertEquals(view.dataFiles.length, 3);
  const days = view.manifests[0].records.map((e) =>
    (e.data_file as { partition: Record<string, number> }).partition.streamcast_time_day
  );
  const d = Math.floor(midnight / DAY_MS);
  assertEquals(days, [d - 1, d, d + 1]);
  assert(view.dataFiles[0].includes("/data/streamcast_time_day=2026-01-01/"), view.dataFiles[0]);
  assert(view.dataFiles[1].includes("/data/streamcast_time_day=2026-01-02/"), view.dataFiles[1]);
  assertEquals(
    view.manifests[0].records.map((e) => (e.data_file as { record_count: number }).record_count),
    [5, 4, 1],
  );
  assertEquals(await offsetsOf(w.location), range(1, 10));
  const list = view.manifestList!.records[0] as {
    partitions: { lower_bound: Uint8Array; upper_bound: Uint8Array }[];
  };
  const le32 = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset).getInt32(0, true);
  assertEquals([le32(list.partitions[0].lower_bound), le32(list.partitions[0].upper_bound)], [
    d - 1,
    d + 1,
  ]);
  await f.log.close();
  w.close();
});

class Crash extends Error {}

for (const step of COMMIT_STEPS) {
  for (const which of ["first", "later"] as const) {
    Deno.test(`iceberg crash after ${step} of the ${which} commit, then a restart: each row once`, async () => {
      await using f = await fedLog();
      await f.feed(6, T0);
      if (which === "later") {
        const w0 = writer(f.dir, f.log.streamId);
        assertEquals(await commitAll(w0), 1);
        w0.close();
        await f.feed(3, T0 + 1000);
      }
      const crashing = writer(f.dir, f.log.streamId, {
        afterStep: (s: CommitStep) => {
          if (s === step) throw new Crash(s);
        },
      });
      await assertRejects(() => crashing.commit(), Crash);
      crashing.close();
      // More rows sealed while the writer was down.
      await f.feed(2, T0 + 2000);
      const restarted = writer(f.dir, f.log.streamId);
      await commitAll(restarted);
      const total = which === "later" ? 11 : 8;
      assertEquals(await offsetsOf(restarted.location), range(1, total));
      assertEquals(await restarted.lastOffset(), total);
      const ice = await icebirdRows(restarted.location, localFiles);
      assertEquals(ice.map((r) => Number(r.streamcast_offset)), range(1, total));
      restarted.close();
      await f.log.close();
    });
  }
}

for (const how of ["crashed", "lost its right to write"] as const) {
  Deno.test(`iceberg a writer that ${how} between creating a version and its hint: the next writer, with nothing to commit, moves the hint forward`, async () => {
    await using f = await fedLog();
    await f.feed(4, T0);
    const w0 = writer(f.dir, f.log.streamId);
    assertEquals(await commitAll(w0), 1);
    w0.close();
    await f.feed(3, T0 + 1000);
    let allowed = true;
    const first = writer(f.dir, f.log.streamId, {
      beforeCommit: () => allowed,
      afterStep: (s: CommitStep) => {
        if (s !== "metadata-written") return;
        if (how === "crashed") throw new Crash(s);
        allowed = false;
      },
    });
    if (how === "crashed") await assertRejects(() => first.commit(), Crash);
    else assertEquals((await first.commit())?.version, 3);
    first.close();
    const hint = async () =>
      new TextDecoder().decode(await Deno.readFile(`${f.dir}/iceberg/metadata/version-hint.text`));
    assertEquals(await hint(), "2\n"); // version 3 exists, the hint names 2
    // The next writer: every sealed row is already in version 3.
    const next = writer(f.dir, f.log.streamId);
    assertEquals(await next.commit(), null);
    assertEquals(await hint(), "3\n");
    assertEquals(await offsetsOf(next.location), range(1, 7)); // as a reader following the hint
    next.close();
    await f.log.close();
  });
}

Deno.test("iceberg schema evolution: an added nullable column is a new schema with a new field id", async () => {
  const v1 = SCHEMA as unknown as Record<string, unknown>;
  const v2 = {
    ...SCHEMA,
    properties: { ...SCHEMA.properties, note: { type: ["string", "null"] } },
    required: [...SCHEMA.required, "note"],
  };
  await using f = await fedLog();
  await f.feed(3, T0);
  const w = writer(f.dir, f.log.streamId);
  await commitAll(w);
  w.close();
  // The stream restarts with the grown schema (its history gains version 2).
  const { writeSchemaHistory } = await import("../../log/schema_history.ts");
  await writeSchemaHistory(f.dir, [{ from: 1, schema: v1 }, { from: 4, schema: v2 }]);
  await f.feed(2, T0 + 1000, (i) => ({ ...row(i), note: `n${i}` }));
  const w2 = writer(f.dir, f.log.streamId);
  await commitAll(w2);
  const view = await viewTable(w2.location, localFiles);
  const m = view.metadata;
  assertEquals(m.schemas.map((s: { "schema-id": number }) => s["schema-id"]), [0, 1]);
  assertEquals(m["current-schema-id"], 1);
  assertEquals(m.schemas[1].fields.at(-1), {
    id: 17,
    name: "note",
    required: false,
    type: "string",
  });
  assertEquals(m["last-column-id"], 17);
  assertEquals(m.snapshots.map((s: { "schema-id": number }) => s["schema-id"]), [0, 1]);
  const ice = await icebirdRows(w2.location, localFiles);
  assertEquals(ice.map((r) => [Number(r.streamcast_offset), r.note ?? null]), [
    [1, null],
    [2, null],
    [3, null],
    [4, "n3"],
    [5, "n4"],
  ]);
  const duck = await duckRows(view.dataFiles, localFiles, "streamcast_offset, note");
  assertEquals(duck.map((r) => r.note), [null, null, null, "n3", "n4"]);
  const ids = await parquetFieldIds((await localFiles(view.dataFiles[1]))!);
  assertEquals(ids.note, 17);
  w2.close();
  await f.log.close();
});

Deno.test("iceberg a table made for another stream is refused, not appended to", async () => {
  await using f = await fedLog();
  await f.feed(2, T0);
  const w = writer(f.dir, f.log.streamId);
  await commitAll(w);
  w.close();
  const other = writer(f.dir, "f".repeat(32));
  await assertRejects(() => other.commit(), Error, "is the table of stream");
  other.close();
  await f.log.close();
});

Deno.test("iceberg a commit takes at most maxCommitBytes of rows: a large chunk is several snapshots", async () => {
  await using f = await fedLog();
  const big = (i: number) => ({ ...row(i), symbol: "x".repeat(2000) + i });
  await f.feed(2000, T0, big); // ~4.5 MiB of rows, one chunk
  const w = writer(f.dir, f.log.streamId, { maxCommitBytes: 1 << 20 });
  const n = await commitAll(w);
  // Each commit stops at the end of the read that passed 1 MiB (reads are about 1 MiB).
  assert(n >= 3, `${n} commits`);
  const m = (await viewTable(w.location, localFiles)).metadata;
  const spans = m.snapshots.map((s: { summary: Record<string, string> }) => [
    Number(s.summary["streamcast.first-offset"]),
    Number(s.summary["streamcast.last-offset"]),
  ]);
  for (let i = 1; i < spans.length; i++) assertEquals(spans[i][0], spans[i - 1][1] + 1);
  assertEquals(spans[0][0], 1);
  assertEquals(spans.at(-1)[1], 2000);
  assertEquals(await offsetsOf(w.location), range(1, 2000));
  w.close();
  await f.log.close();
});

Deno.test("iceberg small manifests are merged once a snapshot lists enough of them", async () => {
  await using f = await fedLog();
  const w = writer(f.dir, f.log.streamId, { mergeManifestsAt: 4 });
  for (let i = 0; i < 7; i++) {
    await f.feed(2, T0 + i * 1000);
    assertEquals(await commitAll(w), 1);
  }
  const view = await viewTable(w.location, localFiles);
  assert(view.manifestList!.records.length < 5, `${view.manifestList!.records.length} manifests`);
  const statuses = view.manifests.flatMap((x) => x.records.map((e) => e.status));
  assert(statuses.includes(0), "merged entries are EXISTING");
  assertEquals(await offsetsOf(w.location), range(1, 14));
  const ice = await icebirdRows(w.location, localFiles);
  assertEquals(ice.map((r) => Number(r.streamcast_offset)).sort((a, b) => a - b), range(1, 14));
  w.close();
  await f.log.close();
});

Deno.test("iceberg the metadata keeps a bounded history: old versions' files are deleted", async () => {
  const { KEPT_METADATA_FILES } = await import("../../iceberg/metadata.ts");
  assertEquals(KEPT_METADATA_FILES, 100);
  await using f = await fedLog();
  const w = writer(f.dir, f.log.streamId);
  await f.feed(1, T0);
  await commitAll(w);
  const view = await viewTable(w.location, localFiles);
  assertEquals(view.metadata["metadata-log"].length, 1);
  assert(view.metadata["metadata-log"][0]["metadata-file"].endsWith("/metadata/v1.metadata.json"));
  const avro = await readAvro((await localFiles(view.metadata.snapshots[0]["manifest-list"]))!);
  assertEquals(avro.records.length, 1);
  w.close();
  await f.log.close();
});
