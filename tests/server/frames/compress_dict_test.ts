// compress=zstd-dict (docs/SPEC.md §2.6): frames compressed with the
// stream's raw-content dictionary, named in the greeting and served at
// /{name}/dictionaries/{id}; the `zstd` command given that file (-D) decodes
// them to exactly the batched text, live and replayed; plain compress=zstd
// subscribers keep standalone frames.
import { assert, assertEquals } from "../../harness/assert.ts";
import { Logger, serve, Stream, TokenTable } from "../../../mod.ts";
import { connect } from "../../../client/mod.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { zstdCli } from "../../harness/zstd_cli.ts";
import { TestSub } from "../../harness/subscriber.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, sym: { type: "string" }, px: { type: "number" } },
  required: ["i", "sym", "px"],
};
const row = (i: number) => ({ i, sym: ["BTC-USD", "ETH-USD", "SOL-USD"][i % 3], px: i * 1.25 });
const line = (i: number) => `[${i},${JSON.stringify(row(i))}]`;

/** A subscriber keeping every message as it came. */
class ZSub {
  readonly ws: WebSocket;
  greeting: Record<string, unknown> | null = null;
  readonly frames: Uint8Array[] = [];
  closed: { code: number; reason: string } | null = null;
  constructor(url: string) {
    this.ws = new WebSocket(url);
    this.ws.binaryType = "arraybuffer";
    this.ws.onerror = () => {};
    this.ws.onclose = (e) => (this.closed = { code: e.code, reason: e.reason });
    this.ws.onmessage = (e) => {
      if (this.greeting === null) this.greeting = JSON.parse(e.data);
      else {
        assert(e.data instanceof ArrayBuffer, "a compressed data frame is binary");
        this.frames.push(new Uint8Array(e.data));
      }
    };
  }
  static async open(url: string): Promise<ZSub> {
    const s = new ZSub(url);
    await until(() => s.greeting !== null || s.closed !== null, 10_000, `greeting ${url}`);
    return s;
  }
  async lines(dict?: string): Promise<string[]> {
    const out: string[] = [];
    for (const f of this.frames) out.push(...(await zstdCli(f, dict)).split("\n"));
    return out;
  }
  async close(): Promise<void> {
    if (this.closed) return;
    this.ws.close();
    await until(() => this.closed !== null, 5_000, "close");
  }
}

