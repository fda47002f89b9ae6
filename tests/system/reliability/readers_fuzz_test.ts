// Fuzzing the log's readers with damaged files: segment files and chunk files
// made by a real Log, then flipped, truncated, shifted, overwritten or
// replaced by random bytes, a few hundred cases per run, seeded.
//
// What must hold for every case (docs/SPEC.md §1.5 "Opening and recovery"):
// - `Log.open` either succeeds — and then every row it serves is one that was
//   written, at its offset, byte-identical, with nothing missing before the
//   damage (only a torn tail of the LAST segment may be cut) — or throws
//   `LogCorruptError` naming the damaged file and a byte position in it;
// - damage followed by intact records is corruption, never a torn tail:
//   open must refuse it rather than cut the intact records off;
// - `verifyLog` never throws; it reports, and it reports every log that open
//   refuses and every damaged sealed segment or chunk;
// - a `LogReader` over a damaged chunk throws `ChunkCorruptError` or
//   `LogCorruptError`, or returns only correct rows — all of them;
// - nothing hangs (each case is bounded) and no other error type escapes.
//
// Seeds (see tests/harness/seeds.ts): a fresh random seed every run, printed, plus the
// regression seeds; STREAMCAST_FUZZ_SEED=N replays seed N alone. Every
// failure message names the seed and the case.
import { join } from "node:path";
import { assert } from "../../harness/assert.ts";
import { ChunkCorruptError, Log, LogCorruptError, verifyLog } from "../../../log/mod.ts";
import { parseSegmentFileName } from "../../../log/segment/format.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import {
  mutate,
  type Mutation,
  MUTATIONS,
  type RecordSpan,
  recordSpans,
} from "../../harness/mutate.ts";
import {
  caseName,
  caseRng,
  type FuzzCase,
  fuzzCases,
  replayHint,
  seedBanner,
} from "../../harness/seeds.ts";

console.log(seedBanner("readers fuzz"));
const BEACON = 1024;
const SEGMENT_BYTES = 8192;
/** The active segment of the fixtures is filled to at least this size (so it has beacons). */
const ACTIVE_BYTES = 5600;
/** Rows in the fixtures (the same for both: the writes are deterministic). */
let ROWS = 0;
const CASE_MS = 10_000;

/** The payload written at `offset`: reproducible, 30 to ~3000 bytes, some split by beacons. */
function payload(offset: number): string {
  const size = offset % 17 === 0 ? 1500 + (offset * 131) % 1500 : (offset * 7919) % 400;
  return `{"o":${offset},"p":"${"xy".repeat(size >> 1)}"}`;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

type Files = Map<string, Uint8Array>;

async function snapshot(dir: string, sub = ""): Promise<Files> {
  const out: Files = new Map();
  for await (const e of Deno.readDir(join(dir, sub))) {
    const rel = sub ? `${sub}/${e.name}` : e.name;
    if (e.isDirectory) {
      for (const [k, v] of await snapshot(dir, rel)) out.set(k, v);
    } else if (e.name !== "LOCK") {
      out.set(rel, await Deno.readFile(join(dir, rel)));
    }
  }
  return out;
}

async function materialize(files: Files): Promise<string> {
  const dir = await tempDir("streamcast-fuzz-");
  for (const [rel, bytes] of files) {
    if (rel.includes("/")) await Deno.mkdir(join(dir, rel, ".."), { recursive: true });
    await Deno.writeFile(join(dir, rel), bytes);
  }
  return dir;
}

/**
 * Writes 200 rows in mixed single appends and batches, then single rows until
 * the active segment holds several beacons; returns the number of rows.
 */
async function writeRows(log: Log): Promise<number> {
  let o = 1;
  while (o <= 200) {
    const n = 1 + (o % 7);
    if (n === 1) await log.append(enc.encode(payload(o)));
    else await log.appendMany(Array.from({ length: n }, (_, k) => enc.encode(payload(o + k))));
    o += n;
  }
  while (log.segments().at(-1)!.size < ACTIVE_BYTES) await log.append(enc.encode(payload(o++)));
  return o - 1;
}

/** A log of sealed segments and an active one (no chunks). */
async function segmentFixture(): Promise<Files> {
  const dir = await tempDir("streamcast-fuzz-fixture-");
  try {
    const log = await Log.open(dir, {
      beaconInterval: BEACON,
      segmentBytes: SEGMENT_BYTES,
      timers: false,
    });
    ROWS = await writeRows(log);
    await log.close();
    return await snapshot(dir);
  } finally {
    await rmrf(dir);
  }
}

/** A log whose sealed history is chunks (and a manifest), plus the active segment. */
async function chunkFixture(): Promise<Files> {
  const dir = await tempDir("streamcast-fuzz-fixture-");
  try {
    // No merging: every chunk stays listed (a merged-away chunk is only kept
    // for its grace period, and readers never open it).
    const log = await Log.open(dir, {
      chunks: { fanIn: 1000 },
      beaconInterval: BEACON,
      segmentBytes: SEGMENT_BYTES,
      timers: false,
    });
    ROWS = await writeRows(log);
    await log.chunks.settled();
    await log.close();
    return await snapshot(dir);
  } finally {
    await rmrf(dir);
  }
}

async function bounded<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`HANG: ${what} took over ${CASE_MS} ms`)),
          CASE_MS,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

