// Fuzz of a mirror's inputs from a lying primary (docs/SPEC.md §10.4): a
// fake primary in the test (Deno.serve: `/trades/head`, `/trades/manifest`,
// `/trades/chunks/{sha}`, the batched subscribe socket) answers each request
// and each socket with a seeded mutation — manifests of wrong types, shapes,
// overlaps, holes and huge numbers; chunks whose bytes do not match their
// SHA-256, or match it and hold truncated or garbage zstd or the wrong rows;
// greetings with another stream_id or bad fields; frames of garbage, rows
// that are not JSON, offsets backwards, duplicated, jumping or not decimal;
// sockets closed after the greeting or after N frames, with lying 4416
// reasons; HTTP 500s and slow answers. A real mirror process
// (`cli.ts serve --follow`) runs against it. Then: the process is alive and
// its /trades/head answers; every row it serves (read back from the start
// with a subscriber) is a row the fake served validly, byte for byte, at
// its offset; its log names what it refused; `verify` passes on its folder
// after it stops. Seeded (tests/harness/seeds.ts): a case's seed picks
// every mutation in turn (the order requests come in is the mirror's).
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { freePort, rmrf, tempDir, until } from "../../harness/util.ts";
import { CLI, getJson, type ServeProc, startServe } from "../../harness/serve.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { SCHEMA } from "../../harness/mirror_tree.ts";
import { compress, mergeChunkFiles, sha256Hex } from "../../../log/chunk/chunk.ts";
import {
  caseName,
  caseRng,
  FRESH_SEED,
  type FuzzCase,
  planCases,
  REGRESSION_CASES,
  REGRESSION_SEEDS,
  REPLAY,
  replayHint,
  seedBanner,
} from "../../harness/seeds.ts";

const SUITE = "follower_inputs";
/** Mirror processes a run starts (each its own case), run side by side. */
const PROCESSES = 3;
/** How long each mirror is fed lies. */
const FUZZ_MS = 6_000;

const SID = "5f1e7d0c9b8a79685746352413021100";
const OTHER_SID = "00112233445566778899aabbccddeeff";
const enc = new TextEncoder();

/** The row at offset `o`: every valid answer of the fake serves exactly this. */
function truth(o: number): string {
  return JSON.stringify({ i: o, sym: o % 3 === 0 ? "ETH" : "BTC", px: o + 0.5 });
}
const line = (o: number) => `[${o},${truth(o)}]`;

/** The fake's sealed history: one valid chunk of rows 1..CHUNK_LAST. */
const CHUNK_LAST = 20;
function chunkOf(
  first: number,
  last: number,
): { bytes: Uint8Array; entry: Record<string, unknown> } {
  let text = "";
  for (let o = first; o <= last; o++) text += line(o) + "\n";
  const bytes = compress(enc.encode(text));
  return {
    bytes,
    entry: {
      first,
      last,
      rows: last - first + 1,
      bytes: bytes.length,
      sha256: sha256Hex(bytes),
      first_ts: 1_700_000_000_000_000 + first,
      last_ts: 1_700_000_000_000_000 + last,
    },
  };
}

type Rng = () => number;
const pick = <T>(r: Rng, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rng, n: number) => Math.floor(r() * n);
/** The kinds of `xs` in turn from a seeded start: a case visits every one within `xs.length` turns. */
function cycle<T>(r: Rng, xs: readonly T[]): () => T {
  let k = int(r, xs.length);
  return () => xs[k++ % xs.length];
}

interface Served {
  /** Offsets served validly (tail frames well-formed, chunks whole and true). */
  valid: Set<number>;
  /** The mutations used, by kind. */
  used: Set<string>;
}

