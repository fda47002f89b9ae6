// Fuzzing the server from the network (docs/SPEC.md §2): random upgrade paths
// and query strings, and random client frames after a valid subscribe, sent
// over raw TCP to a real `cli.ts serve` process that is ingesting rows, while
// two well-behaved subscribers read on. Seeded (see tests/harness/seeds.ts): a fresh seed
// every run plus the regression seeds; STREAMCAST_FUZZ_SEED=N replays seed N.
//
// Expected endings, from the spec (path first: 4404; then the query: 4400;
// then the offset: 4416; a client data frame of any kind or size: 1008) and,
// for what the runtime handles before streamcast sees it, what Deno 2.9 does
// (measured here, written down so a change in the runtime shows up):
//
// | client sends                                   | Deno 2.9 ends the connection with |
// |------------------------------------------------|-----------------------------------|
// | text, binary, fragmented data, unmasked data   | 1008 from streamcast (Deno accepts unmasked client frames) |
// | invalid UTF-8 in a text frame                  | TCP close, no close frame (no 1007) |
// | reserved opcode, RSV bit, continuation first   | TCP close, no close frame (no 1002) |
// | control frame > 125 bytes or fragmented        | TCP close, no close frame         |
// | frame or message over 64 MiB (declared)        | TCP close, no close frame (no 1009) |
// | close 1000-1003, 1007-1013, 3000-4999          | the same code echoed              |
// | close 1004-1006, 1014-2999, ≥ 5000             | close 1002                        |
// | close with a 1-byte or non-UTF-8 payload       | TCP close, no close frame         |
// | pings (any number), unsolicited pongs          | pongs; the subscription goes on   |
// | request target with a space or control byte    | HTTP 400 (hyper)                  |
// | URL over 8192 bytes                            | HTTP 414 (streamcast); ≳64 KiB: 400 (hyper) |
import { assert, assertEquals } from "../../harness/assert.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { isStreamName } from "../../../wire/stream_name.ts";
import {
  closePayload,
  concat,
  type Ending,
  frame,
  RawConn,
  upgradeRequest,
} from "../../harness/soak/raw_frames.ts";
import {
  fdCount,
  NAME,
  portOf,
  rowText,
  serveChild,
  sleep,
  workspace,
} from "../../harness/soak/workload.ts";

import { caseName, caseRng, fuzzCases, replayHint, seedBanner } from "../../harness/seeds.ts";
import { parseSince } from "../../../wire/since.ts";

console.log(seedBanner("server fuzz"));
const enc = new TextEncoder();

type Expect =
  | { kind: "greeting" }
  | { kind: "close"; codes: number[] }
  | { kind: "http"; statuses: number[] };

const HUGE_OFFSET = 10 ** 13; // above anything this test writes, below 2^53

/** What the spec says an upgrade to `target` gets (offsets are 0, 1 or HUGE_OFFSET). */
function oracle(target: string, streamId: string): Expect {
  // A space or control byte cannot be in an HTTP request target.
  if ([...target].some((ch) => ch.charCodeAt(0) <= 0x20 || ch.charCodeAt(0) === 0x7f)) {
    return { kind: "http", statuses: [400] };
  }
  const full = `http://127.0.0.1:65535${target}`;
  if (full.length > 8192) return { kind: "http", statuses: [414, 400, 431] };
  const url = new URL(full);
  let path: string;
  try {
    path = decodeURIComponent(url.pathname);
  } catch {
    return { kind: "close", codes: [4400] };
  }
  const parts = path.slice(1).split("/");
  const name = path === "/" || parts[0] === "_" ? "" : parts[0];
  const rest = path === "/" ? "" : parts.slice(1).join("/");
  if (rest !== "") return { kind: "close", codes: [4400] };
  if (name !== NAME) {
    // No such stream. A name no stream could have may also be "does not parse".
    return { kind: "close", codes: isStreamName(name) ? [4404] : [4404, 4400] };
  }
  const seen = new Set<string>();
  for (const k of url.searchParams.keys()) {
    if (!["offset", "stream_id", "frames"].includes(k) || seen.has(k)) {
      return { kind: "close", codes: [4400] };
    }
    seen.add(k);
  }
  const offset = url.searchParams.get("offset");
  let n: number | null = null;
  if (offset !== null && offset !== "earliest") {
    if (!/^\d{1,16}$/.test(offset) || Number(offset) > Number.MAX_SAFE_INTEGER) {
      return { kind: "close", codes: [4400] };
    }
    n = Number(offset);
  }
  const id = url.searchParams.get("stream_id");
  if (id !== null && !/^[0-9a-f]{32}$/.test(id)) return { kind: "close", codes: [4400] };
  const frames = url.searchParams.get("frames");
  if (frames !== null && !["single", "batch", "arrow"].includes(frames)) {
    return { kind: "close", codes: [4400] };
  }
  if (id !== null && id !== streamId) return { kind: "close", codes: [4416] };
  if (n !== null && n >= HUGE_OFFSET) return { kind: "close", codes: [4416] };
  return { kind: "greeting" };
}

function pick<T>(rand: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rand() * xs.length)];
}

