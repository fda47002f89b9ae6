import { tableFromIPC } from "apache-arrow";
import { Log } from "../../log/mod.ts";
import { Stream } from "../../server/stream/stream.ts";
import { SCHEMA as TRADES, tradeRows } from "../harness/trades.ts";
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir, utf8 } from "../harness/util.ts";
import { duck, duckTypes } from "../harness/duckdb.ts";
import "../../arrow/zstd.ts"; // registers the zstd codec that reading the Arrow file needs

const cli = new URL("../../cli/export.ts", import.meta.url).pathname;

async function exportCli(
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", cli, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

async function tradesStream(root: string, rows: number): Promise<Stream> {
  const stream = await Stream.open("trades", {
    schema: TRADES,
    root,
    logOptions: { timers: false },
  });
  const make = tradeRows(4);
  for (let i = 0; i < rows; i += 2500) {
    await stream.sendMany(Array.from({ length: 2500 }, (_, k) => make(i + k)));
  }
  return stream;
}

Deno.test("cli export writes parquet, arrow and ndjson from a stream's log, beside the live server", async () => {
  const root = await tempDir();
  // Still open: the log's lock is held, as by a running server.
  const stream = await tradesStream(root, 10_000);
  try {
    await stream.log!.roll();
    await stream.log!.chunks.settled();
    await stream.sendMany([tradeRows(8)(0)]);
    const pq = await exportCli(
      `${root}/trades`,
      "--format",
      "parquet",
      "--out",
      `${root}/t.parquet`,
    );
    assertEquals(pq.code, 0, pq.stderr);
    assert(pq.stderr.includes("export: wrote 10001 rows (offsets 1..10001)"), pq.stderr);
    assertEquals(
      await duck(
        `SELECT count(*), min("offset"), max("offset") FROM read_parquet('${root}/t.parquet')`,
      ),
      [[10_001n, 1n, 10_001n]],
    );
    assertEquals((await duckTypes(`${root}/t.parquet`)).side, "INTEGER");

    const ar = await exportCli(
      `${root}/trades`,
      "--format",
      "arrow",
      "--out",
      `${root}/t.arrow`,
      "--from",
      "9990",
      "--to",
      "10000",
    );
    assertEquals(ar.code, 0, ar.stderr);
    const table = tableFromIPC(Deno.readFileSync(`${root}/t.arrow`));
    assertEquals(table.numRows, 11);
    assertEquals(table.getChild("offset")?.get(0), 9990n);

    const nd = await exportCli(
      `${root}/trades`,
      "--format",
      "ndjson",
      "--out",
      `${root}/t.ndjson`,
      "--from",
      "10001",
    );
    assertEquals(nd.code, 0, nd.stderr);
    const [offset, row] = JSON.parse(Deno.readTextFileSync(`${root}/t.ndjson`));
    assertEquals([offset, row], [10_001, tradeRows(8)(0)]);
  } finally {
    await stream.close();
    await rmrf(root);
  }
});

Deno.test("cli export takes --schema over schema.json, and needs one for arrow and parquet", async () => {
  const root = await tempDir();
  try {
    const log = await Log.open(`${root}/raw`, { timers: false });
    await log.appendMany(['{"price":1.5,"side":1}', '{"price":2.5,"side":-1}'].map(utf8));
    await log.close();
    const none = await exportCli(`${root}/raw`, "--format", "arrow", "--out", `${root}/r.arrow`);
    assertEquals(none.code, 2);
    assertEquals(
      none.stderr.trim(),
      `streamcast export: no schema: pass --schema SCHEMA.json (${root}/raw/schema.json does not exist) (see --help)`,
    );
    const schemaPath = `${root}/price.json`;
    Deno.writeTextFileSync(
      schemaPath,
      JSON.stringify({
        type: "object",
        properties: {
          price: { type: "number", format: "float" },
          side: { type: "integer", format: "int32" },
        },
        required: ["price", "side"],
      }),
    );
    // A schema.json that does not fit loses to --schema.
    Deno.writeTextFileSync(`${root}/raw/schema.json`, JSON.stringify(TRADES));
    const ok = await exportCli(
      `${root}/raw`,
      "--format",
      "parquet",
      "--out",
      `${root}/r.parquet`,
      "--schema",
      schemaPath,
    );
    assertEquals(ok.code, 0, ok.stderr);
    assertEquals(await duckTypes(`${root}/r.parquet`), {
      offset: "BIGINT",
      price: "FLOAT",
      side: "INTEGER",
    });
    assertEquals(
      await duck(`SELECT sum(price), sum(side) FROM read_parquet('${root}/r.parquet')`),
      [[4, 0n]],
    );
    // With the trades schema.json, the rows do not fit: one line naming offset and column.
    const bad = await exportCli(`${root}/raw`, "--format", "arrow", "--out", `${root}/r.arrow`);
    assertEquals(bad.code, 1);
    assertEquals(
      bad.stderr.trim(),
      'streamcast export: offset 1: column "event_ts" holds nothing (the key is missing), not an int64',
    );
  } finally {
    await rmrf(root);
  }
});

Deno.test("cli export fails with one clear line: 2 for usage, 1 for the rest", async () => {
  const root = await tempDir();
  try {
    const log = await Log.open(`${root}/t`, { timers: false, firstOffset: 50 });
    await log.append(utf8("{}"));
    await log.close();
    const cases: [string[], number, string][] = [
      [[`${root}/t`, "--out", "x"], 2, "--format arrow|parquet|ndjson is required"],
      [
        [`${root}/t`, "--format", "csv", "--out", "x"],
        2,
        "--format must be arrow, parquet or ndjson, got csv",
      ],
      [[`${root}/t`, "--format", "ndjson"], 2, "--out FILE is required"],
      [
        [`${root}/t`, "--format", "ndjson", "--out", "x", "--from=-1"],
        2,
        "--from must be an offset",
      ],
      [
        [`${root}/t`, "--format", "ndjson", "--out", "x", "--from", "9", "--to", "3"],
        2,
        "--from 9 is after --to 3",
      ],
      [[`${root}/t`, "--format", "ndjson", "--out", "x", "--bogus"], 2, "Unknown option '--bogus'"],
      [[`${root}/missing`, "--format", "arrow", "--out", "x"], 1, `no log at ${root}/missing`],
      [
        [`${root}/t`, "--format", "ndjson", "--out", `${root}/t.ndjson`, "--from", "3"],
        1,
        "offset 3 is no longer held by the log; the earliest is 50",
      ],
      [
        [`${root}/t`, "--format", "ndjson", "--out", `${root}/no/such/dir/x`],
        1,
        "No such file or directory",
      ],
    ];
    for (const [args, code, text] of cases) {
      const r = await exportCli(...args);
      assertEquals(r.code, code, `${args.join(" ")}: ${r.stderr}`);
      const lines = r.stderr.trim().split("\n");
      assertEquals(lines.length, 1, r.stderr);
      assert(lines[0].startsWith("streamcast export: ") && lines[0].includes(text), lines[0]);
    }
    const help = await exportCli("--help");
    assertEquals(help.code, 0);
    assert(help.stdout.startsWith("usage: deno run -A cli.ts export ROOT/NAME"), help.stdout);
  } finally {
    await rmrf(root);
  }
});
