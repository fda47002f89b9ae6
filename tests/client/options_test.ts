// connect's options: a cursor path is a FileCursor; every option's type and
// value is checked at the call, before any socket opens.
import { assert, assertEquals, assertRejects, assertThrows } from "../harness/assert.ts";
import {
  connect,
  type ConnectOptions,
  LocalStorageCursor,
  MemoryCursor,
} from "../../client/mod.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { fixture, take } from "../harness/client_server.ts";

Deno.test("connect takes a cursor path as a FileCursor, which resumes where the loop stopped", async () => {
  const f = await fixture();
  const dir = await tempDir();
  try {
    await f.send(1, 20);
    const path = `${dir}/.trades.cursor`;
    const sub = await connect(f.url, { offset: 1, cursor: path });
    for await (const [offset] of sub) if (offset === 7) break;
    const saved = JSON.parse(await Deno.readTextFile(path));
    assertEquals(saved.offset, 7, "row 7 was not handled: the cursor stays on it");
    assertEquals(saved.stream_id, f.stream.streamId);
    // A new subscription on the same path resumes there; the cursor wins over offset.
    const again = await connect(f.url, { offset: 1, cursor: path });
    assertEquals((await take(again, 3)).map(([o]) => o), [7, 8, 9]);
    assertEquals(JSON.parse(await Deno.readTextFile(path)).offset, 9);
  } finally {
    await rmrf(dir);
    await f.stop();
  }
});

Deno.test("connect refuses a cursor that is neither a path nor a CursorStore, naming its type", async () => {
  const url = "ws://127.0.0.1:1/t";
  const cases: [unknown, string][] = [
    [5, "got number 5"],
    [true, "got boolean true"],
    [null, "got null"],
    [[".c"], "got an array"],
    [{ offset: 5 }, "got an object"],
    [{ load: () => Promise.resolve(null) }, "got an object"],
    [() => {}, "got a function"],
  ];
  for (const [cursor, seen] of cases) {
    const err = await assertRejects(
      () => connect(url, { cursor } as unknown as ConnectOptions),
      TypeError,
      "connect: cursor must be a file path (a string) or a CursorStore",
    );
    assert(err.message.includes(seen), `${err.message} does not say ${seen}`);
  }
  await assertRejects(() => connect(url, { cursor: "" }), RangeError, "cursor");
});

/** A WebSocket that fails the test if any check lets a connect through. */
function noSocket(opened: string[]): ConnectOptions["WebSocket"] {
  return class {
    constructor(url: string) {
      opened.push(url);
      throw new Error(`a socket was opened: ${url}`);
    }
  } as unknown as ConnectOptions["WebSocket"];
}

Deno.test("connect checks every option's type and value at the call, before any socket opens", async () => {
  const opened: string[] = [];
  const WebSocket = noSocket(opened);
  const url = "ws://127.0.0.1:1/t";
  // [options, error class, what the message names]
  const cases: [Record<string, unknown>, typeof TypeError | typeof RangeError, string][] = [
    [{ offset: "5" }, TypeError, 'offset must be an integer >= 0 or "earliest", got string "5"'],
    [{ offset: null }, TypeError, "offset must be an integer >= 0"],
    [{ offset: -1 }, RangeError, "offset must be an integer >= 0"],
    [{ offset: 1.5 }, RangeError, "got 1.5"],
    [{ saveEveryRows: "10" }, TypeError, 'saveEveryRows must be a number, got string "10"'],
    [{ saveEveryRows: 0 }, RangeError, "saveEveryRows must be a number >= 1, got 0"],
    [{ saveEveryMs: -1 }, RangeError, "saveEveryMs must be a number >= 0, got -1"],
    [{ saveEveryMs: NaN }, RangeError, "saveEveryMs"],
    [{ connectTimeoutMs: "1s" }, TypeError, "connectTimeoutMs must be a number"],
    [{ connectTimeoutMs: 0 }, RangeError, "connectTimeoutMs must be a number >= 1, got 0"],
    [{ beforeSave: "flush" }, TypeError, 'beforeSave must be a function, got string "flush"'],
    [{ reconnect: "yes" }, TypeError, 'reconnect must be a boolean, got string "yes"'],
    [{ reconnect: 1 }, TypeError, "reconnect must be a boolean, got number 1"],
    [{ onReconnect: {} }, TypeError, "onReconnect must be a function, got an object"],
    [{ backoff: 100 }, TypeError, "backoff must be an object {minMs, maxMs}, got number 100"],
    [{ backoff: { minMs: "1" } }, TypeError, "backoff.minMs must be a number"],
    [{ backoff: { minMs: -1 } }, RangeError, "backoff.minMs must be a number >= 0, got -1"],
    [{ backoff: { minMs: 10, maxMs: 5 } }, RangeError, "backoff.maxMs must be a number >= 10"],
    [{ backoff: { min: 10 } }, TypeError, "unknown option backoff.min"],
    [{ signal: "stop" }, TypeError, 'signal must be an AbortSignal, got string "stop"'],
    [{ signal: {} }, TypeError, "signal must be an AbortSignal, got an object"],
    [{ WebSocket: "ws" }, TypeError, 'WebSocket must be a function, got string "ws"'],
    [{ token: 12345 }, TypeError, "token must be a string or a function, got number"],
    [{ token: "short" }, TypeError, "token must be 16-512 characters"],
    [
      { catchUp: "yes" },
      TypeError,
      'catchUp must be a boolean or CatchUpOptions, got string "yes"',
    ],
    [{ catchUp: { archive: "s3://a/b" } }, TypeError, "catchUp.archive must be a ChunkSource"],
    [{ catchUp: { decompress: 1 } }, TypeError, "catchUp.decompress must be a function"],
    [{ catchUp: { fetch: "x" } }, TypeError, "catchUp.fetch must be a function"],
    [{ catchUp: { archiv: {} } }, TypeError, "catchUp: unknown option archiv"],
    [{ ofset: 5 }, TypeError, "connect: unknown option ofset"],
    [{ cursorUri: "s3://b/k" }, TypeError, "connect: unknown option cursorUri"],
  ];
  for (const [options, cls, names] of cases) {
    await assertRejects(
      () => connect(url, { WebSocket, ...options } as ConnectOptions),
      cls,
      names,
    );
  }
  for (const options of [null, 5, "earliest", [1]]) {
    await assertRejects(
      () => connect(url, options as unknown as ConnectOptions),
      TypeError,
      "connect: options must be an object",
    );
  }
  // The token is a secret: no message quotes it.
  const bad = await assertRejects(
    () => connect(url, { WebSocket, token: "not a token at all, 0123456789" }),
    TypeError,
  );
  assert(!bad.message.includes("not a token"), bad.message);
  assertEquals(opened, [], "no check may let a socket open");
});