function randomName(rand: () => number, alphabet: string, min: number, max: number): string {
  const n = min + Math.floor(rand() * (max - min + 1));
  let s = "";
  for (let i = 0; i < n; i++) s += alphabet[Math.floor(rand() * alphabet.length)];
  return s;
}

const NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
const UNICODE = ["é", "ß", "日本", "🙂", "\u200b", "Ω", "ñ", "\ufeff"];

function randomPath(rand: () => number): string {
  switch (Math.floor(rand() * 14)) {
    case 0:
    case 1:
    case 2:
      return `/${NAME}`;
    case 3:
      return pick(rand, [`/${NAME}/`, `/%72el`, `/./${NAME}`, `/x/../${NAME}`, `/_/../${NAME}`]);
    case 4:
      return `/${randomName(rand, NAME_CHARS, 1, 64)}`;
    case 5:
      return `/${encodeURIComponent(randomName(rand, NAME_CHARS, 0, 4) + pick(rand, UNICODE))}`;
    case 6:
      return `/${pick(rand, UNICODE)}${NAME}`; // raw UTF-8 bytes on the request line
    case 7:
      return `/${randomName(rand, NAME_CHARS, 65, 12000)}`;
    case 8:
      return pick(rand, ["/", "/_", "/_/", "//", `//${NAME}`]);
    case 9:
      return pick(rand, ["/%", "/%zz", "/%E0%A4%A", "/%C3%28", "/%FF", `/${NAME}%`]);
    case 10:
      return pick(rand, [
        `/${NAME}/x`,
        `/${NAME}/head`,
        `/${NAME}/chunks/00`,
        "/_/x",
        `/${NAME}%2Fx`,
      ]);
    case 11:
      return `/${NAME}${pick(rand, [" ", "\t", "\x01", "\x7f"])}x`; // bytes HTTP does not allow
    case 12:
      return `/${encodeURIComponent(pick(rand, ["..", ".", "_", ".hidden", "a b", "a/b"]))}`;
    default:
      return `/${randomName(rand, "%abc/é", 1, 12)}`;
  }
}

function randomValue(rand: () => number, key: string, streamId: string): string {
  if (key === "offset") {
    return pick(rand, [
      "0",
      "1",
      "0001",
      "earliest",
      String(HUGE_OFFSET),
      "9007199254740991",
      "9007199254740992",
      "99999999999999999999",
      "-1",
      "1.5",
      "1e3",
      "",
      " 1",
      "+1",
      "0x10",
      "١",
      "earliest ",
      "EARLIEST",
      "%31",
      "NaN",
      "Infinity",
    ]);
  }
  if (key === "frames") {
    return pick(rand, [
      "single",
      "batch",
      "arrow",
      "BATCH",
      "",
      "batch,single",
      "arrow2",
      "%62atch",
    ]);
  }
  if (key === "stream_id") {
    return pick(rand, [
      streamId,
      streamId.toUpperCase(),
      "0".repeat(32),
      streamId.slice(1),
      streamId + "0",
      "x".repeat(32),
      "",
    ]);
  }
  return randomName(rand, "abc123%+&=é", 0, 8);
}

function randomQuery(rand: () => number, streamId: string): string {
  const r = rand();
  if (r < 0.15) return "";
  if (r < 0.2) {
    return pick(rand, ["?", "?&", "?=", "?&&offset=1", "?offset", "?offset=earliest&offset=1"]);
  }
  const pairs: string[] = [];
  const n = 1 + Math.floor(rand() * 3);
  for (let i = 0; i < n; i++) {
    const key = rand() < 0.85 ? pick(rand, ["offset", "frames", "stream_id"]) : pick(rand, [
      "ofset",
      "Offset",
      "token",
      "",
      "offset[]",
      "%6ffset",
      randomName(rand, "abcxyz", 1, 6),
    ]);
    pairs.push(`${key}=${randomValue(rand, key, streamId)}`);
  }
  if (rand() < 0.05) pairs.push(`x=${"9".repeat(3000)}`);
  return "?" + pairs.join("&");
}

// --- since= case family (docs/SPEC.md §8.3): hostile times never crash the server;
// each is a 4400 or an accepted subscribe (4416 other_stream for a foreign
// stream id), and /at answers 200 or 400 with JSON, never 500. ---

const SINCE_VALUES = [
  "0",
  "1",
  "1796117400000001",
  "9007199254740991",
  "9007199254740992",
  "99999999999999999999",
  "9".repeat(400),
  "-1",
  "1.5",
  "1e6",
  "0x10",
  "%201",
  "+1",
  "",
  "now",
  "NaN",
  "١٢٣",
  "１２３",
  "2026-12-01T09:30:00Z",
  "2026-12-01t09:30:00.123456789z",
  "2026-12-01T09:30:00.1234567890123Z",
  "2026-12-01T10:30:00%2B01:00",
  "2026-12-01T10:30:00+01:00", // the + is a space in a query
  "2026-12-01T09%3A30%3A00Z",
  "2016-12-31T23:59:60Z", // a leap second
  "2016-12-31T23:59:61Z",
  "2026-02-29T00:00:00Z",
  "2024-02-29T00:00:00Z",
  "2026-13-01T00:00:00Z",
  "2026-12-01T24:00:00Z",
  "2026-12-01T09:30:00+24:00",
  "2026-12-01T09:30:00",
  "2026-12-01",
  "0000-01-01T00:00:00Z",
  "1969-12-31T23:59:59Z",
  "1970-01-01T00:00:00Z",
  "2255-06-05T23:47:34.740991Z",
  "2255-06-05T23:47:34.740992Z",
  "9999-12-31T23:59:59.999999Z",
  "２０２６-12-01T09:30:00Z",
  "%",
  "%FF",
  "%00",
];

