// `cli.ts serve` end to end: real processes, real sockets, real files.
import { join } from "node:path";
import { assert, assertEquals } from "../harness/assert.ts";
import { freePort, rmrf, tempDir, until } from "../harness/util.ts";
import { TestSub } from "../harness/subscriber.ts";
import { getJson, getText, runServe, startServe } from "../harness/serve.ts";

const SCHEMA = {
  type: "object",
  properties: {
    seq: { type: "integer" },
    symbol: { type: "string" },
    price: { type: "number" },
  },
  required: ["seq", "symbol", "price"],
  additionalProperties: false,
};

function row(i: number): { seq: number; symbol: string; price: number } {
  return { seq: i, symbol: i % 2 ? "BTC-USD" : "ETH-USD", price: 100 + i / 8 };
}

function ndjson(from: number, to: number): string {
  let out = "";
  for (let i = from; i <= to; i++) out += JSON.stringify(row(i)) + "\n";
  return out;
}

/** A temp dir holding `schema.json`; removed by `rm()`. */
async function workspace(): Promise<
  { dir: string; root: string; schema: string; rm(): Promise<void> }
> {
  const dir = await tempDir("streamcast-cli-");
  const schema = join(dir, "schema.json");
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  return { dir, root: join(dir, "data"), schema, rm: () => rmrf(dir) };
}

async function endOffset(url: string, name: string): Promise<number> {
  return (await getJson(`${url}/${name === "" ? "_" : name}/head`)).end_offset as number;
}

/** Subscribes from offset 1 and waits for `n` rows. */
async function replay(ws: string, path: string, n: number): Promise<string[]> {
  const sub = await TestSub.open(`${ws}${path}?offset=1`);
  try {
    assert(sub.closed === null, `subscribe refused: ${JSON.stringify(sub.closed)}`);
    await sub.waitLines(n, 10_000);
    assert(
      sub.lines.length >= n,
      `closed after ${sub.lines.length} rows: ${JSON.stringify(sub.closed)}`,
    );
    // Nothing more than asked for arrives (no duplicate).
    await new Promise((r) => setTimeout(r, 50));
    return [...sub.lines];
  } finally {
    await sub.close();
  }
}

Deno.test("serve continues offsets across a restart on the same root", async () => {
  const w = await workspace();
  const args = ["--root", w.root, "--stream", `trades=${w.schema}`, "--stdin", "trades"];
  try {
    const a = await startServe([...args, "--port", String(freePort())], { stdin: true });
    try {
      await a.write(ndjson(1, 5));
      await until(async () => (await endOffset(a.url, "trades")) === 6, 10_000, "5 rows");
      const status = await a.signal("SIGINT");
      assertEquals(status.code, 0);
      assert(/SIGINT received; shutting down/.test(a.stderr()), a.stderr());
    } finally {
      await a.stop();
    }
    const b = await startServe([...args, "--port", String(freePort())], { stdin: true });
    try {
      assertEquals(await endOffset(b.url, "trades"), 6);
      await b.write(ndjson(6, 9));
      await b.closeStdin();
      await b.waitStderr(/end of stdin for stream "trades" \(4 rows accepted, 0 rejected\)/);
      assertEquals(await endOffset(b.url, "trades"), 10);
      const lines = await replay(b.ws, "/trades", 9);
      assertEquals(
        lines,
        Array.from({ length: 9 }, (_, i) => `[${i + 1},${JSON.stringify(row(i + 1))}]`),
      );
      assertEquals((await b.signal("SIGTERM")).code, 0);
    } finally {
      await b.stop();
    }
  } finally {
    await w.rm();
  }
});

