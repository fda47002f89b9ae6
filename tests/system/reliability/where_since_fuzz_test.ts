// Fuzzing what `where=` and `since=` deliver (docs/SPEC.md §2.5, §8), against a real
// `cli.ts serve` holding rows in chunks and segments with many append times:
// random filters (most of them fitting, built from the stored values, the
// rest hostile) and random times (every form parseSince takes, at, between,
// before and after the stored times, with UTC offsets and fractions, then
// mutated), with or without `offset`, single or batched frames. Each
// subscribe is refused 4400 with the detail parseSince or compileFilter gives
// (since checked first), or greets with the filter and the time echoed and
// `replay` from the first offset whose append time is at or after the time,
// then delivers exactly the stored rows from there that compileFilter's
// predicate selects — evaluated here, on the rows read from the log folder —
// in offset order, byte for byte, and nothing else. The server never crashes.
// Seeded (see tests/harness/seeds.ts): a fresh seed each run, printed, plus the regression
// seeds; STREAMCAST_FUZZ_SEED=N replays seed N.
import { assert, assertEquals } from "../../harness/assert.ts";
import { compileFilter, FilterError, MAX_FILTER_VALUES } from "../../../wire/filter.ts";
import { parseSince } from "../../../wire/since.ts";
import { join } from "node:path";
import { type ChunkEntry, MANIFEST_FILE } from "../../../log/chunk/chunk.ts";
import { readChunkTimes } from "../../../log/chunk/times.ts";
import { FolderReader } from "../../../log/mod.ts";
import { TestSub } from "../../harness/subscriber.ts";
import {
  NAME,
  rowText,
  SCHEMA,
  serveChild,
  sleep,
  workspace,
} from "../../harness/soak/workload.ts";
import { caseName, caseRng, fuzzCases, replayHint, seedBanner } from "../../harness/seeds.ts";

console.log(seedBanner("where/since delivery fuzz"));

interface Stored {
  offset: number;
  timeUs: number;
  payload: string;
  row: Record<string, unknown>;
}

function pick<T>(rand: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rand() * xs.length)];
}

function tsOf(seq: number): number {
  return ((seq * 7919) % 200 - 100) / 4;
}

// --- where: fitting filters from the stored values, and hostile ones ---

function fittingCondition(rand: () => number, column: string, rows: Stored[]): unknown {
  const value = () => pick(rand, rows).row[column];
  const k = rand();
  if (k < 0.3) return value();
  if (k < 0.5) return Array.from({ length: 1 + Math.floor(rand() * 20) }, value);
  if (column === "pad" && k < 0.75) {
    const v = String(value());
    return { prefix: v.slice(0, Math.floor(rand() * Math.min(v.length + 1, 4))) };
  }
  if (column === "pad") return value();
  const ops = ["gt", "gte", "lt", "lte"].filter(() => rand() < 0.5);
  if (ops.length === 0) ops.push("gte");
  return Object.fromEntries(ops.map((op) => [op, value()]));
}

function hostileWhere(rand: () => number): string {
  switch (Math.floor(rand() * 10)) {
    case 0:
      return `{"seq":${"[".repeat(1 + Math.floor(rand() * 300))}1${"]".repeat(1)}}`;
    case 1:
      return JSON.stringify({ seq: Array.from({ length: MAX_FILTER_VALUES + 1 }, (_, i) => i) });
    case 2:
      return JSON.stringify({
        seq: Array.from({ length: 600 }, (_, i) => i),
        ts: Array.from({ length: 425 }, (_, i) => i),
      });
    case 3:
      return pick(rand, [
        '{"seq":1,"seq":"x"}',
        '{"seq":"x","seq":1}',
        '{"pad":1,"pad":{"prefix":"a"}}',
      ]);
    case 4:
      return JSON.stringify({ [pick(rand, ["nope", "Seq", "日本", "__proto__", ""])]: 1 });
    case 5:
      return JSON.stringify({
        [pick(rand, ["seq", "ts", "pad"])]: pick(rand, [
          "1",
          true,
          null,
          {},
          [],
          [[1]],
          { gt: "1" },
          { prefix: 1 },
          { eq: 1 },
          { gte: 1, prefix: "a" },
          1.5,
        ]),
      });
    case 6:
      return `{"${pick(rand, ["seq", "ts"])}":${
        pick(rand, ["1e309", "-1e309", "1e-400", "9007199254740993", "-0", "1E2", "2e300"])
      }}`;
    case 7:
      return pick(rand, ["{", "", "null", "[]", '"x"', "{}", "{'seq':1}", '{"seq":1,}']);
    case 8:
      return JSON.stringify({
        pad: pick(rand, ["日本🙂", { prefix: "🙂" }, ["é", "e\u0301"], "\ud83d"]),
      });
    default:
      return JSON.stringify({ seq: { gte: 2 ** 53 }, ts: { lt: -1e308 } });
  }
}