Deno.test("compress=zstd-dict: the greeting names a dictionary served immutable; zstd -D decodes live and replayed frames to the batched text", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const port = server.addr.port;
  const url = `ws://127.0.0.1:${port}/t`;
  try {
    // Too few rows for a dictionary: plain zstd frames, no dictionary field.
    await stream.sendMany([1, 2].map(row));
    const early = await ZSub.open(`${url}?frames=batch&compress=zstd-dict`);
    assertEquals(early.greeting!.compress, "zstd");
    assertEquals(early.greeting!.dictionary, undefined);
    for (let i = 3; i <= 400; i += 50) {
      await stream.sendMany(Array.from({ length: 50 }, (_, k) => row(i + k)).slice(0, 401 - i));
    }
    const z = await ZSub.open(`${url}?offset=1&frames=batch&compress=zstd-dict`);
    const z2 = await ZSub.open(`${url}?frames=batch&compress=zstd-dict`);
    const plain = await ZSub.open(`${url}?frames=batch&compress=zstd`);
    const text = await TestSub.open(`${url}?frames=batch`);
    const id = z.greeting!.dictionary as string;
    assert(/^[0-9a-f]{32}$/.test(id), `a dictionary id: ${id}`);
    assertEquals(z.greeting!.compress, "zstd");
    assertEquals(z2.greeting!.dictionary, id, "one dictionary for the stream");
    assertEquals(plain.greeting!.dictionary, undefined, "compress=zstd never names one");
    // The route: immutable, ETag, 304, and the same bytes as the file in the log folder.
    const res = await fetch(`http://127.0.0.1:${port}/t/dictionaries/${id}`);
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("etag"), `"${id}"`);
    assert(res.headers.get("cache-control")!.includes("immutable"));
    const bytes = new Uint8Array(await res.arrayBuffer());
    assertEquals(bytes, await Deno.readFile(`${root}/t/dictionaries/${id}`));
    const sha = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    assertEquals([...sha].map((b) => b.toString(16).padStart(2, "0")).join("").slice(0, 32), id);
    const again = await fetch(`http://127.0.0.1:${port}/t/dictionaries/${id}`, {
      headers: { "if-none-match": `"${id}"` },
    });
    assertEquals(again.status, 304);
    await again.body?.cancel();
    const dictFile = `${root}/dict.bin`;
    await Deno.writeFile(dictFile, bytes);
    // Replay (offset=1) decodes with the dictionary.
    await until(() => z.frames.length > 0, 10_000, "replay frames");
    await until(async () => (await z.lines(dictFile)).length >= 400, 10_000, "400 rows");
    assertEquals(await z.lines(dictFile), Array.from({ length: 400 }, (_, k) => line(k + 1)));
    // Live commits: one frame each, with the dictionary; smaller than standalone.
    const before = z.frames.length;
    for (let i = 401; i <= 405; i++) await stream.send(row(i));
    await until(() => z2.frames.length >= 5 && plain.frames.length >= 5, 10_000, "5 live frames");
    await until(() => z.frames.length >= before + 5, 10_000, "5 live frames on z");
    await text.waitLines(5);
    const live = [401, 402, 403, 404, 405].map(line);
    assertEquals(await z2.lines(dictFile), live);
    assertEquals(await z.lines(dictFile).then((l) => l.slice(400)), live);
    assertEquals(await plain.lines(), live, "plain frames decode without a dictionary");
    assertEquals(await zstdCli(z2.frames[2], dictFile), text.frames.at(-3), "the batched text");
    const sum = (fs: Uint8Array[]) => fs.reduce((a, f) => a + f.length, 0);
    assert(sum(z2.frames) < sum(plain.frames), `${sum(z2.frames)} < ${sum(plain.frames)}`);
    // The same bytes go to both dictionary subscribers (compressed once per commit).
    assertEquals(z.frames.slice(before), z2.frames);
    // Without the dictionary the frames do not decode.
    let failed = false;
    await zstdCli(z2.frames[0]).catch(() => (failed = true));
    assert(failed, "a dictionary frame needs the dictionary");
    // The early subscriber keeps plain frames.
    assertEquals((await early.lines()).slice(-5), live);
    await Promise.all([early, z, z2, plain].map((s) => s.close()));
    await text.close();
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("GET /{name}/dictionaries/{id}: 404 for an unknown or malformed id, on an ephemeral stream, and before one is built", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const eph = await Stream.open("e", { schema: SCHEMA });
  const server = serve([stream, eph], { port: 0, onListen: () => {} });
  const base = `http://127.0.0.1:${server.addr.port}`;
  try {
    const get = async (path: string) => {
      const r = await fetch(base + path);
      const body = await r.text();
      return { status: r.status, body };
    };
    const zero = "0".repeat(32);
    assertEquals((await get(`/t/dictionaries/${zero}`)).status, 404, "none built yet");
    await stream.sendMany(Array.from({ length: 300 }, (_, k) => row(k + 1)));
    const z = await ZSub.open(
      `ws://127.0.0.1:${server.addr.port}/t?frames=batch&compress=zstd-dict`,
    );
    const id = z.greeting!.dictionary as string;
    assertEquals((await get(`/t/dictionaries/${id}`)).status, 200);
    const unknown = await get(`/t/dictionaries/${zero}`);
    assertEquals(unknown.status, 404);
    assert(unknown.body.includes("no dictionary"), unknown.body);
    assertEquals((await get(`/t/dictionaries/xyz`)).status, 404);
    assertEquals((await get(`/t/dictionaries/${id.toUpperCase()}`)).status, 404);
    assertEquals((await get(`/t/dictionaries/`)).status, 404);
    assertEquals((await get(`/e/dictionaries/${id}`)).status, 404, "another stream's id");
    assertEquals((await get(`/nope/dictionaries/${id}`)).status, 404);
    // An ephemeral stream has no log to build one from: plain zstd frames.
    const e = await ZSub.open(
      `ws://127.0.0.1:${server.addr.port}/e?frames=batch&compress=zstd-dict`,
    );
    assertEquals(e.greeting!.compress, "zstd");
    assertEquals(e.greeting!.dictionary, undefined);
    // compress=zstd-dict needs frames=batch, like compress=zstd.
    const single = await ZSub.open(`ws://127.0.0.1:${server.addr.port}/t?compress=zstd-dict`);
    await until(() => single.closed !== null, 5_000, "close");
    assertEquals(single.closed!.code, 4400);
    assertEquals(
      JSON.parse(single.closed!.reason).detail,
      "compress=zstd-dict needs frames=batch, got frames=single",
    );
    await Promise.all([z, e].map((s) => s.close()));
  } finally {
    await server.shutdown();
    await stream.close();
    await eph.close();
    await rmrf(root);
  }
});