/** A subscribe target with a hostile `since`, and what it must get. */
function randomSinceCase(rand: () => number, streamId: string): { target: string; want: Expect } {
  const value = rand() < 0.15
    ? String(Math.floor(rand() * 2 ** 53))
    : rand() < 0.1
    ? randomName(rand, "0123456789-:TZ.+é", 1, 30)
    : pick(rand, SINCE_VALUES);
  const extra = pick(rand, ["", "", "", "&offset=1", "&frames=batch", `&stream_id=${streamId}`]) +
    (rand() < 0.1 ? `&stream_id=${"0".repeat(32)}` : "");
  const target = `/${NAME}?since=${value}${extra}`;
  let want: Expect;
  try {
    const params = new URL(`http://x${target}`).searchParams;
    parseSince(params.get("since")!);
    const ids = params.getAll("stream_id");
    want = params.has("offset") || ids.length > 1
      ? { kind: "close", codes: [4400] }
      : ids.length === 1 && ids[0] !== streamId
      ? { kind: "close", codes: [4416] }
      : { kind: "greeting" };
  } catch {
    want = { kind: "close", codes: [4400] };
  }
  return { target, want };
}

/** `/at` with the same hostile value: 200 with {offset, ts}, or 400 with a JSON error. */
async function atCase(base: string, target: string): Promise<string | null> {
  const value = target.slice(target.indexOf("since=") + 6).split("&")[0];
  // No pooled keep-alive connection: the fd count after the fuzz must not see one.
  const client = Deno.createHttpClient({ poolMaxIdlePerHost: 0 });
  let res: Response;
  try {
    res = await fetch(`${base}/${NAME}/at?since=${value}`, { client });
  } finally {
    client.close();
  }
  const text = await res.text();
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text);
  } catch {
    return `/at?since=${value.slice(0, 40)}: ${res.status}, not JSON: ${text.slice(0, 80)}`;
  }
  let ok = false;
  try {
    parseSince(new URLSearchParams(`since=${value}`).get("since")!);
    ok = true;
  } catch {
    // a bad time: 400
  }
  if (ok && res.status === 200 && Number.isSafeInteger(body.offset)) return null;
  if (!ok && res.status === 400 && body.error === "bad_request") return null;
  return `/at?since=${value.slice(0, 40)}: ${res.status} ${text.slice(0, 80)}`;
}

// --- end of the since= case family ---

/** Runs one upgrade and reports how it ended. */
async function upgradeCase(
  port: number,
  target: string,
): Promise<Expect | { kind: "odd"; what: string }> {
  const c = await RawConn.open(port);
  try {
    // Raw bytes as given (a unicode path goes on the wire as UTF-8).
    await c.write(enc.encode(upgradeRequest(port, target)));
    const answer = await c.readHead(10_000);
    if (answer.status !== 101) {
      if (answer.status === 0) {
        return { kind: "odd", what: `no HTTP answer (${answer.head.slice(0, 60)})` };
      }
      return { kind: "http", statuses: [answer.status] };
    }
    const f = await c.readFrame();
    if (!f) return { kind: "odd", what: "upgraded, then end of stream with no frame" };
    if (f.opcode === 8) {
      const code = f.data.length >= 2 ? (f.data[0] << 8) | f.data[1] : -1;
      // A refusal is the only frame: the server then closes the connection.
      return { kind: "close", codes: [code] };
    }
    if (f.opcode !== 1 || !new TextDecoder().decode(f.data).startsWith('{"streamcast":2')) {
      return { kind: "odd", what: `first frame opcode ${f.opcode}, not a greeting` };
    }
    await c.write(frame(8, closePayload(1000)));
    const e = await c.ending(5_000);
    if (!(e.kind === "close" && e.code === 1000)) {
      return {
        kind: "odd",
        what: `greeting, then our close 1000 answered by ${JSON.stringify(e)}`,
      };
    }
    return { kind: "greeting" };
  } finally {
    c.close();
  }
}

function matches(got: Expect | { kind: "odd"; what: string }, want: Expect): boolean {
  if (got.kind !== want.kind) return false;
  if (got.kind === "close" && want.kind === "close") return want.codes.includes(got.codes[0]);
  if (got.kind === "http" && want.kind === "http") return want.statuses.includes(got.statuses[0]);
  return true;
}

type FrameExpect = "1008" | "drop" | "open" | `echo ${number}` | "echo-or-1002";

interface FrameCase {
  what: string;
  bytes: Uint8Array;
  expect: FrameExpect;
}

