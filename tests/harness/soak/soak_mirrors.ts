// The mirrors' soak: a primary `cli.ts serve` with steady
// ingest from stdin AND two network publishers (one over the publish socket,
// the client's `publisher()`; one over `POST`), two follower processes of it,
// and virtual subscribers that join, read, stall, leave and come back — each
// on any of the three servers at each visit (moving along the tree with its
// cursor and the stream id), each with its own frames (single, batch,
// batch+zstd decoded here, or the client library's default, zstd with a
// dictionary) and its own `where=` filter. Small segments and seals every
// few seconds keep chunking, adopting and merging going all the time.
//
// What it checks:
// - on the fly, every line a subscriber gets: offsets only go up, the row
//   matches its filter, and it is byte for byte the row that was fed or
//   published (every row is reproducible from its source, seq and index);
// - at the end, one pass over the primary's log: the stdin rows all there,
//   in order; every acknowledged publish frame there once, at its acked
//   offsets, as one commit; no frame there twice or in part; and, for each
//   subscriber, that what it got over all its visits is exactly the rows of
//   the log from where it started that match its filter (a digest and a
//   count: no gap, no duplicate, nothing extra);
// - each follower's log equals the primary's, byte for byte (a digest over
//   every row), and their chunks are the primary's;
// - `verify` passes on all three folders after a clean stop;
// - the memory of every server process all along (RSS from /proc, heap and
//   external from /_/metrics), with slopes over the last two thirds.
// Used by soak_mirrors_test.ts (bounded) and bench/e2e/soak_mirrors.ts (30 minutes).
import { join } from "node:path";
import { zstdDecompressSync } from "node:zlib";
import { freePort, rmrf, rng, tempDir, until } from "../util.ts";
import { type ServeProc, startServe } from "../serve.ts";
import { connect, publisher, type Where } from "../../../client/mod.ts";
import { closePayload, frame, RawConn } from "./raw_frames.ts";
import { rssMiB, sleep, verifyCli } from "./workload.ts";
import { postFrame } from "./post_frame.ts";
import { type MemorySample, MemorySampler, type MemoryTrend } from "./memory_samples.ts";

/** Options of {@linkcode runMirrorsSoak}. */
export interface MirrorsSoakOptions {
  /** How long to feed, publish and churn subscribers. */
  seconds: number;
  /** Virtual subscribers over raw sockets (the client library adds two more). @default 8 */
  subscribers?: number;
  /** Rows fed on stdin per second (the publishers add about as many again). @default 1000 */
  rowsPerSecond?: number;
  /** Seed of every random choice. @default a fresh one */
  seed?: number;
  /** Progress lines. @default nothing */
  log?: (line: string) => void;
  /** Seconds between progress lines. @default 10 */
  progressEvery?: number;
  /** Keep every memory sample in the report. @default false */
  samples?: boolean;
}

/** What the soak found. */
export interface MirrorsSoakReport {
  seed: number;
  seconds: number;
  /** Rows in the primary's log at the end: fed on stdin, and published. */
  rows: number;
  stdinRows: number;
  publishedFrames: number;
  /** Problems found; empty when all is well. */
  failures: string[];
  sessions: number;
  /** Visits by server: primary, follower 1, follower 2. */
  visits: [number, number, number];
  pauses: number;
  drops: number;
  tooSlow: number;
  rowsDelivered: number;
  /** Publisher reconnects and HTTP retries (none expected: nothing is killed). */
  publishRetries: number;
  /** Exit codes of the primary and followers on SIGTERM. */
  exits: number[];
  /** Memory of every server process (primary, follower-1, follower-2). */
  memory: Record<string, MemoryTrend>;
  memorySamples?: Record<string, MemorySample[]>;
}