function randomWhere(rand: () => number, rows: Stored[]): string | null {
  const k = rand();
  if (k < 0.2) return null;
  if (k < 0.75) {
    const columns = ["seq", "ts", "pad"].filter(() => rand() < 0.5);
    if (columns.length === 0) columns.push(pick(rand, ["seq", "ts", "pad"]));
    return JSON.stringify(
      Object.fromEntries(columns.map((c) => [c, fittingCondition(rand, c, rows)])),
    );
  }
  return hostileWhere(rand);
}

// --- since: every form parseSince takes, around the stored times, mutated ---

function pad(n: number, width: number): string {
  return String(n).padStart(width, "0");
}

/** `us` as RFC 3339 with a UTC offset of `offsetMin` and `digits` fraction digits (cut). */
function rfc3339(us: number, offsetMin: number, digits: number, rand: () => number): string {
  const local = new Date(Math.floor(us / 1000) + offsetMin * 60_000);
  const micros = String(((us % 1_000_000) + 1_000_000) % 1_000_000).padStart(6, "0");
  const fraction = digits === 0 ? "" : "." + (micros + "000").slice(0, digits);
  const zone = offsetMin === 0 && rand() < 0.7
    ? pick(rand, ["Z", "z"])
    : `${offsetMin < 0 ? "-" : "+"}${pad(Math.floor(Math.abs(offsetMin) / 60), 2)}:${
      pad(Math.abs(offsetMin) % 60, 2)
    }`;
  return `${local.getUTCFullYear()}-${pad(local.getUTCMonth() + 1, 2)}-${
    pad(local.getUTCDate(), 2)
  }${pick(rand, ["T", "T", "t", " "])}${pad(local.getUTCHours(), 2)}:${
    pad(local.getUTCMinutes(), 2)
  }:${pad(local.getUTCSeconds(), 2)}${fraction}${zone}`;
}

function mutate(text: string, rand: () => number): string {
  const at = Math.floor(rand() * (text.length + 1));
  switch (Math.floor(rand() * 6)) {
    case 0:
      return text.slice(0, at) + text.slice(at + 1);
    case 1:
      return text.slice(0, at) + pick(rand, ["0", "9", ":", "-", "+", ".", "Z", " ", "é", "١"]) +
        text.slice(at);
    case 2:
      return text.replace(/-(\d\d)-/, `-${pick(rand, ["00", "13", "02", "99"])}-`);
    case 3:
      return text.replace(
        /(\d\d):(\d\d):(\d\d)/,
        pick(rand, ["24:00:00", "23:60:00", "23:59:60", "23:59:61"]),
      );
    case 4:
      return text.replace(
        /[+-]\d\d:\d\d$|[Zz]$/,
        pick(rand, ["+24:00", "-00:60", "+1:00", "", "+0100"]),
      );
    default:
      return text + pick(rand, ["0", "Z", " ", "\u0000"]);
  }
}

function randomSince(rand: () => number, rows: Stored[]): string | null {
  if (rand() < 0.2) return null;
  const first = rows[0].timeUs;
  const last = rows[rows.length - 1].timeUs;
  const base = pick(rand, rows).timeUs;
  const us = Math.max(
    0,
    pick(rand, [
      base,
      base,
      base + 1,
      base - 1,
      Math.floor((first + last) / 2),
      first,
      first - 1,
      first - 1_000_000,
      last,
      last + 1,
      last + 86_400_000_000,
      0,
      Number.MAX_SAFE_INTEGER,
    ]),
  );
  let text: string;
  if (rand() < 0.35 || us > 8e15) text = String(us);
  else {
    const offsetMin = rand() < 0.4 ? 0 : Math.floor((rand() - 0.5) * 2 * (23 * 60 + 59));
    text = rfc3339(us, offsetMin, pick(rand, [0, 1, 3, 6, 6, 6, 9]), rand);
  }
  return rand() < 0.2 ? mutate(text, rand) : text;
}

// --- what the folder holds ---