/** A fake primary whose answers are drawn from the case's generators. */
function fakePrimary(c: FuzzCase, served: Served) {
  const rTail = caseRng(c, 0x7a11);
  const rHttp = caseRng(c, 0x4477);
  const rChunk = caseRng(c, 0xc4c4);
  let honest = true; // until the mirror has started, and again at the end
  let end = 41; // the primary's end offset (rows 1..40); grows
  let stopped = false; // another stream_id was shown (the mirror then stops for good)
  const good = chunkOf(1, CHUNK_LAST);
  const lies = new Map<string, Uint8Array>(); // chunks a lying manifest names, by sha
  const sockets = new Set<WebSocket>();
  const ac = new AbortController();
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const later = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        timers.delete(t);
        resolve();
      }, ms);
      timers.add(t);
    });
  const json = (v: unknown, status = 200) =>
    new Response(typeof v === "string" ? v : JSON.stringify(v), {
      status,
      headers: { "content-type": "application/json" },
    });
  const headBody = (sid = SID) => ({
    stream: "trades",
    stream_id: sid,
    durable: true,
    end_offset: end,
    first_offset: 1,
    earliest: 1,
    schema: SCHEMA,
  });
  let generation = 1;
  // A lie is a new generation (a mirror looks again only at a new one).
  const manifest = (chunks: unknown[], extra: Record<string, unknown> = {}) => ({
    stream: "trades",
    stream_id: SID,
    generation: honest ? 1 : ++generation,
    through: CHUNK_LAST,
    chunks,
    retired: [],
    ...extra,
  });
  const turns = new Map<string, () => unknown>();
  const turn = <T>(key: string, r: Rng, xs: readonly T[]): T => {
    let f = turns.get(key);
    if (!f) turns.set(key, f = cycle(r, xs));
    return f() as T;
  };
  const chunkKind = cycle(
    rChunk,
    [
      "sha_mismatch",
      "truncated_zstd",
      "garbage",
      "wrong_rows",
      "not_json_rows",
      "rows_count",
      "size_mismatch",
    ] as const,
  );
  // A lying manifest entry with chunk bytes of its own (the SHA-256 of them).
  const lyingChunk = (): Record<string, unknown> => {
    const kind = chunkKind();
    served.used.add(`chunk:${kind}`);
    let { bytes, entry } = chunkOf(1, CHUNK_LAST);
    entry = { ...entry };
    switch (kind) {
      case "sha_mismatch":
        bytes = bytes.slice();
        bytes[int(rChunk, bytes.length)] ^= 1 + int(rChunk, 255);
        lies.set(entry.sha256 as string, bytes);
        return entry;
      case "truncated_zstd":
        bytes = bytes.slice(0, 1 + int(rChunk, bytes.length - 1));
        break;
      case "garbage":
        bytes = crypto.getRandomValues(new Uint8Array(1 + int(rChunk, 200)));
        break;
      case "wrong_rows": {
        // Rows of other offsets than the entry says.
        const shift = 1 + int(rChunk, 5);
        let text = "";
        for (let o = 1; o <= CHUNK_LAST; o++) text += `[${o + shift},${truth(o + shift)}]\n`;
        bytes = compress(enc.encode(text));
        break;
      }
      case "not_json_rows": {
        let text = "";
        for (let o = 1; o <= CHUNK_LAST; o++) {
          text += o === 1 + int(rChunk, CHUNK_LAST) ? `[${o},{"i":${o},]\n` : line(o) + "\n";
        }
        bytes = compress(enc.encode(text));
        break;
      }
      case "rows_count": {
        let text = "";
        for (let o = 1; o < CHUNK_LAST; o++) text += line(o) + "\n";
        bytes = compress(enc.encode(text));
        break;
      }
      case "size_mismatch":
        lies.set(entry.sha256 as string, new Uint8Array([...bytes, 0]));
        return entry;
    }
    entry.bytes = bytes.length;
    entry.sha256 = sha256Hex(bytes);
    lies.set(entry.sha256 as string, bytes);
    return entry;
  };
  const badManifest = (): Response | string | unknown[] | Record<string, unknown> => {
    const kind = turn("manifest", rHttp, [
      "500",
      "not_json",
      "null",
      "array",
      "chunks_not_array",
      "entry_types",
      "overlap",
      "hole",
      "huge",
      "negative",
      "bad_sha",
      "generation",
      "lying_chunk",
      "lying_chunk",
      "lying_chunk",
    ]);
    served.used.add(`manifest:${kind}`);
    const e = good.entry;
    switch (kind) {
      case "500":
        return json({ error: "internal" }, 500);
      case "not_json":
        return '{"stream":';
      case "null":
        return "null";
      case "array":
        return [e];
      case "chunks_not_array":
        return manifest({ 0: e } as unknown as unknown[]);
      case "entry_types":
        return manifest([{ ...e, first: "1", rows: null }]);
      case "overlap":
        return manifest([e, { ...chunkOf(10, 25).entry }], { through: 25 });
      case "hole": {
        // Valid shape, a hole: only the chunk is served, so it is a lie only
        // in what it leaves out (the rows of the second are true).
        const second = chunkOf(25, 30);
        lies.set(second.entry.sha256 as string, second.bytes);
        return manifest([e, second.entry], { through: 30 });
      }
      case "huge":
        return manifest([{ ...e, last: 2 ** 60, rows: 2 ** 60, bytes: 1e300 }], {
          through: 2 ** 60,
        });
      case "negative":
        return manifest([{ ...e, first: -5 }]);
      case "bad_sha":
        return manifest([{ ...e, sha256: "../../etc/passwd" }]);
      case "generation":
        return manifest([e], { generation: "x", through: null });
      default:
        return manifest([lyingChunk()]);
    }
  };

  // One subscription: a greeting (maybe a lie), valid frames, then one lie or a close.
  const tail = (ws: WebSocket, from: number) => {
    const send = (d: string | Uint8Array) => {
      try {
        ws.send(d as string);
      } catch {
        // closed by the mirror
      }
    };
    const close = (code?: number, reason?: string) => {
      try {
        ws.close(code, reason);
      } catch {
        // closed already
      }
    };
    const greeting = {
      streamcast: 2,
      stream: "trades",
      stream_id: SID,
      end_offset: end,
      replay: from < end ? [from, end] : null,
      log: null,
      durable: true,
      schema: SCHEMA,
      frames: "batch",
      where: null,
      since: null,
    };
    if (honest) {
      send(JSON.stringify(greeting));
      if (!Number.isSafeInteger(from) || from < 1) return;
      let frames = "";
      for (let o = from; o < end; o++) frames += (frames ? "\n" : "") + line(o);
      for (let o = from; o < end; o++) served.valid.add(o);
      if (frames) send(frames);
      return;
    }
    const g = turn("greeting", rTail, [
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "not_json",
      "null",
      "array",
      "number",
      "binary",
      "end_offset",
      "schema",
      "close_after",
      ...(c.index % PROCESSES === 2 ? ["other_stream"] : []),
    ]);
    served.used.add(`greeting:${g}`);
    switch (g) {
      case "not_json":
        return send("{streamcast:2");
      case "null":
        return send("null");
      case "array":
        return send("[1,2]");
      case "number":
        return send("42");
      case "binary":
        return send(enc.encode(JSON.stringify(greeting)));
      case "end_offset":
        send(
          JSON.stringify({ ...greeting, end_offset: pick(rTail, ["x", -1, 1.5, 2 ** 70, null]) }),
        );
        break;
      case "schema":
        send(JSON.stringify({ ...greeting, schema: { type: "object", properties: {} } }));
        break;
      case "other_stream":
        stopped = true;
        return send(JSON.stringify({ ...greeting, stream_id: OTHER_SID }));
      case "close_after":
        send(JSON.stringify(greeting));
        return close(pick(rTail, [1000, 1001, 1011, 4000]));
      default:
        send(JSON.stringify(greeting));
    }
    // Valid frames, growing the primary's end as a live one would.
    if (!Number.isSafeInteger(from) || from < 1 || from > 2 ** 40) {
      served.used.add(`bad_from:${from}`);
      return close(1011);
    }
    let at = from;
    const frames = int(rTail, 4);
    for (let k = 0; k < frames; k++) {
      const n = 1 + int(rTail, 5);
      const ls: string[] = [];
      for (let j = 0; j < n; j++, at++) ls.push(line(at));
      // Only counted as served validly if nothing of its socket is refused
      // later would still count: the rows are true and well formed.
      for (let o = at - n; o < at; o++) served.valid.add(o);
      send(ls.join("\n"));
    }
    end = Math.max(end, at);
    const lie = turn("frame", rTail, [
      "garbage",
      "not_json_row",
      "not_object_row",
      "backwards",
      "duplicate",
      "jump",
      "offset_text",
      "huge_offset",
      "binary",
      "empty",
      "missing_bracket",
      "close",
      "close_4416",
      "close_4416",
      "close_bad_reason",
    ]);
    served.used.add(`frame:${lie}`);
    switch (lie) {
      case "garbage":
        return send(pick(rTail, ["hello", "[", "]", "[,]", "{}", "\u0000\u0001", "[1 {}]"]));
      case "not_json_row":
        return send(
          `${line(at)}\n[${at + 1},${pick(rTail, ["{bad", '{"i":1', "NaN", "'x'", "{}}"])}]`,
        );
      case "not_object_row":
        return send(`[${at},${pick(rTail, ["42", '"s"', "null", "[1]", "true"])}]`);
      case "backwards":
        return send(`${line(at + 1)}\n${line(at)}`);
      case "duplicate":
        return send(`${line(at)}\n${line(at)}`);
      case "jump": {
        // A gap is valid (the primary fenced one): the rows after it are true.
        const to = at + 1 + int(rTail, 30);
        served.valid.add(to);
        end = Math.max(end, to + 1);
        return send(line(to));
      }
      case "offset_text": {
        const t = pick(rTail, ["1e1", "01", "+5", "5.0", " 5", "0x10", "-3", "0", "Infinity"]);
        return send(`[${t},${truth(Number(t) || 1)}]`);
      }
      case "huge_offset":
        return send(
          `[${pick(rTail, ["9007199254740993", "1e400", "99999999999999999999999"])},${truth(1)}]`,
        );
      case "binary":
        return send(enc.encode(line(at)));
      case "empty":
        return send("");
      case "missing_bracket":
        return send(`[${at},${truth(at)}`);
      case "close":
        return close(pick(rTail, [1000, 1006 - 5, 1011, 4500]));
      case "close_4416": {
        const earliest = pick(rTail, [2 ** 60, 1.5, -4, "9", 2 ** 53 + 2, null, 1e300]);
        served.used.add(`close_4416:${String(earliest)}`);
        return close(
          4416,
          JSON.stringify({
            error: "offset",
            why: pick(rTail, ["evicted", "empty", "too_old"]),
            earliest,
          }),
        );
      }
      case "close_bad_reason":
        return close(4416, pick(rTail, ["{", "null", "[]", '{"why":7}']));
    }
  };

  const server = Deno.serve(
    { hostname: "127.0.0.1", port: freePort(), signal: ac.signal, onListen() {} },
    async (req) => {
      const u = new URL(req.url);
      const p = u.pathname;
      if (p === "/trades" && req.headers.get("upgrade") === "websocket") {
        const { socket, response } = Deno.upgradeWebSocket(req);
        sockets.add(socket);
        const from = Number(u.searchParams.get("offset") ?? "1");
        socket.onopen = () => tail(socket, from);
        socket.onclose = () => sockets.delete(socket);
        socket.onerror = () => {};
        return response;
      }
      const http = !honest
        ? turn(p, rHttp, ["ok", "ok", "ok", "ok", "500", "slow", "lie", "hang"])
        : "ok";
      if (http === "slow") await later(200 + int(rHttp, 800));
      if (http === "hang") {
        // Past the mirror's --follow-timeout (1 s): it gives up and retries.
        served.used.add(`http_hang:${p.split("/")[2]}`);
        await later(2_500);
      }
      if (p === "/trades/head") {
        if (http === "500") return json({ error: "internal" }, 500);
        if (http === "lie") {
          served.used.add("head:lie");
          return json(pick(rHttp, ["null", "[]", "{", { ...headBody(), end_offset: "x" }, {
            ...headBody(),
            end_offset: 2 ** 60,
            lag_rows: -1,
          }]));
        }
        return json(headBody(stopped ? OTHER_SID : SID));
      }
      if (p === "/trades/manifest") {
        if (http === "500") return json({ error: "internal" }, 500);
        if (http === "lie") {
          const m = badManifest();
          return m instanceof Response ? m : json(m);
        }
        return json(manifest([good.entry]));
      }
      const m = /^\/trades\/chunks\/([0-9a-f]{64})(\.times)?$/.exec(p);
      if (m) {
        if (m[2]) return new Response("not found", { status: 404 });
        if (http === "500") return new Response("oops", { status: 500 });
        const bytes = m[1] === good.entry.sha256 ? good.bytes : lies.get(m[1]);
        if (!bytes) return new Response("not found", { status: 404 });
        if (m[1] === good.entry.sha256) {
          for (let o = 1; o <= CHUNK_LAST; o++) served.valid.add(o);
        } else if (m[1] === chunkOf(25, 30).entry.sha256) {
          for (let o = 25; o <= 30; o++) served.valid.add(o);
        }
        return new Response(bytes as Uint8Array<ArrayBuffer>);
      }
      return new Response("not found", { status: 404 });
    },
  );
  return {
    url: `ws://127.0.0.1:${server.addr.port}`,
    // Each turn closes the open subscriptions: the mirror comes back to the new behaviour.
    lie() {
      honest = false;
      for (const s of sockets) s.close(1001);
    },
    honest() {
      honest = true;
      for (const s of sockets) s.close(1001);
    },
    get stopped() {
      return stopped;
    },
    async stop() {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) {
        try {
          s.close();
        } catch {
          // closing
        }
      }
      ac.abort();
      await server.finished;
    },
  };
}