Deno.test("connect accepts every option of the right type and value", async () => {
  const f = await fixture();
  const dir = await tempDir();
  try {
    await f.send(1, 5);
    const ac = new AbortController();
    const sub = await connect(f.url, {
      offset: 2,
      cursor: new MemoryCursor(),
      saveEveryRows: 1.5,
      saveEveryMs: 0,
      beforeSave: () => {},
      reconnect: false,
      backoff: { minMs: 0, maxMs: 0 },
      onReconnect: () => {},
      signal: ac.signal,
      connectTimeoutMs: 5_000,
      WebSocket: globalThis.WebSocket,
      token: undefined,
      catchUp: { decompress: (b: Uint8Array) => b, archive: null, fetch },
    });
    assertEquals((await take(sub, 2)).map(([o]) => o), [2, 3]);
    const live = await connect(f.url, { catchUp: true, offset: "earliest" });
    assertEquals((await take(live, 1)).map(([o]) => o), [1]);
  } finally {
    await rmrf(dir);
    await f.stop();
  }
});

Deno.test("connect on the browser path: a cursor path is a TypeError; a LocalStorageCursor resumes", async () => {
  const f = await fixture();
  try {
    await f.send(1, 10);
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_browserlike_cursor.ts", import.meta.url).pathname, f.url],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const dec = new TextDecoder();
    assertEquals(out.code, 0, dec.decode(out.stderr));
    const r = JSON.parse(dec.decode(out.stdout));
    assertEquals(r.refused, "TypeError");
    assert(r.message.includes('".trades.cursor"'), r.message);
    assert(r.message.includes("LocalStorageCursor"), r.message);
    assertEquals(r.runs, [[1, 2, 3], [3, 4, 5]]);
    assertEquals(r.item.offset, 5);
    assertEquals(r.item.stream_id, f.stream.streamId);
  } finally {
    await f.stop();
  }
});

Deno.test("LocalStorageCursor saves one item and refuses one that is not a cursor", async () => {
  const items = new Map<string, string>();
  const storage = {
    getItem: (k: string) => items.get(k) ?? null,
    setItem: (k: string, v: string) => void items.set(k, v),
  };
  const c = new LocalStorageCursor("c", { storage });
  assertEquals(await c.load(), null);
  await c.save({ offset: 12, streamId: "0123456789abcdef0123456789abcdef" });
  assertEquals(await c.load(), { offset: 12, streamId: "0123456789abcdef0123456789abcdef" });
  assertEquals(JSON.parse(items.get("c")!).stream_id, "0123456789abcdef0123456789abcdef");
  items.set("c", "{oops");
  await assertRejects(() => c.load(), TypeError, 'cursor item "c" is not JSON');
  items.set("c", '{"offset":-1}');
  await assertRejects(() => c.load(), TypeError, "offset: integer >= 0");
  await assertRejects(() => c.save({ offset: 1.5, streamId: null }), TypeError);
  assertThrows(() => new LocalStorageCursor(""), TypeError, "needs an item key");
});
