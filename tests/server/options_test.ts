// Every option of serve() and of Stream's factories is checked at the call: a
// wrong type is a TypeError, a wrong value a RangeError, an unknown key a
// TypeError, each naming the option and the value seen.
import { assertEquals, assertRejects, assertThrows } from "../harness/assert.ts";
import { Logger, serve, Stream, TokenTable } from "../../mod.ts";
import { rmrf, tempDir } from "../harness/util.ts";

const SCHEMA = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
// deno-lint-ignore no-explicit-any
type Any = any;

Deno.test("options serve: a wrong type is a TypeError naming the option and the value", () => {
  const s = Stream.ephemeral("t", { schema: SCHEMA });
  const cases: [Record<string, unknown>, string][] = [
    [{ port: "80" }, 'serve: options.port must be an integer 0..65535, got "80"'],
    [{ hostname: 127 }, "serve: options.hostname must be a string, got 127"],
    [{ pingIntervalS: "30" }, 'serve: options.pingIntervalS must be a number >= 0, got "30"'],
    [{ maxConnections: null }, "serve: options.maxConnections must be an integer >= 1, got null"],
    [
      { openFilesBound: "900" },
      'serve: options.openFilesBound must be an integer >= 1 or null, got "900"',
    ],
    [{ maxUrlBytes: "8k" }, 'options.maxUrlBytes must be an integer >= 64, got "8k"'],
    [{ maxReplayReaders: [] }, "options.maxReplayReaders must be an integer >= 1, got an array"],
    [{ tokens: {} }, "serve: options.tokens must be a TokenTable or null, got an object (Object)"],
    [{ logger: console }, "serve: options.logger must be a Logger, got an object"],
    [{ signal: true }, "serve: options.signal must be an AbortSignal, got true"],
    [{ onListen: "log" }, 'serve: options.onListen must be a function, got "log"'],
    [{ tls: "cert.pem" }, 'serve: options.tls must be an object, got "cert.pem"'],
    [{ tls: { cert: "x" } }, "serve: options.tls.key must be a PEM string, got undefined"],
    [{ tls: { cert: "x", key: "y", ca: "z" } }, 'unknown option "tls.ca"'],
    [{ closeStreams: 1 }, "serve: options.closeStreams must be a boolean, got 1"],
    [{ closeWaitMs: "2s" }, 'serve: options.closeWaitMs must be a number >= 0, got "2s"'],
    [{ prot: 0 }, 'serve: unknown option "prot"'],
  ];
  for (const [bad, message] of cases) {
    assertThrows(() => serve([s], { onListen: () => {}, ...bad } as Any), TypeError, message);
  }
  assertThrows(() => serve([s], "fast" as Any), TypeError, "serve: options must be an object");
  assertThrows(
    () => serve([{ name: "t" }] as Any),
    TypeError,
    "serve: streams[0] must be a Stream",
  );
  assertThrows(() => serve("t" as Any), TypeError, 'serve: streams must be a Stream, got "t"');
});

Deno.test("options serve: a wrong value is a RangeError naming the option and the value", () => {
  const s = Stream.ephemeral("t", { schema: SCHEMA });
  const cases: [Record<string, unknown>, string][] = [
    [{ port: 70000 }, "serve: options.port must be an integer 0..65535, got 70000"],
    [{ port: -1 }, "got -1"],
    [{ port: 80.5 }, "got 80.5"],
    [{ hostname: "" }, 'serve: options.hostname must not be empty, got ""'],
    [{ pingIntervalS: -1 }, "serve: options.pingIntervalS must be a number >= 0, got -1"],
    [{ pingIntervalS: NaN }, "got NaN"],
    [{ maxConnections: 0 }, "serve: options.maxConnections must be an integer >= 1, got 0"],
    [{ openFilesBound: 0 }, "serve: options.openFilesBound must be an integer >= 1 or null, got 0"],
    [{ maxUrlBytes: 10 }, "serve: options.maxUrlBytes must be an integer >= 64, got 10"],
    [{ closeWaitMs: -5 }, "serve: options.closeWaitMs must be a number >= 0, got -5"],
  ];
  for (const [bad, message] of cases) {
    assertThrows(() => serve([s], { onListen: () => {}, ...bad } as Any), RangeError, message);
  }
});

Deno.test("options serve: options set to undefined mean the default", async () => {
  const s = Stream.ephemeral("t", { schema: SCHEMA });
  const server = serve([s], {
    port: 0,
    onListen: () => {},
    tokens: null,
    tls: undefined,
    pingIntervalS: undefined,
    logger: Logger.silent(),
  });
  assertEquals((await (await fetch(`${server.url}/_/health`)).json()).ok, true);
  await server.shutdown();
  const table = TokenTable.parse({ tokens: [{ token: "a".repeat(16), streams: ["*"] }] });
  const other = serve([Stream.ephemeral("u", { schema: SCHEMA })], {
    port: 0,
    onListen: () => {},
    tokens: table,
  });
  await other.shutdown();
});

