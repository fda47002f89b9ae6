// `tail --where JSON` and `export --where JSON` as real processes.
import { tableFromIPC } from "apache-arrow";
import { serve, Stream } from "../../mod.ts";
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { duck } from "../harness/duckdb.ts";
import "../../arrow/zstd.ts"; // registers the zstd codec that reading the Arrow file needs

const CLI = new URL("../../cli.ts", import.meta.url).pathname;

const SCHEMA = {
  type: "object",
  properties: {
    symbol: { type: "string" },
    size: { type: "integer" },
    venue: { type: ["string", "null"] },
  },
  required: ["symbol", "size", "venue"],
};
const row = (i: number) => ({
  symbol: ["BTC-USD", "ETH-USD", "SOL-USD"][i % 3],
  size: i % 10,
  venue: i % 4 === 0 ? null : "x",
});
const line = (i: number) => `[${i},${JSON.stringify(row(i))}]`;

async function run(args: string[], ms = 60_000) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), ms);
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, ...args],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: ac.signal,
    }).output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("tail --where prints only the matching rows, byte for byte; a refused filter exits 1 naming where", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const url = `ws://127.0.0.1:${server.addr.port}/t`;
  try {
    await stream.sendMany(Array.from({ length: 200 }, (_, k) => row(k + 1)));
    const where = '{"symbol":["ETH-USD","SOL-USD"],"size":{"gte":5}}';
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "tail", url, "--offset", "1", "--where", where, "--no-reconnect"],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const want = Array.from({ length: 200 }, (_, k) => k + 1)
      .filter((i) => row(i).symbol !== "BTC-USD" && row(i).size >= 5).map(line);
    // Read until the last matching row, then stop the server: tail exits 1.
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (text.split("\n").length - 1 < want.length) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    assertEquals(text.split("\n").slice(0, -1), want);
    await server.shutdown();
    reader.releaseLock();
    await child.stdout.cancel().catch(() => {});
    const stderr = new TextDecoder().decode(
      (await new Response(child.stderr).arrayBuffer()) as ArrayBuffer,
    );
    await child.status;
    assert(stderr.includes('only rows where {"symbol":["ETH-USD","SOL-USD"]'), stderr);
  } finally {
    await server.shutdown().catch(() => {});
    await stream.close();
    await rmrf(root);
  }
  // Refusals: by the server (exit 1, the detail), by the command line (exit 2).
  const root2 = await tempDir();
  const s2 = await Stream.open("t", { schema: SCHEMA, root: root2 });
  const srv2 = serve([s2], { port: 0, onListen: () => {} });
  try {
    const url2 = `ws://127.0.0.1:${srv2.addr.port}/t`;
    const bad = await run(["tail", url2, "--where", '{"sym":"x"}', "--no-reconnect"]);
    assertEquals(bad.code, 1, bad.stderr);
    assert(bad.stderr.includes("where: unknown column sym"), bad.stderr);
    const notJson = await run(["tail", url2, "--where", "{sym", "--no-reconnect"]);
    assertEquals(notJson.code, 2, notJson.stderr);
    assert(notJson.stderr.includes("--where must be a JSON object"), notJson.stderr);
  } finally {
    await srv2.shutdown();
    await rmrf(root2);
  }
});

Deno.test("export --where leaves out the rows that do not match, in ndjson, arrow and parquet", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root,
    logOptions: { timers: false, segmentBytes: 16 * 1024 },
  });
  try {
    for (let i = 1; i <= 3000; i += 500) {
      await stream.sendMany(Array.from({ length: 500 }, (_, k) => row(i + k)));
    }
    await stream.log!.roll();
    await stream.log!.chunks.settled();
    await stream.sendMany([row(3001), row(3002)]);
    const where = '{"venue":null,"symbol":{"prefix":"ETH"}}';
    const match = (i: number) => row(i).venue === null && row(i).symbol === "ETH-USD";
    const want = Array.from({ length: 3002 }, (_, k) => k + 1).filter(match);
    const dir = `${root}/t`;
    const nd = await run([
      "export",
      dir,
      "--format",
      "ndjson",
      "--out",
      `${root}/w.ndjson`,
      "--where",
      where,
    ]);
    assertEquals(nd.code, 0, nd.stderr);
    assert(nd.stderr.includes(`wrote ${want.length} rows`), nd.stderr);
    assertEquals(await Deno.readTextFile(`${root}/w.ndjson`), want.map(line).join("\n") + "\n");
    const ar = await run([
      "export",
      dir,
      "--format",
      "arrow",
      "--out",
      `${root}/w.arrow`,
      "--where",
      where,
    ]);
    assertEquals(ar.code, 0, ar.stderr);
    const table = tableFromIPC(await Deno.readFile(`${root}/w.arrow`));
    assertEquals(table.numRows, want.length);
    assertEquals(
      Array.from({ length: table.numRows }, (_, k) => Number(table.getChild("offset")!.get(k))),
      want,
    );
    const pq = await run([
      "export",
      dir,
      "--format",
      "parquet",
      "--out",
      `${root}/w.parquet`,
      "--where",
      where,
      "--from",
      "100",
    ]);
    assertEquals(pq.code, 0, pq.stderr);
    const fromHundred = want.filter((i) => i >= 100);
    assertEquals(
      await duck(
        `SELECT count(*), min("offset"), max("offset") FROM read_parquet('${root}/w.parquet')`,
      ),
      [[BigInt(fromHundred.length), BigInt(fromHundred[0]), BigInt(fromHundred.at(-1)!)]],
    );
    const bad = await run([
      "export",
      dir,
      "--format",
      "ndjson",
      "--out",
      `${root}/x.ndjson`,
      "--where",
      '{"size":"big"}',
    ]);
    assertEquals(bad.code, 1, bad.stderr);
    assert(bad.stderr.includes("where: column size"), bad.stderr);
  } finally {
    await stream.close();
    await rmrf(root);
  }
});