function randomBytes(rand: () => number, n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rand() * 256);
  return b;
}

function randomFrameCase(rand: () => number): FrameCase {
  const text = (n: number) => enc.encode(randomName(rand, 'abc{}[]":,0123456789 ', n, n));
  switch (Math.floor(rand() * 15)) {
    case 0:
      return { what: "text", bytes: frame(1, text(Math.floor(rand() * 2000))), expect: "1008" };
    case 1:
      return {
        what: "binary",
        bytes: frame(2, randomBytes(rand, Math.floor(rand() * 2000))),
        expect: "1008",
      };
    case 2: {
      const n = (1 + Math.floor(rand() * 4)) << 20;
      return {
        what: `${n >> 20} MiB frame`,
        bytes: frame(rand() < 0.5 ? 1 : 2, new Uint8Array(n).fill(97)),
        expect: "1008",
      };
    }
    case 3: {
      const bad = pick(rand, [[0xff], [0xc3, 0x28], [0xe2, 0x82], [0xed, 0xa0, 0x80], [
        0xf8,
        0x88,
        0x80,
        0x80,
      ]]);
      return {
        what: "invalid UTF-8 text",
        bytes: frame(1, concat(text(5), new Uint8Array(bad))),
        expect: "drop",
      };
    }
    case 4: {
      const parts = 2 + Math.floor(rand() * 4);
      const fs: Uint8Array[] = [];
      for (let i = 0; i < parts; i++) {
        fs.push(frame(i === 0 ? 1 : 0, text(10), { fin: i === parts - 1 }));
        if (rand() < 0.5 && i < parts - 1) fs.push(frame(9, text(3)));
      }
      return { what: `text in ${parts} fragments`, bytes: concat(...fs), expect: "1008" };
    }
    case 5:
      return { what: "continuation with no start", bytes: frame(0, text(10)), expect: "drop" };
    case 6: {
      const n = 100 + Math.floor(rand() * 3000);
      const one = frame(9, text(8));
      return {
        what: `${n} pings`,
        bytes: concat(...Array.from({ length: n }, () => one)),
        expect: "open",
      };
    }
    case 7:
      return {
        what: "unsolicited pongs",
        bytes: concat(frame(10, text(4)), frame(10, new Uint8Array(0))),
        expect: "open",
      };
    case 8: {
      const op = pick(rand, [3, 4, 5, 6, 7, 11, 12, 13, 14, 15]);
      return { what: `reserved opcode ${op}`, bytes: frame(op, text(4)), expect: "drop" };
    }
    case 9:
      return {
        what: "RSV bits",
        bytes: frame(1, text(4), { rsv: 1 + Math.floor(rand() * 7) }),
        expect: "drop",
      };
    case 10:
      return rand() < 0.5
        ? { what: "ping of 126 bytes", bytes: frame(9, new Uint8Array(126)), expect: "drop" }
        : { what: "fragmented ping", bytes: frame(9, text(4), { fin: false }), expect: "drop" };
    case 11: {
      const code = pick(rand, [1000, 1001, 1003, 1007, 1008, 1011, 3000, 4000, 4404, 4999]);
      return {
        what: `close ${code}`,
        bytes: frame(8, closePayload(code, "bye")),
        expect: `echo ${code}`,
      };
    }
    case 12: {
      const code = pick(rand, [0, 999, 1004, 1005, 1006, 1015, 2000, 2999, 5000, 65535]);
      return { what: `close ${code}`, bytes: frame(8, closePayload(code)), expect: "echo 1002" };
    }
    case 13:
      return pick(rand, [
        {
          what: "close with 1 byte",
          bytes: frame(8, new Uint8Array([3])),
          expect: "drop" as const,
        },
        {
          what: "close, non-UTF-8 reason",
          bytes: frame(8, concat(closePayload(1000), new Uint8Array([0xff]))),
          expect: "drop" as const,
        },
        {
          what: "close, no code",
          bytes: frame(8, new Uint8Array(0)),
          expect: "echo-or-1002" as const,
        },
      ]);
    default:
      return pick(rand, [
        {
          what: "unmasked text",
          bytes: frame(1, text(5), { mask: false }),
          expect: "1008" as const,
        },
        {
          what: "declared 2^40 bytes",
          bytes: frame(2, text(16), { declaredLength: 2 ** 40 }),
          expect: "drop" as const,
        },
        {
          what: "declared 65 MiB",
          bytes: frame(2, text(16), { declaredLength: 65 << 20 }),
          expect: "drop" as const,
        },
        {
          what: "declared 1000, sent 10",
          bytes: frame(2, text(10), { declaredLength: 1000 }),
          expect: "open" as const,
        },
      ]);
  }
}

function frameOk(e: Ending, expect: FrameExpect): boolean {
  switch (expect) {
    case "1008":
      return e.kind === "close" && e.code === 1008;
    case "drop":
      // Deno drops the connection on a protocol error; a close frame saying so is fine too.
      return e.kind === "eof" || e.kind === "reset" ||
        (e.kind === "close" && (e.code === 1002 || e.code === 1007 || e.code === 1009));
    case "open":
      return e.kind === "timeout";
    case "echo-or-1002":
      return e.kind === "close" && (e.code === null || e.code === 1000 || e.code === 1002);
    default:
      return e.kind === "close" && e.code === Number(expect.slice(5));
  }
}