Deno.test("options Stream.open: wrong types, values and keys are refused before any I/O", async () => {
  const root = await tempDir();
  try {
    const types: [Record<string, unknown>, string][] = [
      [{ maxBacklog: "8" }, 'Stream.open: options.maxBacklog must be an integer >= 1, got "8"'],
      [{ maxReplay: "all" }, 'options.maxReplay must be an integer >= 0 or null, got "all"'],
      [{ stallTimeoutMs: true }, "options.stallTimeoutMs must be a number > 0, got true"],
      [{ maxSubscribers: {} }, "options.maxSubscribers must be an integer >= 1, got an object"],
      [{ root: 5 }, "Stream.open: options.root must be a string, got 5"],
      [{ logOptions: "x" }, 'Stream.open: options.logOptions must be an object, got "x"'],
      [{ archive: 5 }, "Stream.open: options.archive must be an s3:// URI, an object with uri"],
      [{ archive: { endpoint: "x" } }, "options.archive must be an s3:// URI, an object with uri"],
      [{ replayArchive: "yes" }, 'options.replayArchive must be a boolean, got "yes"'],
      [{ schema: "x" }, 'Stream.open: options.schema must be a JSON Schema object, got "x"'],
      [{ schema: undefined }, "options.schema must be a JSON Schema object, got undefined"],
      [{ maxbacklog: 8 }, 'Stream.open: unknown option "maxbacklog"'],
    ];
    for (const [bad, message] of types) {
      await assertRejects(
        () => Stream.open("t", { schema: SCHEMA, root, ...bad } as Any),
        TypeError,
        message,
      );
    }
    const values: [Record<string, unknown>, string][] = [
      [{ maxBacklog: 0 }, "Stream.open: options.maxBacklog must be an integer >= 1, got 0"],
      [{ maxReplay: -1 }, "options.maxReplay must be an integer >= 0 or null, got -1"],
      [{ stallTimeoutMs: 0 }, "options.stallTimeoutMs must be a number > 0, got 0"],
      [{ maxSubscribers: 1.5 }, "options.maxSubscribers must be an integer >= 1, got 1.5"],
      [{ root: "" }, 'Stream.open: options.root must not be empty, got ""'],
    ];
    for (const [bad, message] of values) {
      await assertRejects(
        () => Stream.open("t", { schema: SCHEMA, root, ...bad } as Any),
        RangeError,
        message,
      );
    }
    await assertRejects(() => Stream.open("t", undefined as Any), TypeError, "options");
    await assertRejects(() => Stream.open(5 as Any, { schema: SCHEMA }), TypeError, "got 5");
    await assertRejects(() => Stream.open(".x", { schema: SCHEMA }), RangeError, '".x": 1-64');
    // Nothing was created on the way.
    assertEquals([...Deno.readDirSync(root)].length, 0);
    // maxReplay null is unbounded; undefined values are the defaults.
    const s = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null, archive: undefined });
    assertEquals([s.maxReplay, s.maxBacklog], [null, 8192]);
    await s.close();
  } finally {
    await rmrf(root);
  }
});

Deno.test("options Stream.ephemeral, new Stream and Stream.restore check theirs", async () => {
  assertThrows(
    () => Stream.ephemeral("t", { schema: SCHEMA, maxBacklog: "1" } as Any),
    TypeError,
    'Stream.ephemeral: options.maxBacklog must be an integer >= 1, got "1"',
  );
  assertThrows(
    () => Stream.ephemeral("t", { schema: SCHEMA, root: "data" }),
    TypeError,
    "Stream.ephemeral: options.root is for a durable stream",
  );
  assertThrows(
    () => Stream.ephemeral("t", { schema: SCHEMA, log: null } as Any),
    TypeError,
    'Stream.ephemeral: unknown option "log"',
  );
  const s = Stream.ephemeral("t", { schema: SCHEMA });
  assertEquals([s.durable, s.endOffset], [false, null]);
  await assertRejects(
    () => Stream.restore("t", { schema: SCHEMA, root: "data" } as Any),
    TypeError,
    "Stream.restore: options.archive must be an s3:// URI",
  );
  await assertRejects(
    () =>
      Stream.restore(
        "t",
        { schema: SCHEMA, root: "d", archive: "s3://b/p", hydrate: "all" } as Any,
      ),
    TypeError,
    'Stream.restore: options.hydrate must be an integer >= 0, got "all"',
  );
  await assertRejects(
    () => Stream.restore("t", { schema: SCHEMA, root: "d", archive: "s3://b/p", typo: 1 } as Any),
    TypeError,
    'Stream.restore: unknown option "typo"',
  );
});