async function storedRows(dir: string, end: number): Promise<Stored[]> {
  const dec = new TextDecoder();
  for (let attempt = 0;; attempt++) {
    const reader = await FolderReader.open(dir);
    const rows: Stored[] = [];
    for await (const b of reader.read(1, end - 1)) {
      for (let i = 0; i < b.count; i++) {
        const payload = dec.decode(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]));
        rows.push({ offset: b.offsets[i], timeUs: b.times[i], payload, row: JSON.parse(payload) });
      }
    }
    let manifest: { chunks: ChunkEntry[] } = { chunks: [] };
    try {
      manifest = JSON.parse(await Deno.readTextFile(join(dir, MANIFEST_FILE)));
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
    const byOffset = new Map(rows.map((r) => [r.offset, r]));
    for (const c of manifest.chunks) {
      const t = await readChunkTimes(dir, c).catch(() => null);
      if (t === null) continue;
      for (let j = 0; j < t.offsets.length; j++) {
        const to = j + 1 < t.offsets.length ? t.offsets[j + 1] - 1 : c.last;
        for (let o = t.offsets[j]; o <= to; o++) {
          const r = byOffset.get(o);
          if (r !== undefined && r.timeUs === 0) r.timeUs = t.times[j];
        }
      }
    }
    if (rows.every((r) => r.timeUs > 0)) return rows;
    if (attempt >= 20) throw new Error("rows without an append time in the folder");
    await sleep(100);
  }
}

// --- one subscribe and its oracle ---

type Want =
  | { kind: "refused"; detail: string }
  | {
    kind: "rows";
    where: unknown;
    since: number | null;
    replayFrom: number | null;
    rows: Stored[];
  };

function oracle(
  where: string | null,
  since: string | null,
  offset: string | null,
  rows: Stored[],
  end: number,
): Want {
  let sinceUs: number | null = null;
  if (since !== null) {
    if (offset !== null) return { kind: "refused", detail: "give offset or since, not both" };
    try {
      sinceUs = parseSince(since);
    } catch (err) {
      return { kind: "refused", detail: (err as RangeError).message };
    }
  }
  let test = (_row: Record<string, unknown>) => true;
  let echo: unknown = null;
  if (where !== null) {
    try {
      const f = compileFilter(where, SCHEMA);
      test = f.test;
      echo = f.where;
    } catch (err) {
      if (!(err instanceof FilterError)) throw err;
      return { kind: "refused", detail: err.detail };
    }
  }
  let from: number;
  if (sinceUs !== null) {
    const first = rows.find((r) => r.timeUs >= sinceUs!);
    from = first === undefined ? end : first.offset;
  } else from = offset === null ? end : 1;
  return {
    kind: "rows",
    where: echo,
    since: sinceUs,
    replayFrom: from < end ? from : null,
    rows: rows.filter((r) => r.offset >= from && test(r.row)),
  };
}

async function subscribeCase(
  ws: string,
  where: string | null,
  since: string | null,
  offset: string | null,
  frames: string,
  want: Want,
): Promise<string | null> {
  const q: string[] = [];
  if (offset !== null) q.push(`offset=${offset}`);
  if (since !== null) q.push(`since=${encodeURIComponent(since)}`);
  if (where !== null) q.push(`where=${encodeURIComponent(where)}`);
  q.push(`frames=${frames}`);
  const sub = await TestSub.open(`${ws}/${NAME}?${q.join("&")}`);
  try {
    if (want.kind === "refused") {
      if (sub.greeting !== null) return `expected 4400 (${want.detail}), got a greeting`;
      if (sub.closed?.code !== 4400) {
        return `expected 4400 (${want.detail}), got ${sub.closed?.code}`;
      }
      const reason = JSON.parse(sub.closed.reason);
      // The close reason is cut to fit 123 bytes: the detail sent is a prefix of ours.
      const sent = String(reason.detail).replace(/…$/, "");
      if (reason.error !== "protocol" || !want.detail.startsWith(sent) || sent.length < 8) {
        return `4400 with ${sub.closed.reason}, expected detail ${want.detail}`;
      }
      return null;
    }
    if (sub.greeting === null) {
      return `expected a greeting, got close ${JSON.stringify(sub.closed)}`;
    }
    const g = sub.greeting;
    if (JSON.stringify(g.where) !== JSON.stringify(want.where)) {
      return `greeting where ${JSON.stringify(g.where)}, expected ${JSON.stringify(want.where)}`;
    }
    if ((g.since ?? null) !== want.since) {
      return `greeting since ${g.since}, expected ${want.since}`;
    }
    const replay = g.replay as [number, number] | null;
    if ((replay?.[0] ?? null) !== want.replayFrom) {
      return `greeting replay ${JSON.stringify(replay)}, expected from ${want.replayFrom}`;
    }
    await sub.waitLines(want.rows.length, 15_000).catch(() => {});
    // Nothing more may come: no row is written meanwhile.
    await sleep(100);
    if (sub.closed !== null) return `closed ${JSON.stringify(sub.closed)}`;
    if (sub.lines.length !== want.rows.length) {
      return `${sub.lines.length} rows, expected ${want.rows.length} (offsets ${
        JSON.stringify(sub.offsets().slice(0, 10))
      } vs ${JSON.stringify(want.rows.slice(0, 10).map((r) => r.offset))})`;
    }
    for (let i = 0; i < want.rows.length; i++) {
      const r = want.rows[i];
      if (sub.lines[i] !== `[${r.offset},${r.payload}]`) {
        return `row ${i}: got ${sub.lines[i].slice(0, 80)}, expected [${r.offset},${
          r.payload.slice(0, 60)
        }]`;
      }
    }
    return null;
  } finally {
    await sub.close();
  }
}