const NAME = "trades";
const SCHEMA = {
  type: "object",
  properties: {
    src: { type: "string" },
    seq: { type: "integer" },
    i: { type: "integer" },
    sym: { type: "string" },
    px: { type: "number" },
    pad: { type: "string" },
  },
  required: ["src", "seq", "i", "sym", "px", "pad"],
  additionalProperties: false,
};

interface Row {
  src: string;
  seq: number;
  i: number;
  sym: string;
  px: number;
  pad: string;
}

/** Row `i` of frame `seq` of source `src`: keys in schema order (as stored). */
function makeRow(src: string, seq: number, i: number): Row {
  const h = (Math.imul(seq, 7919) + Math.imul(i, 104729) + src.length * 31) >>> 0;
  const sym = ["BTC", "ETH", "SOL"][h % 3];
  const pad = "abcdefghij".repeat(1 + (h % 9)).slice(0, h % 80);
  return { src, seq, i, sym, px: (h % 1000) / 10, pad };
}

/** The filters the subscribers use: the `where=` value and the same rule here. */
const FILTERS: { where: Where | null; match: (r: Row) => boolean }[] = [
  { where: null, match: () => true },
  { where: { sym: "ETH" }, match: (r) => r.sym === "ETH" },
  {
    where: { sym: ["ETH", "SOL"], px: { gte: 50 } },
    match: (r) => (r.sym === "ETH" || r.sym === "SOL") && r.px >= 50,
  },
];

type Mode = "single" | "batch" | "zstd" | "client";

/** FNV-1a of a string (a row's line), 32 bits. */
function lineHash(s: string): number {
  let h = 0x811c9dc5;
  for (let k = 0; k < s.length; k++) h = Math.imul(h ^ s.charCodeAt(k), 16777619);
  return h >>> 0;
}

/** A running digest of a sequence of lines: order matters. */
class Digest {
  a = 0;
  b = 7;
  n = 0;
  add(h: number): void {
    this.a = (Math.imul(this.a, 31) + h) >>> 0;
    this.b = (Math.imul(this.b ^ h, 0x01000193) + this.n) >>> 0;
    this.n++;
  }
  equals(o: Digest): boolean {
    return this.a === o.a && this.b === o.b && this.n === o.n;
  }
}

interface VirtualSub {
  id: number;
  mode: Mode;
  filter: number;
  /** Where it started (its first offset asked or given), and the next it wants. */
  start: number | null;
  next: number | null;
  last: number;
  got: Digest;
  failed: string | null;
}

const dec = new TextDecoder();

/** Reads a row line `[offset,msg]`: its offset and message. */
function splitLine(line: string): [number, string] {
  const comma = line.indexOf(",");
  return [Number(line.slice(1, comma)), line.slice(comma + 1, -1)];
}