/** Every `[offset,msg]` line the mirror serves from its start, until it goes quiet. */
async function readBack(p: ServeProc, h: Record<string, unknown>): Promise<string[]> {
  if (h.end_offset === h.first_offset || h.end_offset === 1) return [];
  const from = Number(h.earliest ?? h.first_offset ?? 1);
  const sub = await TestSub.open(`${p.ws}/trades?offset=${from}&frames=batch`);
  try {
    let seen = -1;
    let quietSince = Date.now();
    await until(
      () => {
        if (sub.closed !== null) return true;
        if (sub.lines.length !== seen) {
          seen = sub.lines.length;
          quietSince = Date.now();
        }
        return Date.now() - quietSince > 600;
      },
      20_000,
      "the mirror's rows",
    );
    if (sub.closed) throw new Error(`read back closed: ${JSON.stringify(sub.closed)}`);
    return sub.lines;
  } finally {
    await sub.close();
  }
}

async function runCase(c: FuzzCase): Promise<void> {
  const name = caseName(c);
  const root = await tempDir();
  const served: Served = { valid: new Set(), used: new Set() };
  const fake = fakePrimary(c, served);
  let f: ServeProc | null = null;
  try {
    f = await startServe([
      "--root",
      root,
      "--port",
      String(freePort()),
      "--follow",
      `trades=${fake.url}/trades`,
      "--follow-poll",
      "0.1",
      "--follow-retry-max",
      "0.2",
      "--follow-timeout",
      "1",
      "--log-format",
      "json",
    ]);
    const proc = f;
    await until(
      async () =>
        ((await getJson(`${proc.url}/trades/head`).catch(() => ({}))) as Record<string, unknown>)
          .end_offset === 41,
      20_000,
      `${name}: the mirror caught up with the honest start`,
    );
    fake.lie();
    const t0 = Date.now();
    while (Date.now() - t0 < FUZZ_MS) {
      await new Promise((r) => setTimeout(r, 250));
      const h = await getJson(`${proc.url}/trades/head`).catch((err) => {
        throw new Error(
          `${name}: /trades/head failed while fed lies: ${err}\n${proc.stderr().slice(-3000)}`,
        );
      });
      assert(typeof h.end_offset === "number", `${name}: head ${JSON.stringify(h)}`);
    }
    fake.honest();
    await new Promise((r) => setTimeout(r, 600));
    const h = await getJson(`${proc.url}/trades/head`);
    assert(
      Number.isSafeInteger(h.end_offset) && ![...served.used].some((u) => u.startsWith("bad_from")),
      `${name}: the mirror's end is an offset: ${h.end_offset}`,
    );
    const lines = await readBack(proc, h);
    let prev = 0;
    for (const l of lines) {
      const comma = l.indexOf(",");
      const o = Number(l.slice(1, comma));
      assert(o > prev, `${name}: offsets increase: ${o} after ${prev}`);
      prev = o;
      assertEquals(l, line(o), `${name}: row ${o} is the one served`);
      assert(served.valid.has(o), `${name}: row ${o} was never served validly`);
    }
    // Its log names what it refused (one kind at least, when a lie was told).
    const err = proc.stderr();
    assert(!/Uncaught|panicked/.test(err), `${name}: ${err.slice(-3000)}`);
    if (served.used.size > 0) {
      assert(
        /"follow_disconnected"|"follow_chunk_refused"|"follow_stopped"|"follow_history_failed"/
          .test(err),
        `${name}: no refusal logged:\n${err.slice(-2000)}`,
      );
    }
    const status = await proc.signal("SIGTERM");
    assert(
      status.success || status.code === 0 || status.signal === "SIGTERM",
      `${name}: exit ${JSON.stringify(status)}`,
    );
    const v = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "verify", join(root, "trades")],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(v.stdout) + new TextDecoder().decode(v.stderr);
    assertEquals(
      v.code,
      0,
      `${name}: verify on the mirror's folder:\n${out}`,
    );
    console.log(
      `${name}: ${lines.length} rows read back; lies told: ${[...served.used].sort().join(" ")}`,
    );
  } catch (err) {
    throw new Error(
      `${(err as Error).message}\nused: ${[...served.used].join(" ")}\nstderr: ${
        f?.stderr().slice(-4000)
      }`,
    );
  } finally {
    await f?.stop();
    await fake.stop();
    await rmrf(root);
  }
}