interface ReadResult {
  rows: number;
  /** The error that stopped the read, if any. */
  error: unknown;
}

/** Reads the log from `from`, checking every row; rows must be contiguous and correct. */
async function readChecked(log: Log, from: number, where: string): Promise<ReadResult> {
  const r = log.reader(from);
  let expect = from;
  let rows = 0;
  try {
    while (true) {
      const b = await r.read(16 * 1024);
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) {
        const got = dec.decode(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]));
        assert(
          b.offsets[i] === expect,
          `${where}: reader from ${from} returned offset ${b.offsets[i]} where ${expect} was due`,
        );
        assert(
          got === payload(expect),
          `${where}: row ${expect} is not the row written: ${got.slice(0, 80)}`,
        );
        expect++;
        rows++;
      }
    }
    return { rows, error: null };
  } catch (err) {
    if (err instanceof Error && err.name === "AssertionError") throw err;
    return { rows, error: err };
  } finally {
    r.close();
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

interface Tally {
  cases: number;
  failed: FuzzCase[];
  refused: number;
  opened: number;
  unchanged: number;
  failures: string[];
}

function newTally(): Tally {
  return { cases: 0, failed: [], refused: 0, opened: 0, unchanged: 0, failures: [] };
}

function report(name: string, t: Tally): void {
  console.log(
    `${name}: ${t.cases} cases: ${t.refused} refused with LogCorruptError, ` +
      `${t.opened} opened, ${t.unchanged} unchanged; ${t.failures.length} failures`,
  );
  if (t.failures.length > 0) {
    // How often each kind of failure came up (numbers and paths blanked out).
    const kinds = new Map<string, number>();
    for (const f of t.failures) {
      const k = f.replace(/^.*?\): /, "").replace(/\/tmp\/\S+/g, "FILE").replace(/\d+/g, "N");
      kinds.set(k, (kinds.get(k) ?? 0) + 1);
    }
    console.log([...kinds].map(([k, n]) => `  ${n} × ${k}`).join("\n"));
    const shown = t.failures.slice(0, 12).join("\n  ");
    throw new Error(
      `${t.failures.length} of ${t.cases} cases failed (${replayHint(t.failed)}):\n  ${shown}`,
    );
  }
}

/** Whether record `s` of `orig` is still whole (perhaps shifted) in the damaged copy. */
function intact(s: RecordSpan, orig: Uint8Array, m: Mutation): boolean {
  if (m.bytes.length === orig.length && m.shift === 0 && m.intactFrom !== Infinity) {
    for (let i = s.start; i < s.end; i++) if (m.bytes[i] !== orig[i]) return false;
    return true;
  }
  return s.end <= m.first || s.start >= m.intactFrom;
}

/**
 * Runs one segment case: verify, open, read. Returns a failure message or null.
 * `segNames` are the fixture's segment files in order; `target` the damaged one.
 */
