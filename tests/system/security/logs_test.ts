// Structured logs: JSON lines with the documented fields and levels, a level
// filter, text lines that keep the documented sentences.
import { join } from "node:path";
import { assert, assertEquals, assertThrows } from "../../harness/assert.ts";
import { Logger, serve, Stream } from "../../../mod.ts";
import { useS3Credentials } from "../../harness/s3.ts";
import { freePort, rmrf, tempDir, until } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { jsonLines, row, SCHEMA, serveCli } from "../../harness/security.ts";

async function workspace() {
  const dir = await tempDir("streamcast-logs-");
  const schema = join(dir, "schema.json");
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  return { dir, schema, rm: () => rmrf(dir) };
}

/** Feeds two good rows and a bad one, subscribes, is refused, talks, is dropped; then SIGINT. */
async function session(args: string[]): Promise<string> {
  const s = await serveCli(args, { stdin: true });
  try {
    await s.write(
      `${JSON.stringify(row(1))}\n{"seq":"two","price":1}\n${JSON.stringify(row(3))}\n`,
    );
    await s.closeStdin();
    // Each kind of event, once the rows are in.
    await until(
      async () => {
        const res = await fetch(`${s.url}/trades/head`);
        return (await res.json()).end_offset === 3;
      },
      10_000,
      "two rows in",
    );
    const ws = s.url.replace("http", "ws");
    const ok = await TestSub.open(`${ws}/trades?offset=1`);
    await ok.waitLines(2);
    const ahead = await TestSub.open(`${ws}/trades?offset=99`);
    assertEquals((await ahead.done).code, 4416);
    const missing = await TestSub.open(`${ws}/nope`);
    assertEquals((await missing.done).code, 4404);
    const talker = await TestSub.open(`${ws}/trades`);
    talker.ws.send("hello");
    assertEquals((await talker.done).code, 1008);
    await ok.close();
    assertEquals(await s.interrupt(), 0);
    return s.stderr();
  } finally {
    await s.stop();
  }
}

Deno.test("logs --log-format json: one JSON object per event, with its fields and level", async () => {
  const w = await workspace();
  try {
    const err = await session([
      ...["--root", join(w.dir, "data"), "--port", "0", "--stream", `trades=${w.schema}`],
      ...["--stdin", "trades", "--log-format", "json"],
    ]);
    const lines = err.trimEnd().split("\n");
    // The readiness line stays plain text, first; every other line is JSON.
    assert(/^listening on http:\/\/127\.0\.0\.1:\d+$/.test(lines[0]), err);
    const events = jsonLines(err);
    assertEquals(events.length, lines.length - 1, `every other line is JSON:\n${err}`);
    for (const e of events) {
      assert(typeof e.ts === "string" && !Number.isNaN(Date.parse(e.ts as string)), String(e.ts));
      assert(["error", "warn", "info", "debug"].includes(e.level as string));
      assert(typeof e.event === "string");
      assertEquals(Object.keys(e).slice(0, 3), ["ts", "level", "event"]);
    }
    const find = (event: string, pred: (e: Record<string, unknown>) => boolean = () => true) => {
      const found = events.find((e) => e.event === event && pred(e));
      assert(found, `no ${event} event:\n${err}`);
      return found;
    };
    const listening = find("listening");
    assertEquals(listening.level, "info");
    assert(String(listening.url).startsWith("http://127.0.0.1:"));
    assertEquals(listening.auth, "off");
    const sub = find("subscribe");
    assertEquals([sub.level, sub.stream, sub.offset, sub.from], ["info", "trades", 1, 1]);
    assert(typeof sub.remote === "string" && sub.remote.startsWith("127.0.0.1:"));
    const ahead = find("refused", (e) => e.code === 4416);
    assertEquals([ahead.level, ahead.stream, ahead.why], ["info", "trades", "ahead"]);
    assertEquals(find("refused", (e) => e.code === 4404).stream, "nope");
    const dropped = find("dropped");
    assertEquals([dropped.level, dropped.code, dropped.error], ["warn", 1008, "read_only"]);
    const reject = find("ingest_reject");
    assertEquals([reject.level, reject.stream, reject.source, reject.line], [
      "warn",
      "trades",
      "stdin",
      2,
    ]);
    assert(String(reject.error).includes("/seq"), String(reject.error));
    assertEquals(reject.input, undefined, "no raw input below debug");
    const end = find("ingest");
    assert(String(end.msg).includes("end of stdin"), String(end.msg));
    const down = find("shutdown");
    assertEquals([down.level, down.signal], ["info", "SIGINT"]);
    // No event is logged twice as text.
    assert(!/^streamcast: /m.test(err), err);
  } finally {
    await w.rm();
  }
});

Deno.test("logs --log-level error silences info and warn; debug adds the raw input of a reject", async () => {
  const w = await workspace();
  try {
    const base = [
      ...["--port", "0", "--stream", `trades=${w.schema}`, "--stdin", "trades"],
      ...["--log-format", "json"],
    ];
    const quiet = await session([...base, "--root", join(w.dir, "a"), "--log-level", "error"]);
    const lines = quiet.trimEnd().split("\n");
    assertEquals(lines.length, 1, `only the readiness line:\n${quiet}`);
    assert(lines[0].startsWith("listening on http://"));
    const loud = await session([...base, "--root", join(w.dir, "b"), "--log-level", "debug"]);
    const events = jsonLines(loud);
    const reject = events.find((e) => e.event === "ingest_reject")!;
    assertEquals(reject.input, '{"seq":"two","price":1}');
    assert(events.some((e) => e.event === "unsubscribe" && e.level === "debug"), loud);
  } finally {
    await w.rm();
  }
});