/** Runs the soak and reports; never throws for what it finds (see `failures`). */
export async function runMirrorsSoak(o: MirrorsSoakOptions): Promise<MirrorsSoakReport> {
  const seed = o.seed ?? crypto.getRandomValues(new Uint32Array(1))[0];
  const rand = rng(seed);
  const rate = o.rowsPerSecond ?? 1000;
  const say = o.log ?? (() => {});
  const dir = await tempDir("streamcast-soak2-");
  const schemaPath = join(dir, "schema.json");
  await Deno.writeTextFile(schemaPath, JSON.stringify(SCHEMA));
  const pport = freePort();
  // A replay window smaller than the log: late readers catch up from chunks.
  const common = [
    "--segment-bytes",
    "262144",
    "--seal-every",
    "3",
    "--max-replay",
    "50000",
    "--log-level",
    "warn",
  ];
  const primaryArgs = [
    "--root",
    join(dir, "p"),
    "--port",
    String(pport),
    "--stream",
    `${NAME}=${schemaPath}`,
    "--stdin",
    NAME,
    "--publish",
    NAME,
    ...common,
  ];
  const followerArgs = (k: number, port: number) => [
    "--root",
    join(dir, `f${k}`),
    "--port",
    String(port),
    "--follow",
    `${NAME}=ws://127.0.0.1:${pport}/${NAME}`,
    "--follow-poll",
    "1",
    ...common,
  ];
  const failures: string[] = [];
  const report: MirrorsSoakReport = {
    seed,
    seconds: o.seconds,
    rows: 0,
    stdinRows: 0,
    publishedFrames: 0,
    failures,
    sessions: 0,
    visits: [0, 0, 0],
    pauses: 0,
    drops: 0,
    tooSlow: 0,
    rowsDelivered: 0,
    publishRetries: 0,
    exits: [],
    memory: {},
  };
  const servers: ServeProc[] = [];
  const memory = new MemorySampler();
  let running = true;
  const loops: Promise<void>[] = [];
  let pub: Awaited<ReturnType<typeof publisher>> | null = null;
  try {
    const primary = await startServe(primaryArgs, { stdin: true });
    servers.push(primary);
    for (const k of [1, 2]) servers.push(await startServe(followerArgs(k, freePort())));
    memory.add("primary", primary.proc.pid, primary.url);
    memory.add("follower-1", servers[1].proc.pid, servers[1].url);
    memory.add("follower-2", servers[2].proc.pid, servers[2].url);
    memory.start();
    const ports = servers.map((s) => Number(new URL(s.url).port));

    // Steady ingest on stdin: source "stdin", seq 1, 2, 3, ...
    let fed = 0;
    const perTick = Math.max(1, Math.round(rate / 100));
    loops.push((async () => {
      while (running) {
        let text = "";
        for (let k = 0; k < perTick; k++) text += JSON.stringify(makeRow("stdin", ++fed, 0)) + "\n";
        await primary.write(text);
        await sleep(10);
      }
    })());
    const streamId = (await head(primary)).stream_id as string;

    // The publishers: frames of 1-20 rows; what was acked, by "producer/seq".
    const acked = new Map<string, number>();
    const sentFrames = new Map<string, number>(); // producer/seq -> rows
    let pubError: string | null = null;
    pub = await publisher(`ws://127.0.0.1:${pport}/${NAME}`, {
      producer: "ws-1",
      maxInFlight: 16,
      onReconnect: () => report.publishRetries++,
    });
    const wsPub = pub;
    loops.push((async () => {
      const answers: Promise<void>[] = [];
      while (running && pubError === null) {
        if (wsPub.pending >= 16) {
          await sleep(2);
          continue;
        }
        const seq = wsPub.nextSeq;
        const n = 1 + Math.floor(rand() * 20);
        const rows = Array.from({ length: n }, (_, i) => makeRow("ws-1", seq, i));
        sentFrames.set(`ws-1/${seq}`, n);
        const p = wsPub.publish(rows).then((a) => {
          if (a.first === null || a.last! - a.first + 1 !== n) {
            pubError ??= `ws-1 frame ${seq}: answered ${JSON.stringify(a)}`;
          } else acked.set(`ws-1/${seq}`, a.first);
        }, (err) => {
          pubError ??= `ws-1 frame ${seq}: ${err.message}`;
        });
        answers.push(p);
        if (answers.length > 256) await Promise.all(answers.splice(0, 128));
        await sleep(10 + Math.floor(rand() * 10));
      }
      await Promise.all(answers);
    })());
    loops.push((async () => {
      let seq = 0;
      while (running && pubError === null) {
        seq++;
        const n = 1 + Math.floor(rand() * 20);
        const rows = Array.from({ length: n }, (_, i) => makeRow("http-1", seq, i));
        sentFrames.set(`http-1/${seq}`, n);
        try {
          const a = await postFrame(`${primary.url}/${NAME}`, "http-1", seq, rows, {
            attempts: 20,
            retryMs: 100,
            timeoutMs: 20_000,
            onRetry: (why) => {
              report.publishRetries++;
              say(`soak2: http-1 seq ${seq}: ${why}; again`);
            },
          });
          acked.set(`http-1/${seq}`, a!.first);
        } catch (err) {
          pubError ??= (err as Error).message;
          return;
        }
        await sleep(30 + Math.floor(rand() * 30));
      }
    })());

    const t0 = Date.now();
    const deadline = t0 + o.seconds * 1000;
    const progress = setInterval(() => {
      say(
        `soak2: ${((Date.now() - t0) / 1000).toFixed(0)} s, ${fed} rows fed, ${acked.size} ` +
          `frames acked, ${report.rowsDelivered} rows delivered in ${report.sessions} sessions; ` +
          `RSS ${servers.map((s) => rssMiB(s.proc.pid).toFixed(0)).join("/")} MiB`,
      );
    }, (o.progressEvery ?? 10) * 1000);

    // Checks and counts one line a subscriber got.
    const take = (v: VirtualSub, line: string, where: string): void => {
      const [offset, msg] = splitLine(line);
      if (!(offset > v.last)) throw new Error(`${where}: offset ${offset} after ${v.last}`);
      if (v.next !== null && offset < v.next) {
        throw new Error(`${where}: offset ${offset} before the ${v.next} asked for`);
      }
      const r = JSON.parse(msg) as Row;
      if (msg !== JSON.stringify(makeRow(r.src, r.seq, r.i))) {
        throw new Error(`${where}: at ${offset}, ${msg.slice(0, 80)} is not a row that was sent`);
      }
      if (!FILTERS[v.filter].match(r)) {
        throw new Error(`${where}: at ${offset}, ${msg.slice(0, 80)} does not match the filter`);
      }
      v.last = offset;
      v.next = offset + 1;
      v.got.add(lineHash(line));
      report.rowsDelivered++;
    };

    // One visit of a raw-socket subscriber to server `at`, until `until`, or
    // (with `to`) until it has every row below `to` (a filtered one: the
    // last matching row below `to`, given as `to`).
    const rawSession = async (
      v: VirtualSub,
      at: number,
      until: number,
      to: number | null,
    ): Promise<void> => {
      const f = FILTERS[v.filter];
      const frames = v.mode === "single" ? "single" : "batch";
      let q = `?frames=${frames}`;
      if (v.mode === "zstd") q += "&compress=zstd";
      if (f.where) q += `&where=${encodeURIComponent(JSON.stringify(f.where))}`;
      if (v.next !== null) q += `&offset=${v.next}&stream_id=${streamId}`;
      const where = `subscriber ${v.id} (${v.mode}) on server ${at} (${q})`;
      const { c, answer } = await RawConn.upgrade(ports[at], `/${NAME}${q}`);
      report.sessions++;
      report.visits[at]++;
      try {
        if (answer.status !== 101) throw new Error(`${where}: upgrade answered ${answer.status}`);
        const g = await c.readFrame(15_000);
        if (!g) throw new Error(`${where}: no greeting`);
        if (g.opcode === 8) {
          throw new Error(
            `${where}: refused ${(g.data[0] << 8) | g.data[1]} ${dec.decode(g.data.subarray(2))}`,
          );
        }
        const greeting = JSON.parse(dec.decode(g.data));
        if (greeting.stream_id !== streamId) {
          throw new Error(`${where}: greeting stream_id ${greeting.stream_id}`);
        }
        if (v.next === null) v.next = greeting.end_offset as number;
        v.start ??= v.next;
        const data = (fr: { opcode: number; data: Uint8Array }) => {
          if (v.mode === "zstd") {
            if (fr.opcode !== 2) throw new Error(`${where}: a text frame under compress=zstd`);
            for (const line of dec.decode(zstdDecompressSync(fr.data)).split("\n")) {
              take(v, line, where);
            }
          } else if (fr.opcode === 1) {
            for (const line of dec.decode(fr.data).split("\n")) take(v, line, where);
          } else if (fr.opcode !== 9 && fr.opcode !== 10) {
            throw new Error(`${where}: frame opcode ${fr.opcode}`);
          }
        };
        const pauseAt = to === null && rand() < 0.4 ? Date.now() + rand() * 3000 : Infinity;
        let paused = false;
        while (to !== null ? v.last < to : Date.now() < until) {
          if (!paused && Date.now() >= pauseAt) {
            paused = true;
            report.pauses++;
            c.pause();
            await sleep(1000 + rand() * 7000);
            c.resume();
          }
          const fr = await c.readFrame(
            to !== null ? 60_000 : Math.max(1, Math.min(until, pauseAt) - Date.now()),
          );
          if (!fr) {
            if (to !== null) {
              throw new Error(`${where}: no rows for 60 s while catching up to ${to}`);
            }
            continue;
          }
          if (fr.opcode === 8) {
            const code = fr.data.length >= 2 ? (fr.data[0] << 8) | fr.data[1] : 0;
            const reason = dec.decode(fr.data.subarray(2));
            if (code !== 4429) {
              throw new Error(`${where}: closed by the server with ${code} ${reason}`);
            }
            report.tooSlow++;
            const resume = JSON.parse(reason).resume as number;
            if (!(resume >= v.next!)) {
              throw new Error(`${where}: 4429 resume ${resume}, before the next row ${v.next}`);
            }
            v.next = resume;
            return;
          }
          data(fr);
        }
        if (to === null && rand() < 0.5) {
          report.drops++; // leave by dropping the connection
          return;
        }
        await c.write(frame(8, closePayload(1000)));
        const e = await c.ending(15_000, data);
        if (!(e.kind === "close" && e.code === 1000)) {
          throw new Error(`${where}: our close 1000 was answered by ${JSON.stringify(e)}`);
        }
      } finally {
        c.close();
      }
    };

    // One visit of a client-library subscriber (its default: zstd with a dictionary).
    const clientSession = async (
      v: VirtualSub,
      at: number,
      until: number,
      to: number | null,
    ): Promise<void> => {
      const f = FILTERS[v.filter];
      const where = `subscriber ${v.id} (client library) on server ${at}`;
      v.next ??= 1;
      v.start ??= v.next;
      const sub = await connect(`ws://127.0.0.1:${ports[at]}/${NAME}`, {
        offset: v.next,
        reconnect: false,
        ...(f.where ? { where: f.where } : {}),
      });
      report.sessions++;
      report.visits[at]++;
      const timer = to === null
        ? setTimeout(() => sub.close(), Math.max(1, until - Date.now()))
        : 0;
      const stall = to !== null ? setTimeout(() => sub.close(), 60_000) : 0;
      try {
        for await (const [, line] of sub.lines()) {
          take(v, line, where);
          if (to !== null && v.last >= to) break;
        }
      } finally {
        clearTimeout(timer);
        clearTimeout(stall);
        await sub.close();
      }
      if (to !== null && v.last < to) throw new Error(`${where}: ended at ${v.last} before ${to}`);
    };

    const subs: VirtualSub[] = [];
    const raw = o.subscribers ?? 8;
    const modes: Mode[] = ["single", "batch", "zstd"];
    for (let id = 0; id < raw + 2; id++) {
      subs.push({
        id,
        mode: id >= raw ? "client" : modes[id % 3],
        filter: id % FILTERS.length,
        start: null,
        next: id % 2 === 0 ? 1 : null,
        last: 0,
        got: new Digest(),
        failed: null,
      });
    }
    const visit = (v: VirtualSub, at: number, until: number, to: number | null) =>
      v.mode === "client" ? clientSession(v, at, until, to) : rawSession(v, at, until, to);
    await Promise.all(subs.map(async (v) => {
      try {
        while (Date.now() < deadline && pubError === null) {
          const at = Math.floor(rand() * 3);
          await visit(v, at, Math.min(deadline, Date.now() + 1000 + rand() * 5000), null);
          await sleep(rand() < 0.3 ? 0 : 200 + rand() * 3000);
        }
      } catch (err) {
        v.failed = err instanceof Error ? err.message : String(err);
      }
    }));
    while (Date.now() < deadline && pubError === null) await sleep(100);
    clearInterval(progress);
    memory.stop(); // memory is judged over the churn, not the end
    running = false;
    await Promise.all(loops);
    if (pubError) failures.push(`publishing: ${pubError}`);
    await pub.close();
    pub = null;
    report.stdinRows = fed;
    report.publishedFrames = acked.size;
    const expectRows = fed + [...sentFrames.values()].reduce((s, n) => s + n, 0);
    let end = 0;
    await until(async () => (end = await endOf(primary)) === expectRows + 1, 30_000).catch(
      () => {},
    );
    report.rows = end - 1;
    if (end !== expectRows + 1) {
      failures.push(`the primary ends at ${end}; ${expectRows} rows were fed or published`);
    }

    // One pass over the primary's log: the sources' rules, and what each
    // subscriber should have got.
    const want = subs.map(() => new Digest());
    const lastMatch = subs.map(() => 0);
    const full = new Digest();
    let stdinNext = 1;
    const framesSeen = new Map<string, number>();
    let prev: Row | null = null;
    const logProblem = (s: string) => {
      if (failures.length < 50) failures.push(`the primary's log: ${s}`);
    };
    await scan(ports[0], end, failures, (offset, line, msg) => {
      const h = lineHash(line);
      full.add(h);
      const r = JSON.parse(msg) as Row;
      if (r.src === "stdin") {
        if (r.seq !== stdinNext) logProblem(`stdin row ${r.seq} at ${offset}; ${stdinNext} due`);
        stdinNext = r.seq + 1;
      } else {
        const key = `${r.src}/${r.seq}`;
        if (r.i === 0) {
          if (framesSeen.has(key)) {
            logProblem(`frame ${key} at ${framesSeen.get(key)} and ${offset}`);
          }
          framesSeen.set(key, offset);
          const a = acked.get(key);
          if (a !== undefined && a !== offset) {
            logProblem(`frame ${key} at ${offset}, acked at ${a}`);
          }
        } else if (!(prev && prev.src === r.src && prev.seq === r.seq && prev.i === r.i - 1)) {
          logProblem(`row ${r.i} of frame ${key} at ${offset} is not next to row ${r.i - 1}`);
        }
        if (r.i === sentFrames.get(key)! - 1) framesSeen.set(key, -framesSeen.get(key)!);
      }
      prev = r;
      for (let k = 0; k < subs.length; k++) {
        const v = subs[k];
        if (v.start !== null && offset >= v.start && FILTERS[v.filter].match(r)) {
          want[k].add(h);
          lastMatch[k] = offset;
        }
      }
    });
    if (stdinNext !== fed + 1) logProblem(`stdin rows end at ${stdinNext - 1}; ${fed} were fed`);
    for (const key of sentFrames.keys()) {
      const at = framesSeen.get(key);
      if (at === undefined) logProblem(`frame ${key} was answered and is not there`);
      else if (at > 0) logProblem(`frame ${key} at ${at} is there in part`);
    }

    // Everyone catches up to the end, on a server of its choice.
    await Promise.all(subs.map(async (v, k) => {
      if (v.failed || v.start === null) return;
      try {
        if (v.last < lastMatch[k]) await visit(v, Math.floor(rand() * 3), Infinity, lastMatch[k]);
      } catch (err) {
        v.failed = err instanceof Error ? err.message : String(err);
      }
    }));
    subs.forEach((v, k) => {
      if (v.failed) failures.push(v.failed);
      else if (v.start === null) failures.push(`subscriber ${v.id} got no row`);
      else if (!v.got.equals(want[k])) {
        failures.push(
          `subscriber ${v.id} (${v.mode}, filter ${v.filter}) got ${v.got.n} rows from ${v.start} ` +
            `to ${v.last}; the log has ${want[k].n} matching rows from ${v.start} to ` +
            `${lastMatch[k]}, and they differ`,
        );
      }
    });

    // Each follower equals the primary: every row, and the chunks.
    for (const k of [1, 2]) {
      const what = `follower ${k}`;
      let fend = 0;
      await until(async () => (fend = await endOf(servers[k])) === end, 60_000).catch(() => {});
      if (fend !== end) {
        failures.push(`${what} ends at ${fend}, the primary at ${end}`);
        continue;
      }
      const d = new Digest();
      if (!await scan(ports[k], end, failures, (_o, line) => d.add(lineHash(line)))) continue;
      if (!d.equals(full)) failures.push(`${what}'s rows differ from the primary's`);
      const chunks = async (p: ServeProc) =>
        ((await (await fetch(`${p.url}/${NAME}/manifest`)).json()).chunks as { sha256: string }[])
          .map((c) => c.sha256).join();
      const same = await until(
        async () => (await chunks(servers[k])) === (await chunks(primary)),
        30_000,
      ).then(() => true, () => false);
      if (!same) failures.push(`${what}'s chunks are not the primary's`);
    }

    // A clean stop, then verify on every folder.
    for (const s of [...servers].reverse()) {
      report.exits.unshift((await s.signal("SIGTERM", 30_000)).code);
    }
    for (const [k, f] of ["p", "f1", "f2"].entries()) {
      const v = await verifyCli(join(dir, f, NAME));
      if (v.code !== 0) failures.push(`verify of server ${k}'s folder:\n${v.out}`);
    }
    for (const [k, s] of servers.entries()) {
      if (/Uncaught|panicked|request failed/.test(s.stderr())) {
        failures.push(`server ${k}'s stderr:\n${s.stderr().slice(-4000)}`);
      }
    }
    return report;
  } finally {
    running = false;
    memory.stop();
    report.memory = memory.report();
    if (o.samples) report.memorySamples = memory.samples();
    if (pub) await Promise.race([pub.close().catch(() => {}), sleep(2000)]);
    for (const s of servers) await s.stop();
    await Promise.race([Promise.all(loops), sleep(2000)]);
    await rmrf(dir);
  }
}