async function segmentCase(
  files: Files,
  target: string,
  m: Mutation,
  segNames: string[],
  rand: () => number,
  where: string,
  tally: Tally,
): Promise<string | null> {
  const orig = files.get(target)!;
  const changed = m.bytes.length !== orig.length || m.first < orig.length;
  const last = target === segNames[segNames.length - 1];
  const first = parseSegmentFileName(target)!;
  const spans = recordSpans(orig, BEACON);
  const before = first - 1; // rows in the segments before the target
  let mustThrow: boolean;
  let mayThrow: boolean;
  let minRows: number;
  if (!changed) {
    tally.unchanged++;
    mustThrow = mayThrow = false;
    minRows = ROWS;
  } else if (!last) {
    // Every byte of a sealed segment is covered by a checksum.
    mustThrow = mayThrow = true;
    minRows = ROWS;
  } else if (m.first < 128) {
    // A damaged header: only a file too short to hold a record may be made anew.
    mustThrow = mayThrow = m.bytes.length >= 129;
    minRows = before;
  } else {
    // Damage in the active segment: rows wholly before it must survive. If an
    // intact record follows the damage, the damage is corruption, not a torn
    // tail: open must refuse when that record is contiguous in the file (so
    // recognisable without beacons), and may refuse when a beacon splits it.
    const after = spans.filter((s) => s.start >= m.first && intact(s, orig, m));
    mustThrow = after.some((s) => !s.split);
    mayThrow = after.length > 0;
    minRows = before + spans.filter((s) => s.end <= m.first).length;
  }
  const dir = await materialize(new Map([...files, [target, m.bytes]]));
  const path = join(dir, target);
  try {
    let verifyError: LogCorruptError | null = null;
    try {
      const rep = await bounded(verifyLog(dir), "verifyLog");
      verifyError = rep.error;
    } catch (err) {
      return `${where}: verifyLog threw instead of reporting: ${describe(err)}`;
    }
    if (changed && !last && verifyError === null) {
      return `${where}: verifyLog passed a damaged sealed segment`;
    }
    let log: Log;
    try {
      log = await bounded(
        Log.open(dir, { beaconInterval: BEACON, segmentBytes: SEGMENT_BYTES, timers: false }),
        "Log.open",
      );
    } catch (err) {
      if (!(err instanceof LogCorruptError)) {
        return `${where}: Log.open threw ${describe(err)} (only LogCorruptError is allowed)`;
      }
      tally.refused++;
      if (!mayThrow) {
        return `${where}: Log.open refused a log it should open (a torn tail at most): ${err.message}`;
      }
      if (err.path !== path) {
        return `${where}: LogCorruptError names ${err.path}, not the damaged ${path}: ${err.message}`;
      }
      if (!Number.isInteger(err.position) || err.position < 0 || err.position > m.bytes.length) {
        return `${where}: LogCorruptError position ${err.position} is not a byte of the file`;
      }
      if (verifyError === null) {
        return `${where}: Log.open refuses the log (${err.message}) but verifyLog passed it`;
      }
      return null;
    }
    tally.opened++;
    try {
      if (mustThrow) {
        const r = await bounded(readChecked(log, 1, where), "read");
        return `${where}: Log.open accepted damage followed by intact records ` +
          `(endOffset ${log.endOffset}, ${r.rows} rows readable of ${ROWS}; ` +
          `${last ? "active" : "sealed"} segment ${target})`;
      }
      const all = await bounded(readChecked(log, 1, where), "read");
      if (all.error) return `${where}: reading the opened log failed: ${describe(all.error)}`;
      if (all.rows < minRows) {
        return `${where}: only ${all.rows} rows survive; the ${minRows} rows before the ` +
          `damage (at byte ${m.first} of ${target}) must all be kept`;
      }
      if (log.endOffset !== all.rows + 1) {
        return `${where}: endOffset ${log.endOffset} but ${all.rows} rows are readable`;
      }
      if (all.rows > 0) {
        const from = 1 + Math.floor(rand() * all.rows);
        const part = await bounded(readChecked(log, from, where), "read from an offset");
        if (part.error || part.rows !== all.rows - from + 1) {
          return `${where}: reading from ${from} gave ${part.rows} rows (${describe(part.error)})`;
        }
      }
      // Appends continue right after what survived.
      const next = await bounded(log.append(enc.encode(payload(log.endOffset))), "append");
      if (next !== all.rows + 1) {
        return `${where}: the next append got ${next}, not ${all.rows + 1}`;
      }
      return null;
    } finally {
      await log.close();
    }
  } finally {
    await rmrf(dir);
  }
}

Deno.test("fuzz: damaged segment files are refused with LogCorruptError or cut only at a torn tail", async () => {
  const files = await segmentFixture();
  const segNames = [...files.keys()].filter((k) => k.endsWith(".seg")).sort();
  assert(segNames.length >= 5, `fixture has ${segNames.length} segments`);
  const tally = newTally();
  for (const c of fuzzCases(320, "segments")) {
    const rand = caseRng(c);
    // Half the cases hit the active segment, where recovery has choices to make.
    const target = rand() < 0.5
      ? segNames[segNames.length - 1]
      : segNames[Math.floor(rand() * (segNames.length - 1))];
    const kind = MUTATIONS[Math.floor(rand() * MUTATIONS.length)];
    const m = mutate(files.get(target)!, kind, rand);
    const where = `${caseName(c)} (${target}: ${m.what})`;
    tally.cases++;
    const failure = await segmentCase(files, target, m, segNames, rand, where, tally)
      .catch((err) => `${where}: ${describe(err)}`);
    if (failure) {
      tally.failures.push(failure);
      tally.failed.push(c);
    }
  }
  report("segments", tally);
});