Deno.test("logs in text format keep the documented lines and add events as key=value", async () => {
  const w = await workspace();
  try {
    const err = await session([
      ...["--root", join(w.dir, "data"), "--port", "0", "--stream", `trades=${w.schema}`],
      ...["--stdin", "trades"],
    ]);
    assert(/^listening on http:\/\/127\.0\.0\.1:\d+$/m.test(err), err);
    assert(/^streamcast: stdin line 2 for stream "trades": .*\/seq/m.test(err), err);
    assert(
      /^streamcast: end of stdin for stream "trades" \(2 rows accepted, 1 rejected\); still serving$/m
        .test(err),
      err,
    );
    assert(
      /^streamcast: subscribe stream=trades remote=127\.0\.0\.1:\d+ offset=1 from=1 /m.test(err),
      err,
    );
    assert(
      /^streamcast: refused code=4416 .*why=ahead/m.test(err) || /refused .*why=ahead/.test(err),
      err,
    );
    assert(/^streamcast: warn dropped stream=trades .*code=1008 error=read_only/m.test(err), err);
    assert(/^streamcast serve: SIGINT received; shutting down$/m.test(err), err);
    assert(!err.includes('{"ts"'), err);
  } finally {
    await w.rm();
  }
});

Deno.test("logs: Logger filters by level and writes one line per event", () => {
  const lines: string[] = [];
  const at = new Date("2026-01-02T03:04:05.678Z");
  const log = new Logger({
    level: "info",
    format: "json",
    write: (l) => lines.push(l),
    now: () => at,
  });
  log.debug("hidden");
  log.info("subscribe", { stream: "trades", offset: null, skip: undefined });
  log.warn("dropped", { error: new Error("boom\nline two") }, "a sentence");
  log.error("x", { level: "not me", ts: "nor me" });
  assertEquals(lines.length, 3);
  assertEquals(JSON.parse(lines[0]), {
    ts: "2026-01-02T03:04:05.678Z",
    level: "info",
    event: "subscribe",
    stream: "trades",
    offset: null,
  });
  assertEquals(JSON.parse(lines[1]).error, "boom\nline two");
  assertEquals(JSON.parse(lines[1]).msg, "a sentence");
  assert(!lines[1].includes("\n"));
  assertEquals(JSON.parse(lines[2]).level, "error", "fields never override ts, level, event");
  const text: string[] = [];
  const t = new Logger({ level: "warn", write: (l) => text.push(l) });
  t.info("subscribe", { stream: "trades" });
  t.warn("dropped", { stream: "a b", code: 4429, n: null });
  t.error("oops", {}, "streamcast: a\nsentence");
  assertEquals(text, [
    'streamcast: warn dropped stream="a b" code=4429 n=null',
    "streamcast: a sentence",
  ]);
  assert(t.enabled("error") && t.enabled("warn") && !t.enabled("info"));
  assertThrows(() => new Logger({ level: "loud" as "info" }), RangeError, "log level");
  assertThrows(() => new Logger({ format: "xml" as "json" }), RangeError, "log format");
  // A write that throws (stderr closed) is swallowed.
  new Logger({
    write: () => {
      throw new Error("EPIPE");
    },
  }).info("x");
});

Deno.test("logs: bad --log-level and --log-format are refused with one line, exit 2", async () => {
  const w = await workspace();
  try {
    for (
      const [flag, value] of [["--log-level", "loud"], ["--log-format", "xml"]] as const
    ) {
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          new URL("../../../cli.ts", import.meta.url).pathname,
          "serve",
          ...["--root", join(w.dir, "data"), "--port", "0", "--stream", `trades=${w.schema}`],
          flag,
          value,
        ],
        stdout: "null",
        stderr: "piped",
        env: { NO_COLOR: "1" },
      }).output();
      const err = new TextDecoder().decode(out.stderr)
        .replace(/^Blocking waiting for file lock.*\n/gm, "");
      assertEquals(out.code, 2, err);
      assertEquals(err.trimEnd().split("\n").length, 1, err);
      assert(err.includes(flag) && err.includes(value), err);
    }
  } finally {
    await w.rm();
  }
});

Deno.test("logs: an archive upload error is logged as archive_error, once", async () => {
  useS3Credentials();
  const root = await tempDir();
  const lines: string[] = [];
  const stream = await Stream.open("trades", {
    schema: SCHEMA,
    root,
    // Nothing listens there: every upload fails (and close does not wait for one).
    logOptions: { archiveWaitMs: 100 },
    archive: {
      uri: "s3://bucket/prefix",
      endpoint: `http://127.0.0.1:${freePort()}`,
      forcePathStyle: true,
    },
  });
  const server = serve([stream], {
    port: 0,
    onListen: () => {},
    logger: new Logger({ format: "json", write: (l) => lines.push(l) }),
  });
  try {
    await stream.sendMany([row(1), row(2)]);
    await stream.log!.roll();
    await until(() => lines.some((l) => l.includes('"archive_error"')), 20_000, "archive_error");
    const e = jsonLines(lines.join("\n")).find((x) => x.event === "archive_error")!;
    assertEquals([e.level, e.stream], ["error", "trades"]);
    assert(typeof e.error === "string" && e.error.length > 0);
    assert(!String(e.error).includes("S3RVER"), "no credentials in the log");
    await new Promise((r) => setTimeout(r, 1500));
    assertEquals(lines.filter((l) => l.includes('"archive_error"')).length, 1, lines.join("\n"));
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});