async function frameCase(port: number, fc: FrameCase, rand: () => number): Promise<string | null> {
  const query = pick(rand, ["", "?frames=batch", "?offset=1&frames=batch", "?offset=earliest"]);
  const { c, answer } = await RawConn.upgrade(port, `/${NAME}${query}`);
  try {
    if (answer.status !== 101) return `${fc.what}: subscribe answered ${answer.status}`;
    const g = await c.readFrame();
    if (!g || g.opcode !== 1) return `${fc.what}: no greeting`;
    await c.write(fc.bytes);
    let data = 0;
    const e = await c.ending(fc.expect === "open" ? 1000 : 10_000, (f) => {
      if (f.opcode === 1 || f.opcode === 2) data++;
    });
    if (!frameOk(e, fc.expect)) {
      return `${fc.what}: expected ${fc.expect}, got ${JSON.stringify(e)}`;
    }
    if (fc.expect === "open" && fc.what.endsWith("pings")) {
      // Still subscribed after the flood: a polite close is answered in kind.
      await c.write(frame(8, closePayload(1000)));
      const bye = await c.ending(10_000);
      if (!(bye.kind === "close" && bye.code === 1000)) {
        return `${fc.what}: then close 1000 got ${JSON.stringify(bye)} (rows seen ${data})`;
      }
    }
    return null;
  } finally {
    c.close();
  }
}

/**
 * After a fuzz run: the server still answers its health check, and every row
 * fed through stdin was stored (the last ones may still be on their way).
 * Returns the stream's end offset.
 */
async function aliveAndStored(url: string, fed: number, what: string): Promise<number> {
  const health = await fetch(`${url}/_/health`);
  assertEquals(health.status, 200, `health after ${what}`);
  await health.body?.cancel();
  let end = 0;
  for (const stop = Date.now() + 10_000; end !== fed + 1 && Date.now() < stop; await sleep(50)) {
    end = (await (await fetch(`${url}/${NAME}/head`)).json()).end_offset as number;
  }
  assertEquals(end, fed + 1, "every row fed was stored");
  return end;
}

