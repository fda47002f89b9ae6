// `cli.ts serve --iceberg` end to end: real server processes fed over HTTP,
// their tables read as engines read them (avsc, DuckDB, icebird), SIGKILL
// after every step of a commit, the S3 archive (s3rver) and a restore.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import { startS3, stopS3 } from "../harness/s3.ts";
import { CLI, runServe, startServe } from "../harness/serve.ts";
import { COMMIT_STEPS } from "../../iceberg/table_writer.ts";
import { pathToFileURL } from "node:url";
import { row, SCHEMA } from "./_fixture.ts";
import {
  duckRows,
  type Fetcher,
  icebirdRows,
  localFiles,
  s3Files,
  viewTable,
} from "../harness/read_table.ts";

const SEAL_EVERY_S = 1;

async function schemaFile(dir: string): Promise<string> {
  const path = `${dir}/trades.json`;
  await Deno.writeTextFile(path, JSON.stringify(SCHEMA));
  return path;
}

/** POSTs rows `from..from+n-1` of the fixture feed; resolves with the acknowledged offsets. */
async function post(
  url: string,
  from: number,
  n: number,
): Promise<{ first: number; last: number }> {
  const body = Array.from({ length: n }, (_, k) => JSON.stringify(row(from + k))).join("\n");
  const res = await fetch(`${url}/trades`, {
    method: "POST",
    headers: { "content-type": "application/x-ndjson" },
    body,
  });
  const answer = await res.json();
  assertEquals(res.status, 200, JSON.stringify(answer));
  return answer;
}

/** The table's last offset (streamcast.last-offset of its current snapshot), or 0. */
async function tableLast(location: string, get: Fetcher): Promise<number> {
  try {
    const m = (await viewTable(location, get)).metadata;
    const s = m.snapshots.find((x: { "snapshot-id": number }) =>
      x["snapshot-id"] === m["current-snapshot-id"]
    );
    return s ? Number(s.summary["streamcast.last-offset"]) : 0;
  } catch {
    return 0;
  }
}

/** Every offset of the table, read twice: DuckDB over the files the manifests list, and icebird. */
async function tableOffsets(location: string, get: Fetcher): Promise<number[]> {
  const view = await viewTable(location, get);
  const duck = (await duckRows(view.dataFiles, get, "streamcast_offset"))
    .map((r) => Number(r.streamcast_offset));
  const ice = (await icebirdRows(location, get)).map((r) => Number(r.streamcast_offset))
    .sort((a, b) => a - b);
  assertEquals(ice, duck, "icebird and DuckDB read the same offsets");
  return duck;
}

function range(a: number, b: number): number[] {
  return Array.from({ length: b - a + 1 }, (_, i) => a + i);
}