Deno.test("fuzz: where and since deliver exactly the rows the predicate selects from the time's offset, or refuse 4400 saying why", async () => {
  const w = await workspace();
  // Small segments: most history is in chunks (with their time index), some in segments.
  const s = await serveChild(w, ["--segment-bytes", "16384", "--seal-every", "0"]);
  const failures: string[] = [];
  const failed: { seed: number; index: number }[] = [];
  try {
    // Rows in bursts, with pauses: many commits, many distinct append times.
    let fed = 0;
    for (let burst = 0; burst < 30; burst++) {
      let text = "";
      const n = 1 + ((burst * 13) % 40);
      for (let k = 0; k < n; k++) text += rowText(++fed, tsOf(fed)) + "\n";
      await s.write(text);
      // Each burst stored before the next is written: a commit (and a time) of its own at least.
      for (const stop = Date.now() + 10_000; Date.now() < stop; await sleep(5)) {
        const head = await (await fetch(`${s.url}/${NAME}/head`)).json();
        if (head.end_offset === fed + 1) break;
      }
      await sleep(burst % 3 === 0 ? 5 : 1);
    }
    let end = 0;
    for (const stop = Date.now() + 15_000; end !== fed + 1 && Date.now() < stop; await sleep(50)) {
      end = (await (await fetch(`${s.url}/${NAME}/head`)).json()).end_offset as number;
    }
    assertEquals(end, fed + 1, "every row fed was stored");
    // What is stored, with each row's append time, read from the folder (not
    // from the server): records in segments carry their time; rows in chunks
    // take theirs from the chunk's time index. Read again if chunking moved
    // rows between the two reads.
    const rows = await storedRows(w.logDir, end);
    assertEquals(rows.length, fed, "the folder holds every row");
    const times = new Set(rows.map((r) => r.timeUs));
    assert(times.size >= 10, `only ${times.size} distinct append times`);

    let cases = 0;
    const outcomes = { refused: 0, rows: 0, delivered: 0 };
    for (const batch of fuzzCases(24, "where since")) {
      const rand = caseRng(batch, 0x5ce);
      await Promise.all(Array.from({ length: 6 }, async (_, i) => {
        const where = randomWhere(rand, rows);
        const since = randomSince(rand, rows);
        const offset = since === null
          ? pick(rand, [null, "1", "earliest"])
          : rand() < 0.1
          ? "1"
          : null;
        const frames = pick(rand, ["single", "batch"]);
        const want = oracle(where, since, offset, rows, end);
        const problem = await subscribeCase(s.ws, where, since, offset, frames, want);
        cases++;
        if (want.kind === "refused") outcomes.refused++;
        else {
          outcomes.rows++;
          outcomes.delivered += want.rows.length;
        }
        if (problem !== null) {
          failed.push(batch);
          failures.push(
            `${caseName(batch, "batch")} item ${i}: where=${
              JSON.stringify(where?.slice(0, 80))
            } since=${JSON.stringify(since)} offset=${offset} frames=${frames}: ${problem}`,
          );
        }
      }));
    }
    console.log(
      `where/since delivery fuzz: ${cases} subscribes, ${outcomes.refused} refused, ` +
        `${outcomes.rows} delivering ${outcomes.delivered} rows in all`,
    );
    const health = await fetch(`${s.url}/_/health`);
    assertEquals(health.status, 200, "the server still serves");
    await health.body?.cancel();
    assert(!/request failed|Uncaught|panicked/.test(s.stderr()), `server errors:\n${s.stderr()}`);
    if (failures.length > 0) {
      throw new Error(
        `${failures.length} cases failed (${replayHint(failed)}):\n  ` +
          failures.slice(0, 20).join("\n  "),
      );
    }
    assert(outcomes.refused > 10 && outcomes.delivered > 1000, "both sides were reached");
    assertEquals((await s.signal("SIGTERM")).code, 0, "clean stop");
  } finally {
    await s.stop();
    await w.rm();
  }
});