Deno.test("fuzz: random paths, queries and client frames get the right close code; the server and its subscribers carry on", async () => {
  const w = await workspace();
  const s = await serveChild(w, ["--segment-bytes", "65536"]);
  const port = portOf(s.url);
  let feeding = true;
  const failures: string[] = [];
  const subs: TestSub[] = [];
  try {
    // Some history, then steady ingest.
    let fed = 0;
    const write = async (n: number) => {
      let text = "";
      for (let k = 0; k < n; k++) text += rowText(++fed) + "\n";
      await s.write(text);
    };
    await write(500);
    const head = await (await fetch(`${s.url}/${NAME}/head`)).json();
    const streamId = head.stream_id as string;
    const feeder = (async () => {
      while (feeding) {
        await write(5);
        await sleep(10);
      }
    })();
    const calm = new TestSub(`${s.ws}/${NAME}?offset=1&frames=batch`);
    const liveSub = new TestSub(`${s.ws}/${NAME}`);
    subs.push(calm, liveSub);
    // The longest time the calm subscriber went without a row, less the time this process
    // itself was held up (its ticks late): this process feeds the rows, so its own stalls
    // (a loaded machine, a GC) are not the server's.
    const WATCH_MS = 20;
    let lastArrival = Date.now();
    let lastTick = lastArrival;
    let ownDelayMs = 0;
    let worstGapMs = 0;
    let watchCount = 0;
    const watch = setInterval(() => {
      const now = Date.now();
      ownDelayMs += Math.max(0, now - lastTick - WATCH_MS);
      lastTick = now;
      const n = calm.lines.length;
      if (n !== watchCount) {
        watchCount = n;
        lastArrival = now;
        ownDelayMs = 0;
      }
      worstGapMs = Math.max(worstGapMs, now - lastArrival - ownDelayMs);
    }, WATCH_MS);
    const fdsBefore = fdCount(s.proc.pid);
    const t0 = Date.now();
    // Upgrades: 8 at a time.
    let upgrades = 0;
    const seen = new Map<string, number>();
    const failed: { seed: number; index: number }[] = [];
    for (const batch of fuzzCases(40, "server upgrades")) {
      const rand = caseRng(batch, 0x0b6);
      const cases = Array.from({ length: 8 }, () => randomPath(rand) + randomQuery(rand, streamId));
      await Promise.all(cases.map(async (target, i) => {
        let want: Expect;
        try {
          want = oracle(target, streamId);
        } catch {
          return; // not a URL at all: nothing to compare with
        }
        const got = await upgradeCase(port, target);
        upgrades++;
        const key = got.kind === "close"
          ? `close ${got.codes[0]}`
          : got.kind === "http"
          ? `http ${got.statuses[0]}`
          : got.kind;
        seen.set(key, (seen.get(key) ?? 0) + 1);
        if (!matches(got, want)) {
          failed.push(batch);
          failures.push(
            `${caseName(batch, "upgrade batch")} item ${i} ${
              JSON.stringify(target.slice(0, 120))
            }` +
              `${target.length > 120 ? `… (${target.length} chars)` : ""}: expected ` +
              `${JSON.stringify(want)}, got ${JSON.stringify(got)}`,
          );
        }
      }));
    }
    // Client frames after a valid subscribe: 6 at a time.
    let frameCases = 0;
    for (const batch of fuzzCases(25, "server frames")) {
      const rand = caseRng(batch, 0xf4a);
      const cases = Array.from({ length: 6 }, () => randomFrameCase(rand));
      await Promise.all(cases.map(async (fc, i) => {
        const f = await frameCase(port, fc, rand);
        frameCases++;
        if (f) {
          failed.push(batch);
          failures.push(`${caseName(batch, "frame batch")} item ${i}: ${f}`);
        }
      }));
    }
    // since= case family: hostile times, 8 at a time, and /at with each.
    let sinceCases = 0;
    for (const batch of fuzzCases(15, "server since")) {
      const rand = caseRng(batch, 0x51c);
      const cases = Array.from({ length: 8 }, () => randomSinceCase(rand, streamId));
      await Promise.all(cases.map(async ({ target, want }, i) => {
        const got = await upgradeCase(port, target);
        const at = await atCase(s.url, target);
        sinceCases++;
        if (!matches(got, want) || at) {
          failed.push(batch);
          failures.push(
            `${caseName(batch, "since batch")} item ${i} ${
              JSON.stringify(target.slice(0, 120))
            }: ` +
              (at ?? `expected ${JSON.stringify(want)}, got ${JSON.stringify(got)}`),
          );
        }
      }));
    }
    const elapsed = Date.now() - t0;
    clearInterval(watch);
    feeding = false;
    await feeder;
    const end = await aliveAndStored(s.url, fed, "the fuzz");
    await calm.waitLines(end - 1, 20_000);
    await liveSub.waitLines(1, 5_000);
    for (
      const [sub, start] of [[calm, 1], [liveSub, liveSub.greeting!.end_offset as number]] as const
    ) {
      assertEquals(sub.closed, null, "a well-behaved subscriber was closed");
      const offs = sub.offsets();
      for (let i = 0; i < offs.length; i++) assertEquals(offs[i], start + i, "contiguous rows");
      assertEquals(offs.at(-1), end - 1, "received up to the end");
    }
    // Every fuzz connection is gone from the server too.
    await sleep(500);
    const fdsAfter = fdCount(s.proc.pid);
    console.log(
      `server fuzz: ${upgrades} upgrades, ${frameCases} frame cases, ${sinceCases} since cases ` +
        `in ${elapsed} ms; ` +
        `outcomes ${JSON.stringify(Object.fromEntries([...seen].sort()))}; ` +
        `worst gap between rows for the calm subscriber ${worstGapMs} ms; ` +
        `server fds ${fdsBefore} before, ${fdsAfter} after`,
    );
    assert(!/request failed|Uncaught|panicked/.test(s.stderr()), `server errors:\n${s.stderr()}`);
    assert(worstGapMs < 1000, `the calm subscriber stalled for ${worstGapMs} ms`);
    assert(fdsAfter <= fdsBefore + 4, `server fds: ${fdsBefore} before, ${fdsAfter} after`);
    if (failures.length > 0) {
      throw new Error(
        `${failures.length} fuzz cases failed (${replayHint(failed)}):\n  ` +
          failures.slice(0, 20).join("\n  "),
      );
    }
    assertEquals((await s.signal("SIGTERM")).code, 0, "clean stop");
  } finally {
    feeding = false;
    for (const sub of subs) await sub.close();
    await s.stop();
    await w.rm();
  }
});

// ---- where= (docs/SPEC.md §2.5): hostile filters -----------------------------
// Every filter either subscribes (the greeting echoes it) or is refused 4400
// with a `where:` detail, exactly as compileFilter decides against the
// stream's schema; the server never crashes and keeps serving the others.

/** The query value of `where` text: encoded, with commas left as they are (shorter). */
function whereQuery(text: string): string {
  return encodeURIComponent(text).replaceAll("%2C", ",");
}

function randomScalar(rand: () => number): unknown {
  return pick(rand, [
    0,
    1,
    -1,
    1.5,
    -0,
    2 ** 53,
    2 ** 53 + 2,
    1e308,
    -1e308,
    5e-324,
    "",
    "abc",
    "日本🙂",
    "\u0000",
    "\ud800",
    true,
    false,
    null,
  ]);
}