Deno.test("fuzz: a segment file of random bytes is refused (or, if too short for a record, made anew at the tail)", async () => {
  const files = await segmentFixture();
  const segNames = [...files.keys()].filter((k) => k.endsWith(".seg")).sort();
  const tally = newTally();
  for (const c of fuzzCases(60, "random segment files")) {
    const rand = caseRng(c, 0x5eed);
    const target = segNames[c.index % segNames.length];
    const m = mutate(files.get(target)!, "whole", rand);
    const where = `${caseName(c, "random-file case")} (${target}: ${m.what})`;
    tally.cases++;
    const failure = await segmentCase(files, target, m, segNames, rand, where, tally)
      .catch((err) => `${where}: ${describe(err)}`);
    if (failure) {
      tally.failures.push(failure);
      tally.failed.push(c);
    }
  }
  report("random segment files", tally);
});

Deno.test("fuzz: damaged chunk files never yield a wrong row and are reported by verify", async () => {
  const files = await chunkFixture();
  const chunkNames = [...files.keys()].filter((k) => k.startsWith("chunks/")).sort();
  assert(chunkNames.length >= 2, `fixture has ${chunkNames.length} chunks`);
  const tally = newTally();
  let silent = 0;
  let threw = 0;
  for (const fc of fuzzCases(160, "chunks")) {
    const rand = caseRng(fc, 0xc4c4);
    const failed = tally.failures.length;
    const target = chunkNames[Math.floor(rand() * chunkNames.length)];
    const kind = MUTATIONS[Math.floor(rand() * MUTATIONS.length)];
    const orig = files.get(target)!;
    const m = mutate(orig, kind, rand);
    const where = `${caseName(fc, "chunk case")} (${target}: ${m.what})`;
    tally.cases++;
    const changed = m.bytes.length !== orig.length || m.first < orig.length;
    if (!changed) tally.unchanged++;
    const dir = await materialize(new Map([...files, [target, m.bytes]]));
    try {
      let verified: LogCorruptError | null;
      try {
        verified = (await bounded(verifyLog(dir), "verifyLog")).error;
      } catch (err) {
        tally.failures.push(`${where}: verifyLog threw instead of reporting: ${describe(err)}`);
        continue;
      }
      if (changed && verified === null) {
        tally.failures.push(`${where}: verifyLog passed a damaged chunk`);
      }
      let log: Log;
      try {
        log = await bounded(
          Log.open(dir, {
            chunks: { fanIn: 1000 },
            beaconInterval: BEACON,
            segmentBytes: SEGMENT_BYTES,
            timers: false,
          }),
          "Log.open",
        );
      } catch (err) {
        if (err instanceof LogCorruptError || err instanceof ChunkCorruptError) {
          tally.refused++;
          continue;
        }
        tally.failures.push(`${where}: Log.open threw ${describe(err)}`);
        continue;
      }
      tally.opened++;
      try {
        // From the start, and from inside the damaged chunk.
        const from = [1, 1 + Math.floor(rand() * ROWS)];
        for (const f of from) {
          let r: ReadResult;
          try {
            r = await bounded(readChecked(log, f, where), "read");
          } catch (err) {
            tally.failures.push(describe(err));
            break;
          }
          if (r.error === null) {
            if (r.rows !== ROWS - f + 1) {
              tally.failures.push(
                `${where}: reader from ${f} ended quietly after ${r.rows} of ${ROWS - f + 1} rows`,
              );
            } else if (changed) silent++;
          } else if (
            !(r.error instanceof ChunkCorruptError || r.error instanceof LogCorruptError)
          ) {
            tally.failures.push(
              `${where}: reader from ${f} threw ${describe(r.error)} ` +
                `(only ChunkCorruptError or LogCorruptError are allowed)`,
            );
          } else threw++;
        }
      } finally {
        await log.close();
      }
    } finally {
      await rmrf(dir);
      if (tally.failures.length > failed) tally.failed.push(fc);
    }
  }
  console.log(
    `chunks: reads stopped by a corruption error ${threw}, reads that got every row right ` +
      `despite the damage ${silent}`,
  );
  report("chunks", tally);
});