/** The head of the stream on `p`. */
async function head(p: ServeProc): Promise<{ stream_id: string; end_offset: number }> {
  return await (await fetch(`${p.url}/${NAME}/head`)).json();
}

/** The end offset of the stream on `p`. */
async function endOf(p: ServeProc): Promise<number> {
  return (await head(p)).end_offset;
}

/**
 * Reads rows 1..end-1 of the server on `port` (the client library), line by
 * line; false (with the reason in `failures`) when it could not.
 */
async function scan(
  port: number,
  end: number,
  failures: string[],
  each: (offset: number, line: string, msg: string) => void,
): Promise<boolean> {
  if (end <= 1) return true;
  let next = 1;
  try {
    // From the first row: older than the replay window, so the client
    // catches up from the chunks over HTTP, then the socket.
    const sub = await connect(`ws://127.0.0.1:${port}/${NAME}`, {
      offset: 1,
      reconnect: false,
      catchUp: true,
    });
    try {
      for await (const [offset, line] of sub.lines()) {
        if (offset !== next) throw new Error(`row ${offset} where ${next} was due`);
        each(offset, line, line.slice(line.indexOf(",") + 1, -1));
        if (++next === end) break;
      }
    } finally {
      await sub.close();
    }
    if (next !== end) throw new Error(`it ended at ${next}, not ${end}`);
    return true;
  } catch (err) {
    failures.push(`reading the log on port ${port}: ${(err as Error).message}`);
    return false;
  }
}