Deno.test('serve --iceberg (config "iceberg": true): published rows are in the table within --seal-every + 10 s, each once, as published', async () => {
  const root = await tempDir();
  const config = `${root}/streamcast.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      root: "data",
      streams: { trades: { schema: await schemaFile(root), publish: true, iceberg: true } },
      sealEvery: SEAL_EVERY_S,
    }),
  );
  const server = await startServe(["--config", config, "--port", "0"]);
  try {
    const location = pathToFileURL(`${root}/data/trades/iceberg`).href;
    let sent = 0;
    for (let k = 0; k < 4; k++) {
      const a = await post(server.url, sent, 25);
      assertEquals(a.last, sent + 25);
      sent += 25;
      const acked = Date.now();
      await until(
        async () => (await tableLast(location, localFiles)) >= sent,
        30_000,
        "the commit",
      );
      const lag = Date.now() - acked;
      assert(lag <= (SEAL_EVERY_S + 10) * 1000, `row visible ${lag} ms after its append`);
    }
    const view = await viewTable(location, localFiles);
    const rows = await duckRows(view.dataFiles, localFiles);
    assertEquals(rows.map((r) => Number(r.streamcast_offset)), range(1, 100));
    for (const r of rows) {
      const want = row(Number(r.streamcast_offset) - 1);
      assertEquals([r.symbol, Number(r.price), r.venue], [want.symbol, want.price, want.venue]);
    }
    assertEquals(await tableOffsets(location, localFiles), range(1, 100));
    // The background thread's own heap (the chunk and Iceberg workers') is in
    // the metrics (reported as it starts and every 5 s after).
    const metrics = await (await fetch(`${server.url}/_/metrics`)).text();
    for (const kind of ["background_heap_used", "background_heap_total", "background_external"]) {
      const m = new RegExp(`^streamcast_process_memory_bytes\\{kind="${kind}"\\} (\\d+)$`, "m")
        .exec(metrics);
      assert(m !== null, `${kind} in /_/metrics:\n${metrics}`);
      if (kind !== "background_external") assert(Number(m[1]) > 0, `${kind} is ${m[1]}`);
    }
    assertEquals((await server.signal("SIGINT", 40_000)).code, 0);
  } finally {
    await server.stop();
    await rmrf(root);
  }
});

for (const step of COMMIT_STEPS) {
  Deno.test(`serve --iceberg: SIGKILL after ${step}, then a restart: no row missing or twice`, async () => {
    const root = await tempDir();
    const args = [
      "--root",
      `${root}/data`,
      "--port",
      "0",
      "--stream",
      `trades=${await schemaFile(root)}`,
      "--publish",
      "trades",
      "--iceberg",
      "trades",
      "--seal-every",
      String(SEAL_EVERY_S),
    ];
    const location = pathToFileURL(`${root}/data/trades/iceberg`).href;
    const crashing = await startServe(args, { env: { STREAMCAST_CRASH_AT: `iceberg-${step}` } });
    try {
      await post(crashing.url, 0, 30);
      const status = await crashing.exit(30_000);
      assertEquals(status.signal, "SIGKILL", `killed after ${step}`);
    } finally {
      await crashing.stop();
    }
    const server = await startServe(args);
    try {
      await post(server.url, 30, 12);
      await until(async () => (await tableLast(location, localFiles)) >= 42, 30_000, "the table");
      assertEquals(await tableOffsets(location, localFiles), range(1, 42));
    } finally {
      await server.stop();
      await rmrf(root);
    }
  });
}

Deno.test("serve --iceberg with --archive: the table is at ARCHIVE/NAME/iceberg; after a restore it goes on, each row once", async () => {
  const s3 = await startS3();
  const rootA = await tempDir();
  const rootB = await tempDir();
  const archive = "s3://archive/prod";
  const s3Args = ["--archive", archive, "--s3-endpoint", s3.endpoint, "--s3-path-style"];
  const get = s3Files(s3.endpoint);
  const location = "s3://archive/prod/trades/iceberg";
  try {
    const schema = await schemaFile(rootA);
    const args = (root: string) => [
      "--root",
      root,
      "--port",
      "0",
      "--stream",
      `trades=${schema}`,
      "--publish",
      "trades",
      "--iceberg",
      "trades",
      "--seal-every",
      String(SEAL_EVERY_S),
      ...s3Args,
    ];
    const a = await startServe(args(`${rootA}/data`));
    try {
      await post(a.url, 0, 40);
      await until(async () => (await tableLast(location, get)) >= 40, 30_000, "the S3 table");
      await post(a.url, 40, 10);
      // A planned stop seals the tail, archives it and commits it to the table.
      assertEquals((await a.signal("SIGINT", 60_000)).code, 0);
    } finally {
      await a.stop();
    }
    assertEquals(await tableLast(location, get), 50);
    const view = await viewTable(location, get);
    assert(view.dataFiles.every((f) => f.startsWith(`${location}/data/`)), view.dataFiles[0]);
    assertEquals(view.metadata.location, location);

    // The machine is lost: restore on another root, serve again, publish more.
    const restore = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "restore", "trades", "--root", `${rootB}/data`, ...s3Args],
      stdout: "null",
      stderr: "piped",
    }).output();
    assertEquals(restore.code, 0, new TextDecoder().decode(restore.stderr));
    const b = await startServe(args(`${rootB}/data`));
    try {
      const more = await post(b.url, 50, 15);
      assertEquals(more.first, 51 + 2 ** 20, "offsets are fenced after a restore");
      await until(
        async () => (await tableLast(location, get)) >= more.last,
        30_000,
        "the table after restore",
      );
      assertEquals(await tableOffsets(location, get), [
        ...range(1, 50),
        ...range(more.first, more.last),
      ]);
    } finally {
      await b.stop();
    }
  } finally {
    await rmrf(rootA);
    await rmrf(rootB);
    await stopS3(s3);
  }
});

Deno.test("serve refuses --iceberg for a followed or ephemeral stream, in one line", async () => {
  const root = await tempDir();
  try {
    const schema = await schemaFile(root);
    const followed = await runServe([
      "--root",
      root,
      "--follow",
      "trades=ws://127.0.0.1:9/trades",
      "--iceberg",
      "trades",
    ]);
    assertEquals(followed.code, 2, followed.stderr);
    assert(
      /--iceberg names stream "trades", which is followed .*only the stream.s writer/.test(
        followed.stderr,
      ),
      followed.stderr,
    );
    const ephemeral = await runServe([
      "--root",
      root,
      "--stream",
      `trades=${schema}`,
      "--ephemeral",
      "trades",
      "--iceberg",
      "trades",
    ]);
    assertEquals(ephemeral.code, 2, ephemeral.stderr);
    assert(/keeps an Iceberg table and is ephemeral/.test(ephemeral.stderr), ephemeral.stderr);
    const undeclared = await runServe([
      "--root",
      root,
      "--stream",
      `trades=${schema}`,
      "--iceberg",
      "x",
    ]);
    assertEquals(undeclared.code, 2, undeclared.stderr);
    assert(
      /--iceberg names stream "x", which is not declared/.test(undeclared.stderr),
      undeclared.stderr,
    );
  } finally {
    await rmrf(root);
  }
});