Deno.test("fuzz: a damaged manifest.json or log.json is reported by verify and refused by open with LogCorruptError", async () => {
  const files = await chunkFixture();
  const tally = newTally();
  for (const fc of fuzzCases(60, "metadata")) {
    const rand = caseRng(fc, 0x3e7a);
    const failed = tally.failures.length;
    const target = fc.index % 2 === 0 ? "manifest.json" : "log.json";
    const kind = MUTATIONS[Math.floor(rand() * MUTATIONS.length)];
    const orig = files.get(target)!;
    const m = mutate(orig, kind, rand);
    const where = `${caseName(fc, "metadata case")} (${target}: ${m.what})`;
    tally.cases++;
    const changed = m.bytes.length !== orig.length || m.first < orig.length;
    if (!changed) tally.unchanged++;
    const dir = await materialize(new Map([...files, [target, m.bytes]]));
    try {
      try {
        await bounded(verifyLog(dir), "verifyLog");
      } catch (err) {
        tally.failures.push(`${where}: verifyLog threw instead of reporting: ${describe(err)}`);
      }
      let log: Log;
      try {
        log = await bounded(
          Log.open(dir, {
            chunks: { fanIn: 1000 },
            beaconInterval: BEACON,
            segmentBytes: SEGMENT_BYTES,
            timers: false,
          }),
          "Log.open",
        );
      } catch (err) {
        if (err instanceof LogCorruptError) {
          tally.refused++;
          if (!err.path.endsWith(target)) {
            tally.failures.push(`${where}: LogCorruptError names ${err.path}: ${err.message}`);
          }
        } else {
          tally.failures.push(
            `${where}: Log.open threw ${describe(err)} (only LogCorruptError is allowed)`,
          );
        }
        continue;
      }
      tally.opened++;
      try {
        const r = await bounded(readChecked(log, 1, where), "read");
        if (r.error === null && r.rows !== ROWS) {
          tally.failures.push(`${where}: the reader ended quietly after ${r.rows} of ${ROWS} rows`);
        } else if (
          r.error !== null &&
          !(r.error instanceof ChunkCorruptError || r.error instanceof LogCorruptError)
        ) {
          tally.failures.push(`${where}: the reader threw ${describe(r.error)}`);
        }
      } catch (err) {
        tally.failures.push(describe(err));
      } finally {
        await log.close();
      }
    } finally {
      await rmrf(dir);
      if (tally.failures.length > failed) tally.failed.push(fc);
    }
  }
  report("metadata", tally);
});

Deno.test("fuzz: no one-bit flip anywhere in a chunk makes a LogReader hand out a wrong row", async () => {
  const files = await chunkFixture();
  const dir = await materialize(files);
  const log = await Log.open(dir, {
    chunks: { fanIn: 1000 },
    beaconInterval: BEACON,
    segmentBytes: SEGMENT_BYTES,
    timers: false,
  });
  const failures: string[] = [];
  let stopped = 0;
  let clean = 0;
  try {
    // Bit rot on disk under a chunk's name: the log keeps its manifest; every
    // read opens the file afresh.
    for (const c of log.chunks.manifest!.chunks.slice(0, 2)) {
      const path = join(dir, "chunks", `${c.sha256}.ndjson.zst`);
      const orig = files.get(`chunks/${c.sha256}.ndjson.zst`)!;
      for (let pos = 0; pos < orig.length; pos++) {
        const bytes = orig.slice();
        bytes[pos] ^= 1 << (pos % 8);
        await Deno.writeFile(path, bytes);
        const where = `chunk ${c.sha256.slice(0, 12)} (${orig.length} bytes) bit ${
          pos % 8
        } of byte ${pos}`;
        try {
          const r = await bounded(readChecked(log, c.first, where), "read");
          if (r.error === null) {
            if (r.rows !== ROWS - c.first + 1) {
              failures.push(`${where}: the reader ended quietly after ${r.rows} rows`);
            } else clean++;
          } else if (
            r.error instanceof ChunkCorruptError || r.error instanceof LogCorruptError
          ) stopped++;
          else failures.push(`${where}: the reader threw ${describe(r.error)}`);
        } catch (err) {
          failures.push(describe(err));
        }
      }
      await Deno.writeFile(path, orig);
    }
  } finally {
    await log.close();
    await rmrf(dir);
  }
  console.log(
    `one-bit flips: ${stopped} reads stopped by a corruption error, ${clean} read every row ` +
      `right, ${failures.length} handed out a wrong row or failed otherwise`,
  );
  if (failures.length > 0) {
    throw new Error(`${failures.length} flips went wrong:\n  ${failures.slice(0, 8).join("\n  ")}`);
  }
});