/** Random conditions over real and unknown columns and operators. */
function randomSoup(rand: () => number, depth = 0): unknown {
  const r = rand();
  if (r < 0.35 || depth > 3) return randomScalar(rand);
  if (r < 0.55) {
    return Array.from({ length: Math.floor(rand() * 6) }, () => randomSoup(rand, depth + 1));
  }
  const out: Record<string, unknown> = {};
  const n = Math.floor(rand() * 4);
  for (let i = 0; i < n; i++) {
    const key = pick(rand, [
      "gt",
      "gte",
      "lt",
      "lte",
      "prefix",
      "GT",
      "eq",
      "in",
      "__proto__",
      "constructor",
      "toString",
      "",
      "seq",
    ]);
    // Defined, not assigned: "__proto__" must be a key, not the prototype.
    Object.defineProperty(out, key, {
      value: randomSoup(rand, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/** Longest `where` query value tried: the URL stays under the server's 8192-byte limit. */
const MAX_WHERE_QUERY = 8000;

/** A hostile `where` text (JSON or not) whose query value fits {@linkcode MAX_WHERE_QUERY}. */
function randomWhere(rand: () => number): string {
  while (true) {
    const text = anyWhere(rand);
    if (whereQuery(text).length <= MAX_WHERE_QUERY) return text;
  }
}

function anyWhere(rand: () => number): string {
  const column = () => pick(rand, ["seq", "ts", "pad", "Seq", "nope", "", "日本", "__proto__"]);
  switch (Math.floor(rand() * 12)) {
    case 0: { // deep nesting, in arrays or in operator objects
      const n = 1 + Math.floor(rand() * 1200);
      return rand() < 0.5
        ? `{"seq":${"[".repeat(n)}1${"]".repeat(n)}}`
        : `{"seq":${'{"gt":'.repeat(n)}1${"}".repeat(n)}}`;
    }
    case 1: // huge, tiny and odd numbers, as JSON text
      return `{"${pick(rand, ["seq", "ts"])}":${
        pick(rand, [
          "1e309",
          "-1e309",
          "1e-400",
          "123456789012345678901234567890",
          "9007199254740993",
          "-0",
          "0.1e1",
          "1E2",
          "01",
          "NaN",
          "Infinity",
          "0x10",
        ])
      }}`;
    case 2: { // 1023, 1024 and 1025 values, in one list or across columns
      const n = pick(rand, [1023, 1024, 1025, 1100]);
      if (rand() < 0.5) return JSON.stringify({ seq: Array.from({ length: n }, (_, i) => i) });
      const a = Math.floor(n / 2);
      return JSON.stringify({
        seq: Array.from({ length: a }, (_, i) => i),
        ts: Array.from({ length: n - a }, (_, i) => i),
      });
    }
    case 3: // unicode: values, prefixes and column names
      return JSON.stringify({
        [pick(rand, ["pad", "pad", "日本", "p\u0301ad", "\u200bpad"])]: pick(rand, [
          "日本🙂",
          { prefix: "🙂" },
          ["é", "e\u0301", "\ufeff"],
          "\ud83d",
        ]),
      });
    case 4: // wrong types for the column
      return JSON.stringify({
        [column()]: pick(rand, ["1", true, 1.5, null, {}, [], [[1]], [{}], { gt: "1" }, {
          prefix: 1,
        }]),
      });
    case 5: // operator soup
      return JSON.stringify({ [column()]: randomSoup(rand) });
    case 6: { // very long strings (within the URL limit)
      const n = 100 + Math.floor(rand() * 6500);
      return pick(rand, [
        JSON.stringify({ pad: "x".repeat(n) }),
        JSON.stringify({ pad: { prefix: "a".repeat(n) } }),
        JSON.stringify({ ["c".repeat(n)]: 1 }),
        JSON.stringify({ pad: Array.from({ length: Math.min(1024, n >> 3) }, (_, i) => `v${i}`) }),
      ]);
    }
    case 7: // not JSON, or not an object
      return pick(rand, [
        "{",
        "",
        " ",
        "null",
        "[]",
        '"x"',
        "1",
        '{"seq":1,}',
        "{'seq':1}",
        "{}}",
        "\u0000",
      ]);
    case 8: // empty, duplicate keys, many columns
      return pick(rand, ["{}", '{"seq":1,"seq":2}', '{"seq":1,"ts":2,"pad":"x"}', "{ }"]);
    case 9: // filters that fit
      return JSON.stringify(pick(rand, [
        { seq: { gte: 100 } },
        { pad: { prefix: "abc" } },
        { seq: [1, 2, 3], ts: 0 },
        { ts: { gt: -1, lte: 1e300 } },
        { seq: { gte: 10, lt: 5 } },
      ]));
    case 10: // random soup, several columns
      return JSON.stringify(
        Object.fromEntries(
          Array.from({ length: 1 + Math.floor(rand() * 4) }, () => [column(), randomSoup(rand)]),
        ),
      );
    default: // random bytes of JSON's alphabet
      return randomName(rand, '{}[]":,0123456789.e-+ ntrulfase\\', 1, 60);
  }
}

type WhereOutcome =
  | { kind: "greeting"; where: unknown }
  | { kind: "close"; code: number; reason: string }
  | { kind: "odd"; what: string };

async function whereCase(port: number, text: string): Promise<WhereOutcome> {
  const target = `/${NAME}?offset=${pick(Math.random, ["1", "earliest"])}&where=${
    whereQuery(text)
  }`;
  const { c, answer } = await RawConn.upgrade(port, target);
  try {
    if (answer.status !== 101) return { kind: "odd", what: `HTTP ${answer.status}` };
    const f = await c.readFrame(10_000);
    if (!f) return { kind: "odd", what: "no frame" };
    if (f.opcode === 8) {
      const code = f.data.length >= 2 ? (f.data[0] << 8) | f.data[1] : -1;
      return { kind: "close", code, reason: new TextDecoder().decode(f.data.subarray(2)) };
    }
    if (f.opcode !== 1) return { kind: "odd", what: `first frame opcode ${f.opcode}` };
    const g = JSON.parse(new TextDecoder().decode(f.data));
    await c.write(frame(8, closePayload(1000)));
    await c.ending(5_000);
    return { kind: "greeting", where: g.where };
  } finally {
    c.close();
  }
}

Deno.test("fuzz: hostile where filters are refused 4400 naming where or accepted as compileFilter decides; the server carries on", async () => {
  const { compileFilter, FilterError } = await import("../../../wire/filter.ts");
  const { SCHEMA } = await import("../../harness/soak/workload.ts");
  const w = await workspace();
  const s = await serveChild(w, ["--segment-bytes", "65536"]);
  const port = portOf(s.url);
  const failures: string[] = [];
  const failed: { seed: number; index: number }[] = [];
  const outcomes = new Map<string, number>();
  let fed = 0;
  let feeding = true;
  const write = async (n: number) => {
    let text = "";
    for (let k = 0; k < n; k++) text += rowText(++fed) + "\n";
    await s.write(text);
  };
  const subs: TestSub[] = [];
  try {
    await write(300);
    const feeder = (async () => {
      while (feeding) {
        await write(5);
        await sleep(10);
      }
    })();
    // Two well-behaved subscribers, one of them filtered.
    const calm = new TestSub(`${s.ws}/${NAME}?offset=1&frames=batch`);
    const even = new TestSub(
      `${s.ws}/${NAME}?offset=1&where=${whereQuery('{"seq":{"gte":0},"ts":0}')}`,
    );
    subs.push(calm, even);
    let cases = 0;
    for (const batch of fuzzCases(30, "server where")) {
      const rand = caseRng(batch, 0x3e7e);
      const texts = Array.from({ length: 8 }, () => randomWhere(rand));
      await Promise.all(texts.map(async (text, i) => {
        let want: "greeting" | "refused";
        let detail = "";
        try {
          compileFilter(text, SCHEMA);
          want = "greeting";
        } catch (err) {
          if (!(err instanceof FilterError)) throw err;
          want = "refused";
          detail = err.detail;
        }
        const got = await whereCase(port, text);
        cases++;
        const key = got.kind === "close" ? `close ${got.code}` : got.kind;
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
        let problem: string | null = null;
        if (want === "greeting") {
          if (got.kind !== "greeting") problem = `expected a greeting, got ${JSON.stringify(got)}`;
          else if (got.where === null || typeof got.where !== "object") {
            problem = `the greeting's where is ${JSON.stringify(got.where)}`;
          }
        } else if (got.kind !== "close" || got.code !== 4400) {
          problem = `expected 4400 (${detail}), got ${JSON.stringify(got).slice(0, 200)}`;
        } else {
          const reason = JSON.parse(got.reason);
          if (reason.error !== "protocol" || !String(reason.detail).startsWith("where:")) {
            problem = `4400 without a where: detail: ${got.reason}`;
          } else if (!detail.startsWith(reason.detail.replace(/…$/, ""))) {
            // The reason is cut to 123 bytes: the server's detail is a prefix of ours.
            problem = `detail ${reason.detail} is not compileFilter's ${detail}`;
          }
        }
        if (problem) {
          failed.push(batch);
          failures.push(
            `${caseName(batch, "where batch")} item ${i} ${JSON.stringify(text.slice(0, 100))}` +
              `${text.length > 100 ? `… (${text.length} chars)` : ""}: ${problem}`,
          );
        }
      }));
    }
    feeding = false;
    await feeder;
    const end = await aliveAndStored(s.url, fed, "the where fuzz");
    await calm.waitLines(end - 1, 20_000);
    await even.waitLines(end - 1, 20_000);
    for (const sub of [calm, even]) {
      assertEquals(sub.closed, null, "a well-behaved subscriber was closed");
      const offs = sub.offsets();
      for (let i = 0; i < offs.length; i++) assertEquals(offs[i], 1 + i, "contiguous rows");
    }
    console.log(
      `server where fuzz: ${cases} filters; outcomes ` +
        JSON.stringify(Object.fromEntries([...outcomes].sort())),
    );
    assert(!/request failed|Uncaught|panicked/.test(s.stderr()), `server errors:\n${s.stderr()}`);
    if (failures.length > 0) {
      throw new Error(
        `${failures.length} where cases failed (${replayHint(failed)}):\n  ` +
          failures.slice(0, 20).join("\n  "),
      );
    }
    assertEquals((await s.signal("SIGTERM")).code, 0, "clean stop");
  } finally {
    feeding = false;
    for (const sub of subs) await sub.close();
    await s.stop();
    await w.rm();
  }
});