Deno.test("GET /{name}/dictionaries/{id} needs a token that reads the stream; the client fetches it with its token", async () => {
  const A = "alice-0123456789abcdef0123456789"; // t only
  const B = "bob-0123456789abcdef0123456789abcd"; // u only
  const root = await tempDir();
  const t = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const u = await Stream.open("u", { schema: SCHEMA, root, maxReplay: null });
  const server = serve([t, u], {
    port: 0,
    onListen: () => {},
    logger: Logger.silent(),
    tokens: TokenTable.parse({
      tokens: [{ token: A, streams: ["t"] }, { token: B, streams: ["u"] }],
    }),
  });
  const port = server.addr.port;
  try {
    await t.sendMany(Array.from({ length: 300 }, (_, k) => row(k + 1)));
    const sub = await connect<ReturnType<typeof row>>(`ws://127.0.0.1:${port}/t`, {
      offset: 1,
      token: A,
      compress: "zstd-dict",
    });
    const id = sub.greeting.dictionary as string;
    assert(/^[0-9a-f]{32}$/.test(id), `a dictionary: ${id}`);
    let want = 1;
    for await (const [offset, msg] of sub) {
      assertEquals([offset, msg], [want, row(want)]);
      if (++want > 300) break;
    }
    await sub.close();
    const status = async (token?: string) => {
      const r = await fetch(`http://127.0.0.1:${port}/t/dictionaries/${id}`, {
        headers: token ? { authorization: `Bearer ${token}` } : {},
      });
      await r.body?.cancel();
      return r.status;
    };
    assertEquals(await status(A), 200);
    assertEquals(await status(), 401);
    assertEquals(await status(B), 403);
  } finally {
    await server.shutdown();
    await t.close();
    await u.close();
    await rmrf(root);
  }
});

Deno.test("compress=zstd-dict on a server without FFI permission: plain zstd frames, no dictionary, one warning", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--config",
      "deno.json",
      "--allow-net=127.0.0.1",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-sys",
      new URL("./_dict_no_ffi.ts", import.meta.url).pathname,
    ],
    cwd: new URL("../../..", import.meta.url).pathname,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  const stderr = new TextDecoder().decode(out.stderr);
  assert(out.success, `the server process failed: ${stderr}`);
  const greetings = stdout.split("\n").filter((l) => l.startsWith('{"streamcast"'));
  assertEquals(greetings.length, 2);
  for (const g of greetings.map((l) => JSON.parse(l))) {
    assertEquals(g.compress, "zstd");
    assertEquals(g.dictionary, undefined);
  }
  const all = stdout + stderr;
  assert(all.includes("no libzstd through FFI"), all);
  assertEquals(all.split("no libzstd through FFI").length - 1, 1, "warned once");
});