Deno.test("mirror fuzz: a lying primary never crashes a mirror, nothing it did not serve validly is stored, verify passes", async () => {
  console.log(seedBanner(SUITE));
  // A fresh case per process, one of them a regression seed's, in turn by run.
  const cases: FuzzCase[] = REPLAY ? planCases(PROCESSES, SUITE, FRESH_SEED, true) : [
    ...Array.from({ length: PROCESSES - 1 }, (_, i) => ({ seed: FRESH_SEED, index: i })),
    { seed: REGRESSION_SEEDS[FRESH_SEED % REGRESSION_SEEDS.length], index: PROCESSES - 1 },
  ];
  for (const c of REGRESSION_CASES[SUITE] ?? []) cases.push(c);
  const results = await Promise.allSettled(cases.map((c) => runCase(c)));
  const failed = results.flatMap((r, i) =>
    r.status === "rejected" ? [`${caseName(cases[i])}: ${(r.reason as Error).message}`] : []
  );
  assert(
    failed.length === 0,
    `${failed.length} failed:\n${failed.join("\n\n")}\n${replayHint(cases)}`,
  );
});

Deno.test("mirror fuzz: a chunk whose SHA-256 matches its entry but whose bytes are not its rows is refused and not kept", async () => {
  const { storeAdoptedChunk, ChunkDigestError } = await import("../../../log/chunk/adoption.ts");
  const c: FuzzCase = { seed: FRESH_SEED, index: 0 };
  const r = caseRng(c, 0xadad);
  console.log(`${seedBanner(SUITE)} (chunks)`);
  const dir = await tempDir();
  try {
    const text = (from: number, to: number, bad = -1) => {
      let t = "";
      for (let o = from; o <= to; o++) t += o === bad ? `[${o},{"i":${o},]\n` : line(o) + "\n";
      return t;
    };
    const good = compress(enc.encode(text(1, 20)));
    const kinds: [string, Uint8Array][] = [
      ["truncated zstd", good.slice(0, 1 + int(r, good.length - 2))],
      // A frame cut before its 4-byte checksum decodes to every row (Deno's
      // zstd takes it); a fresh seed once drew such a cut (CI, 2026-12-01).
      ["cut before its checksum", good.slice(0, good.length - 4)],
      ["a frame and a torn second frame", new Uint8Array([...good, ...good.slice(0, 9)])],
      [
        "two frames of rows (a chunk's rows are one frame)",
        new Uint8Array([
          ...compress(enc.encode(text(1, 10))),
          ...compress(enc.encode(text(11, 20))),
        ]),
      ],
      ["garbage", crypto.getRandomValues(new Uint8Array(1 + int(r, 300)))],
      ["other offsets", compress(enc.encode(text(2 + int(r, 5), 21 + int(r, 5))))],
      ["a row that is not JSON", compress(enc.encode(text(1, 20, 1 + int(r, 20))))],
      ["a row fewer", compress(enc.encode(text(1, 19)))],
      ["not lines", compress(enc.encode("hello\nworld\n"))],
      ["no last newline", compress(enc.encode(text(1, 20).slice(0, -1)))],
    ];
    for (const [what, bytes] of kinds) {
      const entry = {
        first: 1,
        last: 20,
        rows: 20,
        bytes: bytes.length,
        sha256: sha256Hex(bytes),
        first_ts: 1,
        last_ts: 2,
      };
      const err = await storeAdoptedChunk(dir, entry, bytes, null).then(() => null, (e) => e);
      assert(err instanceof ChunkDigestError, `${what}: ${err}`);
      const kept = await Array.fromAsync(Deno.readDir(join(dir, "chunks"))).catch(() => []);
      assertEquals(kept.length, 0, `${what}: nothing kept`);
    }
    const entry = {
      first: 1,
      last: 20,
      rows: 20,
      bytes: good.length,
      sha256: sha256Hex(good),
      first_ts: 1,
      last_ts: 2,
    };
    await storeAdoptedChunk(dir, entry, good, null);
    // A merge's streaming compressor ends its frame with an empty one: that
    // chunk is adopted (a shape check that took one frame only refused it).
    const merged = join(dir, "merged.zst");
    const sources = [join(dir, "a.zst"), join(dir, "b.zst")];
    await Deno.writeFile(sources[0], compress(enc.encode(text(1, 10))));
    await Deno.writeFile(sources[1], compress(enc.encode(text(11, 20))));
    const m = await mergeChunkFiles(sources, merged);
    const mergedBytes = await Deno.readFile(merged);
    await storeAdoptedChunk(dir, { ...entry, bytes: m.bytes, sha256: m.sha256 }, mergedBytes, null);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("mirror fuzz: a history request to a primary that never answers fails after the timeout", async () => {
  const { httpSource } = await import("../../../server/mirror/_fetch_history.ts");
  const ac = new AbortController();
  const release = Promise.withResolvers<void>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    async () => {
      await release.promise;
      return new Response("{}");
    },
  );
  try {
    const src = httpSource(`http://127.0.0.1:${server.addr.port}/trades`, {
      signal: ac.signal,
      idleMs: 300,
      maxManifestBytes: 1 << 20,
    });
    const t0 = performance.now();
    const err = await src.manifest().then(() => null, (e) => e);
    const ms = performance.now() - t0;
    assert(err instanceof Error, `the hang is an error: ${err}`);
    assert(ms < 2_000, `bounded by the timeout: ${ms} ms`);
  } finally {
    release.resolve();
    ac.abort();
    await server.finished;
  }
});