Deno.test("serve closes subscribers with 1001 on SIGINT and every row they got is in the log", async () => {
  const w = await workspace();
  const args = ["--root", w.root, "--stream", `trades=${w.schema}`];
  try {
    const a = await startServe([...args, "--stdin", "trades", "--port", String(freePort())], {
      stdin: true,
    });
    let feeding = true;
    let feeder: Promise<void> = Promise.resolve();
    let sub: TestSub | null = null;
    try {
      sub = await TestSub.open(`${a.ws}/trades?offset=0`);
      feeder = (async () => {
        // Rows keep coming while the server shuts down; writes fail once it is gone.
        for (let i = 1; feeding; i += 50) {
          try {
            await a.write(ndjson(i, i + 49));
          } catch {
            return;
          }
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      await sub.waitLines(300, 15_000);
      const status = await a.signal("SIGINT");
      assertEquals(status.code, 0);
      const closed = await sub.done;
      assertEquals(closed.code, 1001);
    } finally {
      feeding = false;
      await a.stop();
      await feeder;
      await sub?.close();
    }
    const got = sub!.lines;
    assert(got.length >= 300);
    const b = await startServe([...args, "--port", String(freePort())]);
    try {
      const end = await endOffset(b.url, "trades");
      assert(end >= got.length + 1, `log ends at ${end}, subscriber got ${got.length}`);
      const stored = await replay(b.ws, "/trades", end - 1);
      assertEquals(stored.length, end - 1);
      // Byte-identical: what was sent live is exactly what replays.
      assertEquals(stored.slice(0, got.length), got);
      stored.forEach((line, i) => assertEquals(JSON.parse(line)[0], i + 1));
    } finally {
      await b.stop();
    }
  } finally {
    await w.rm();
  }
});

Deno.test("serve --stdin reports and records bad lines, counts them, and keeps serving", async () => {
  const w = await workspace();
  const lines = [
    JSON.stringify(row(1)), // 1
    '{"seq":2,"symbol":', // 2: not JSON
    JSON.stringify(row(3)), // 3
    "", // 4: blank, skipped
    JSON.stringify({ ...row(5), price: "high" }), // 5: schema
    JSON.stringify(row(6)), // 6
    "[1,2]", // 7: schema (not an object)
    JSON.stringify({ ...row(8), extra: 1 }), // 8: schema (additional property)
    JSON.stringify(row(9)), // 9, no final newline
  ];
  try {
    // The unnamed stream: served at /, its folder is ROOT/_.
    const s = await startServe(
      ["--root", w.root, "--stream", `=${w.schema}`, "--stdin", "", "--port", String(freePort())],
      { stdin: true },
    );
    try {
      await s.write(lines.join("\n"));
      await s.closeStdin();
      await s.waitStderr(/end of stdin for the unnamed stream|end of stdin for stream "" /);
      const err = s.stderr();
      for (const n of [2, 5, 7, 8]) assert(err.includes(`stdin line ${n} `), `line ${n}:\n${err}`);
      assert(!/stdin line [1369] /.test(err), err);
      assert(/\(4 rows accepted, 4 rejected\); still serving/.test(err), err);
      const rejects = (await Deno.readTextFile(join(w.root, "_", "rejects.ndjson")))
        .trimEnd().split("\n").map((l) => JSON.parse(l));
      assertEquals(rejects.map((r) => r.line), [2, 5, 7, 8]);
      assertEquals(rejects.map((r) => r.input), [lines[1], lines[4], lines[6], lines[7]]);
      for (const r of rejects) {
        assertEquals(Object.keys(r), ["line", "error", "input"]);
        assert(typeof r.error === "string" && r.error.length > 0);
      }
      assert(rejects[1].error.includes("/price"), rejects[1].error);
      const metrics = await getText(`${s.url}/_/metrics`);
      assert(
        metrics.includes('streamcast_ingest_rejects_total{source="stdin",stream=""} 4'),
        metrics,
      );
      // Still serving after the end of stdin: every good row, contiguous offsets.
      const health = await fetch(`${s.url}/_/health`);
      await health.body?.cancel();
      assertEquals(health.status, 200);
      const got = await replay(s.ws, "/", 4);
      assertEquals(got, [1, 3, 6, 9].map((i, k) => `[${k + 1},${JSON.stringify(row(i))}]`));
      assertEquals((await s.signal("SIGINT")).code, 0);
    } finally {
      await s.stop();
    }
  } finally {
    await w.rm();
  }
});

Deno.test("serve shuts down with exit 1 when ingest fails for a reason other than a bad row", async () => {
  const w = await workspace();
  try {
    // The rejects file cannot be created: a reject that cannot be recorded stops ingest.
    await Deno.mkdir(join(w.root, "trades", "rejects.ndjson"), { recursive: true });
    const s = await startServe(
      [
        "--root",
        w.root,
        "--stream",
        `trades=${w.schema}`,
        "--stdin",
        "trades",
        "--port",
        String(freePort()),
      ],
      { stdin: true },
    );
    try {
      await s.write(ndjson(1, 2) + "not json\n" + ndjson(3, 4));
      assertEquals((await s.exit()).code, 1);
      const err = s.stderr();
      assert(
        /streamcast serve: ingest from stdin into stream "trades" failed: .*rejects\.ndjson.*; shutting down\n$/
          .test(err),
        err,
      );
    } finally {
      await s.stop();
    }
    // What was accepted before the failure is in the log.
    const again = await startServe([
      "--root",
      w.root,
      "--stream",
      `trades=${w.schema}`,
      "--port",
      String(freePort()),
    ]);
    try {
      assert((await endOffset(again.url, "trades")) >= 3);
    } finally {
      await again.stop();
    }
  } finally {
    await w.rm();
  }
});

/**
 * A WebSocket feed in the test process: on each path, the first connection
 * gets `first` and is dropped; the next gets `rest` and stays open.
 */
function upstreamServer(feeds: Record<string, { first: string[]; rest: string[] }>) {
  const ac = new AbortController();
  const connects: Record<string, number> = {};
  const sockets = new Set<WebSocket>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen: () => {} },
    (req) => {
      const path = new URL(req.url).pathname;
      const feed = feeds[path];
      if (!feed) return new Response("no feed", { status: 404 });
      const n = connects[path] = (connects[path] ?? 0) + 1;
      const { socket, response } = Deno.upgradeWebSocket(req);
      sockets.add(socket);
      socket.onopen = () => {
        for (const f of n === 1 ? feed.first : feed.rest) socket.send(f);
        if (n === 1) socket.close(1011, "dropped midway");
      };
      socket.onclose = () => sockets.delete(socket);
      socket.onerror = () => {};
      return response;
    },
  );
  return {
    url: `ws://127.0.0.1:${server.addr.port}`,
    connects,
    async close() {
      for (const s of sockets) s.close();
      ac.abort();
      await server.finished;
    },
  };
}

Deno.test("serve --upstream reconnects after a drop and stores every row in order", async () => {
  const w = await workspace();
  const frames = Array.from({ length: 10 }, (_, i) => JSON.stringify(row(i + 1)));
  const up = upstreamServer({ "/feed": { first: frames.slice(0, 4), rest: frames.slice(4) } });
  try {
    const s = await startServe([
      "--root",
      w.root,
      "--stream",
      `trades=${w.schema}`,
      "--upstream",
      `trades=${up.url}/feed`,
      "--port",
      String(freePort()),
    ]);
    try {
      await until(async () => (await endOffset(s.url, "trades")) === 11, 15_000, "10 rows");
      assertEquals(up.connects["/feed"], 2);
      assert(/upstream .*\/feed disconnected for stream "trades"/.test(s.stderr()), s.stderr());
      const got = await replay(s.ws, "/trades", 10);
      assertEquals(got, frames.map((f, i) => `[${i + 1},${f}]`));
      assertEquals((await s.signal("SIGTERM")).code, 0);
    } finally {
      await s.stop();
    }
  } finally {
    await up.close();
    await w.rm();
  }
});

Deno.test("serve --handler unwraps upstream frames, skips heartbeats, and rejects bad frames", async () => {
  const w = await workspace();
  const handler = join(w.dir, "unwrap.ts");
  await Deno.writeTextFile(
    handler,
    `export default function (frame: string): unknown {
  const msg = JSON.parse(frame);
  return msg.type === "heartbeat" ? null : msg.data;
}
`,
  );
  const batches = join(w.dir, "batches.ts");
  await Deno.writeTextFile(batches, `export default (frame: string) => JSON.parse(frame).rows;\n`);
  const wrap = (i: number) => JSON.stringify({ type: "trade", data: row(i) });
  const beat = JSON.stringify({ type: "heartbeat" });
  const up = upstreamServer({
    "/wrapped": {
      first: [wrap(1), beat, wrap(2), JSON.stringify({ type: "trade", data: { seq: "x" } })],
      rest: [beat, wrap(3), wrap(4), "not json", wrap(5)],
    },
    "/batches": {
      first: [JSON.stringify({ rows: [row(1), row(2)] })],
      rest: [JSON.stringify({ rows: [row(3)] }), JSON.stringify({ rows: [] })],
    },
  });
  try {
    const s = await startServe([
      "--root",
      w.root,
      "--stream",
      `trades=${w.schema}`,
      "--stream",
      `quotes=${w.schema}`,
      "--upstream",
      `trades=${up.url}/wrapped`,
      "--upstream",
      `quotes=${up.url}/batches`,
      "--handler",
      handler,
      "--handler",
      `quotes=${batches}`,
      "--port",
      String(freePort()),
    ]);
    try {
      await until(
        async () =>
          (await endOffset(s.url, "trades")) === 6 && (await endOffset(s.url, "quotes")) === 4,
        15_000,
        "5 trades and 3 quotes",
      );
      await s.waitStderr(/frame 8 for stream "trades"/);
      const trades = await replay(s.ws, "/trades", 5);
      assertEquals(trades, [1, 2, 3, 4, 5].map((i) => `[${i},${JSON.stringify(row(i))}]`));
      const quotes = await replay(s.ws, "/quotes", 3);
      assertEquals(quotes, [1, 2, 3].map((i) => `[${i},${JSON.stringify(row(i))}]`));
      // Frames are numbered across the reconnect: the 4th and the 8th were bad.
      const rejects = (await Deno.readTextFile(join(w.root, "trades", "rejects.ndjson")))
        .trimEnd().split("\n").map((l) => JSON.parse(l));
      assertEquals(rejects.map((r) => r.line), [4, 8]);
      assertEquals(rejects[1].input, "not json");
      const metrics = await getText(`${s.url}/_/metrics`);
      assert(
        metrics.includes('streamcast_ingest_rejects_total{source="upstream",stream="trades"} 2'),
        metrics,
      );
      assertEquals((await s.signal("SIGINT")).code, 0);
    } finally {
      await s.stop();
    }
  } finally {
    await up.close();
    await w.rm();
  }
});

// The arenas' free memory given back on a timer, off the event loop: each
// call is logged at debug level, and a call in flight does not hold up a stop.
Deno.test("serve --malloc-trim-every trims on its timer and stops cleanly", async () => {
  if (Deno.build.os !== "linux") return; // glibc's malloc_trim
  const w = await workspace();
  try {
    const s = await startServe([
      ...["--root", w.root, "--stream", `trades=${w.schema}`, "--port", String(freePort())],
      ...["--log-level", "debug", "--malloc-trim-every", "0.05"],
    ]);
    try {
      await until(
        () => (s.stderr().match(/malloc_trim ms=\d/g)?.length ?? 0) >= 3,
        10_000,
        "3 trims",
      );
      assertEquals((await s.signal("SIGINT")).code, 0);
    } finally {
      await s.stop();
    }
  } finally {
    await w.rm();
  }
});

Deno.test("serve refuses bad starts with one line naming the problem", async () => {
  const w = await workspace();
  const busy = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const busyPort = (busy.addr as Deno.NetAddr).port;
  const bad = join(w.dir, "bad.json");
  await Deno.writeTextFile(
    bad,
    // A column type no schema has ("array" is a column type since nested values).
    JSON.stringify({ type: "object", properties: { tags: { type: "list" } }, required: ["tags"] }),
  );
  const notJson = join(w.dir, "not.json");
  await Deno.writeTextFile(notJson, "{ type: object");
  const missing = join(w.dir, "missing.json");
  const config = join(w.dir, "typo.json");
  await Deno.writeTextFile(config, JSON.stringify({ streams: {}, maxBaclog: 5 }));
  const trades = ["--root", w.root, "--stream", `trades=${w.schema}`];
  const port = () => ["--port", String(freePort())];
  // [args, exit code, what the line must say]
  const cases: [string[], number, RegExp][] = [
    [[...trades, "--bogus"], 2, /Unknown option '--bogus'/],
    [
      [...trades, "--malloc-trim-every", "often", ...port()],
      2,
      /--malloc-trim-every must be a number of seconds >= 0, got "often"/,
    ],
    [["--stream", `trades=${missing}`, ...port()], 2, /cannot read schema file .*missing\.json/],
    [["--stream", `trades=${notJson}`, ...port()], 2, /schema file .*not\.json is not JSON/],
    [
      ["--stream", `trades=${bad}`, ...port()],
      2,
      /bad\.json .*\/properties\/tags.*"list" is not supported/,
    ],
    [[...trades, "--port", String(busyPort)], 1, new RegExp(`127\\.0\\.0\\.1:${busyPort}.*in use`)],
    [
      [...trades, "--stdin", "ticks", ...port()],
      2,
      /--stdin names stream "ticks", which is not declared/,
    ],
    [[...trades, "--ephemeral", "ticks", ...port()], 2, /--ephemeral names stream "ticks"/],
    [[...trades, "--archive", "http://bucket/prefix", ...port()], 2, /--archive must be s3:/],
    [[...trades, "--replay-archive", ...port()], 2, /need --archive/],
    [[...trades, "--max-replay", "lots", ...port()], 2, /--max-replay .*"lots"/],
    [["--config", config, ...port()], 2, /typo\.json: unknown key "maxBaclog"/],
  ];
  try {
    // Four at a time, each given a minute: twelve cold starts at once on a
    // busy two-core machine took longer than a start's safety kill.
    const results: { code: number; stderr: string }[] = [];
    for (let i = 0; i < cases.length; i += 4) {
      const batch = cases.slice(i, i + 4).map(([args]) => runServe(args, 60_000));
      results.push(...await Promise.all(batch));
    }
    results.forEach(({ code, stderr }, i) => {
      const [args, want, line] = cases[i];
      const what = `serve ${args.join(" ")}:\n${stderr}`;
      assertEquals(code, want, what);
      const out = stderr.trimEnd().split("\n");
      assertEquals(out.length, 1, `one line: ${what}`);
      assert(out[0].startsWith("streamcast serve: "), what);
      assert(line.test(out[0]), `${line}: ${what}`);
    });
    // Nothing was created by a start that failed before opening a log.
    await Deno.stat(join(w.root, "trades")).then(
      () => assert(false, "the failed starts made a log"),
      (err) => assert(err instanceof Deno.errors.NotFound),
    );
    // A log held by another process.
    const first = await startServe([...trades, ...port()]);
    try {
      const { code, stderr } = await runServe([...trades, ...port()]);
      assertEquals(code, 1, stderr);
      assertEquals(stderr.trimEnd().split("\n").length, 1, stderr);
      assert(/stream "trades": log .* is already open for writing/.test(stderr), stderr);
    } finally {
      await first.stop();
    }
  } finally {
    busy.close();
    await w.rm();
  }
});

Deno.test("serve --config resolves paths against the config file and flags override it", async () => {
  const w = await workspace();
  const conf = join(w.dir, "conf");
  const elsewhere = join(w.dir, "elsewhere");
  await Deno.mkdir(join(conf, "schemas"), { recursive: true });
  await Deno.mkdir(elsewhere);
  await Deno.writeTextFile(join(conf, "schemas", "trades.json"), JSON.stringify(SCHEMA));
  const configPort = freePort();
  const config = join(conf, "streamcast.json");
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      root: "data",
      port: configPort,
      streams: {
        trades: { schema: "schemas/trades.json" },
        ticks: { schema: SCHEMA, ephemeral: true },
      },
      stdin: "trades",
      maxReplay: 2,
      sealEvery: 30,
    }),
  );
  try {
    const flagPort = freePort();
    // Run from another folder: the config's relative paths must not depend on it.
    const s = await startServe(
      ["--config", config, "--port", String(flagPort), "--max-replay", "none"],
      { stdin: true, cwd: elsewhere },
    );
    try {
      assertEquals(s.url, `http://127.0.0.1:${flagPort}`);
      await s.write(ndjson(1, 5));
      await s.closeStdin();
      await s.waitStderr(/end of stdin for stream "trades"/);
      // maxReplay 2 from the file would refuse this; the flag said none.
      const got = await replay(s.ws, "/trades", 5);
      assertEquals(got.length, 5);
      const ticks = await getJson(`${s.url}/ticks/head`);
      assertEquals(ticks.durable, false);
      await Deno.stat(join(conf, "data", "trades", "log.json"));
      assertEquals((await s.signal("SIGINT")).code, 0);
    } finally {
      await s.stop();
    }
  } finally {
    await w.rm();
  }
});
