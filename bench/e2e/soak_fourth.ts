/**
 * The soak of a service left running: three real `cli.ts serve --cluster`
 * nodes (R = 2) on a real etcd, archiving to S3 (s3rver), with retention on
 * (`--retain-bytes` and `--retain-age` small enough that every node drops
 * chunks all through the run; `--replay-archive` serves what it dropped),
 * HS256 signed tokens that expire every minute or so and are minted again
 * (every client is closed with 4401 at its token's `exp` and reconnects on a
 * fresh one), and a keyed stream (`--key t=sym`). Producers are the
 * project's `publisher(urls)` with producer ids; subscribers are its
 * `connect(urls)`, from a snapshot (one of them starting after retention has
 * dropped history) or from offset 1, with row-level grants (the token's
 * `where`) and `where=`s of their own; two pollers read `GET /t/latest`
 * (one with a row-level grant).
 *
 * At the end, every check: each acknowledged row in the final log once, at
 * its offset; each subscriber's rows — the snapshot against a model of each
 * key's latest row, then every later row its grant and filter let through,
 * once, in order (no gap, no duplicate) — and nothing outside its grant;
 * each `/latest` answer against the model at its `Streamcast-End`; the three
 * nodes' snapshots equal at the end; every node dropped history by retention;
 * every client reconnected on fresh tokens; `verify` on each node's folder.
 *
 * All along: the RSS of every process (the three nodes, etcd, s3rver) every
 * second, with the nodes' JavaScript heap from /_/metrics, and the disk use
 * of every node's data folder every 10 s (chunks, segments, the rest); at
 * the end, the slope of each over the last `--window` minutes of the feed
 * (MiB/min, least squares), judged flat when the window's growth at that
 * slope is within 5% of the window's mean or under 1 MiB.
 *
 * ```text
 * deno run --config deno.dev.json -A bench/e2e/soak_fourth.ts [--minutes 30] [--window 20] [--seed N]
 *   [--retain-bytes 256KiB] [--retain-age 3m] [--seal-every 5] [--token-seconds 40-90] [--pace 20] [--out report.json]
 * ```
 *
 * Prints a progress line every minute, then the checks and the slopes, and
 * the JSON report on stdout (`--out` also writes it, with every sample).
 * Exits 1 when a check failed (a slope that is not flat is reported, not
 * failed: it is a measurement).
 *
 * @module
 */

import { join } from "node:path";
import { parseArgs } from "node:util";
import { connect } from "../../client/mod.ts";
import { startEtcd } from "../../tests/harness/etcd.ts";
import { startS3, stopS3 } from "../../tests/harness/s3.ts";
import { secretText } from "../../tests/harness/jwt.ts";
import { CLI, withTimeout } from "../../tests/harness/serve.ts";
import { type ServeNode, startServeNodes } from "../../tests/harness/serve_nodes.ts";
import { rmrf, rng, tempDir, until } from "../../tests/harness/util.ts";
import {
  memoryLevels,
  type MemorySample,
  MemorySampler,
  type MemoryTrend,
} from "../../tests/harness/soak/memory_samples.ts";
import {
  diskLevels,
  type DiskSample,
  DiskSampler,
  type DiskTrend,
} from "../../tests/harness/soak/disk_samples.ts";
import {
  SignedProducer,
  SOAK_SCHEMA,
  type SoakRow,
  TokenMint,
} from "../../tests/harness/soak/signed_clients.ts";
import {
  KeyedReader,
  LatestPoller,
  type LogRow,
  randomFilter,
  snapshotModel,
} from "../../tests/harness/soak/keyed_readers.ts";

const USAGE = `usage: soak_fourth.ts [--minutes 30] [--window 20] [--seed N] [--retain-bytes 256KiB]
                      [--retain-age 3m] [--seal-every 5] [--token-seconds 40-90] [--pace 20]
                      [--out report.json] [--step 5]
       soak_fourth.ts --levels report.json [--step 5]
  --minutes        how long the feed runs
  --window         the last minutes of the feed the slopes are taken over
  --seed           every random choice (default: a fresh one, printed)
  --retain-bytes   each node's --retain-bytes
  --retain-age     each node's --retain-age
  --seal-every     each node's --seal-every, seconds
  --token-seconds  the range of a token's lifetime, seconds (MIN-MAX)
  --pace           ms each producer pauses between sends
  --out            write the report, with every sample, to this JSON file
  --step           minutes per row of the levels table (mean RSS and disk use per step)
  --levels         print the levels table of a file --out wrote, and exit`;

const SYMS = Array.from({ length: 40 }, (_, i) => `S${String(i).padStart(2, "0")}`);
const READ_ALL = { read: ["*"] };

// The mean RSS of each process and disk use of each folder over every `step`
// minutes of the feed: a rise that stopped, told from one that goes on.
function printLevels(
  memory: Record<string, MemorySample[]>,
  disk: Record<string, DiskSample[]>,
  step: number,
): void {
  const f = (x: number) => Number.isFinite(x) ? x.toFixed(1).padStart(7) : "      -";
  console.error(`soak-fourth: levels by ${step}-minute step, mean MiB: RSS (JS heap used)`);
  for (const [name, list] of Object.entries(memory)) {
    const ls = memoryLevels(list, step);
    console.error(
      `soak-fourth: RSS  ${name.padEnd(6)}` +
        ls.map((l) => `${f(l.rss)} (${Number.isFinite(l.heapUsed) ? l.heapUsed.toFixed(0) : "-"})`)
          .join(""),
    );
  }
  console.error(`soak-fourth: levels by ${step}-minute step, mean MiB: disk total (chunks/other)`);
  for (const [name, list] of Object.entries(disk)) {
    console.error(
      `soak-fourth: disk ${name.padEnd(6)}` +
        diskLevels(list, step).map((l) =>
          `${f(l.total)} (${l.chunks.toFixed(2)}/${l.other.toFixed(2)})`
        ).join(""),
    );
  }
}

/** Whether a series is flat over the window: its growth there within 5% of its mean, or under 1 MiB. */
export function flat(slopeMiBPerMin: number, windowMinutes: number, meanMiB: number): boolean {
  const growth = slopeMiBPerMin * windowMinutes;
  return growth <= Math.max(1, 0.05 * meanMiB);
}

async function headOf(
  node: ServeNode,
  mint: TokenMint,
): Promise<Record<string, unknown> | null> {
  try {
    const res = await fetch(`${node.url}/t/head`, {
      headers: { authorization: `Bearer ${await mint.token("ops", READ_ALL)}` },
      signal: AbortSignal.timeout(3000),
    });
    return res.status === 200 ? await res.json() : (await res.body?.cancel(), null);
  } catch {
    return null;
  }
}

// Every row of the stream from offset 1 up to `end` − 1, through the socket of
// `node` (the rows retention dropped come from the archive: --replay-archive).
async function readLog(node: ServeNode, mint: TokenMint, end: number): Promise<LogRow[]> {
  const out: LogRow[] = [];
  if (end <= 1) return out;
  const sub = await connect<SoakRow>(`${node.ws}/t`, {
    offset: 1,
    catchUp: false,
    reconnect: true,
    token: mint.source("auditor", READ_ALL),
  });
  try {
    for await (const [offset, row] of sub) {
      out.push({ offset: offset!, row, text: JSON.stringify(row) });
      if (offset! >= end - 1) break;
    }
  } finally {
    await sub.close();
  }
  return out;
}

async function retentionDropped(node: ServeNode, mint: TokenMint): Promise<number> {
  const res = await fetch(`${node.url}/_/metrics`, {
    headers: { authorization: `Bearer ${await mint.token("ops", READ_ALL)}` },
  });
  const text = await res.text();
  const m = /^streamcast_retention_dropped_rows_total\{[^}]*stream="t"[^}]*\} (\S+)$/m.exec(text);
  return m ? Number(m[1]) : NaN;
}

async function verify(dir: string): Promise<string | null> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "verify", dir],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  if (out.code === 0) return null;
  const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
  return `verify ${dir} exited ${out.code}: ${text.trim().split("\n").slice(-3).join(" | ")}`;
}

/** One check of the end: its name, whether it passed, and what it found. */
interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

/** Runs the soak with command-line flags; resolves with the exit code. */
export async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      minutes: { type: "string", default: "30" },
      window: { type: "string", default: "20" },
      seed: { type: "string" },
      "retain-bytes": { type: "string", default: "256KiB" },
      "retain-age": { type: "string", default: "3m" },
      "seal-every": { type: "string", default: "5" },
      "token-seconds": { type: "string", default: "40-90" },
      pace: { type: "string", default: "20" },
      out: { type: "string" },
      step: { type: "string", default: "5" },
      levels: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const step = Number(values.step);
  if (!(step > 0)) {
    throw new RangeError(`--step must be a positive number of minutes, got ${values.step}`);
  }
  if (values.levels !== undefined) {
    const saved = JSON.parse(await Deno.readTextFile(values.levels));
    if (typeof saved?.memorySamples !== "object" || typeof saved?.diskSamples !== "object") {
      throw new TypeError(`${values.levels}: no samples (not a file soak_fourth.ts --out wrote)`);
    }
    printLevels(saved.memorySamples, saved.diskSamples, step);
    return 0;
  }
  const minutes = Number(values.minutes);
  const window = Number(values.window);
  if (!(minutes > 0)) {
    throw new RangeError(`--minutes must be a positive number, got ${values.minutes}`);
  }
  if (!(window > 0)) {
    throw new RangeError(`--window must be a positive number, got ${values.window}`);
  }
  const life = /^(\d+)-(\d+)$/.exec(values["token-seconds"]);
  if (!life || Number(life[1]) < 5 || Number(life[2]) < Number(life[1])) {
    throw new RangeError(
      `--token-seconds must be MIN-MAX, 5 ≤ MIN ≤ MAX, got ${values["token-seconds"]}`,
    );
  }
  const seed = values.seed === undefined
    ? crypto.getRandomValues(new Uint32Array(1))[0]
    : Number(values.seed) >>> 0;
  const random = rng(seed);
  const say = (line: string) => console.error(`soak-fourth: ${line}`);
  say(
    `seed ${seed}, ${minutes} min, window ${window} min, retain ${values["retain-bytes"]} / ${
      values["retain-age"]
    }, seal every ${values["seal-every"]} s, tokens live ${values["token-seconds"]} s`,
  );

  const root = await tempDir("streamcast-soak4-");
  const secret = secretText();
  await Deno.writeTextFile(join(root, "secret"), secret);
  const mint = new TokenMint(
    new TextEncoder().encode(secret),
    Number(life[1]),
    Number(life[2]),
    random,
  );
  await using etcd = await startEtcd();
  const s3 = await startS3();
  const memory = new MemorySampler();
  const disk = new DiskSampler();
  const checks: Check[] = [];
  const check = (name: string, ok: boolean, detail: string) => {
    checks.push({ name, ok, detail });
    say(`${ok ? "PASS" : "FAIL"} ${name}: ${detail}`);
  };
  let report: Record<string, unknown> = {};
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], {
      etcd: etcd.url,
      replicas: 2,
      leaseSeconds: 3,
      extra: [
        ...["--key", "t=sym"],
        ...["--archive", "s3://archive/soak4", "--s3-endpoint", s3.endpoint, "--s3-path-style"],
        "--replay-archive",
        // The final read starts at offset 1, far past the default replay bound.
        ...["--max-replay", "none"],
        ...["--retain-bytes", values["retain-bytes"], "--retain-age", values["retain-age"]],
        ...["--seal-every", values["seal-every"]],
        ...["--jwt-secret-file", join(root, "secret")],
        ...["--cluster-token", secretText()],
      ],
    }, SOAK_SCHEMA);
    const urls = nodes.map((n) => `${n.ws}/t`);
    const opsToken = mint.source("ops", READ_ALL);
    for (const n of nodes) {
      memory.add(n.name, n.pid, n.url, opsToken);
      disk.add(n.name, n.root);
    }
    memory.add("etcd", etcd.pid);
    if (s3.pid !== null) memory.add("s3rver", s3.pid);
    disk.add("s3rver", s3.dir);
    memory.start(1000, 5, 0);
    disk.start(10_000);
    // A leader, as every node's head says.
    await until(async () => {
      const heads = await Promise.all(nodes.map((n) => headOf(n, mint)));
      return heads.some((h) => (h?.cluster as { role?: string })?.role === "leader");
    }, 60_000);

    const producers = ["feed-a", "feed-b", "feed-c"].map((id) =>
      new SignedProducer(id, SYMS, random, 4, Number(values.pace))
    );
    await Promise.all(producers.map((p) => p.start(urls, mint)));
    const f = () => randomFilter(random, SYMS);
    // [reader, seconds into the run it starts at]
    const readers: [KeyedReader, number][] = [
      [new KeyedReader("all-from-1", null, null, 1), 0],
      [new KeyedReader("granted-from-1", f(), null, 1), 0],
      [new KeyedReader("granted-where-from-1", f(), f(), 1), 0],
      [new KeyedReader("where-from-1", null, f(), 1), 0],
      [new KeyedReader("snapshot", null, null, "snapshot"), 30],
      [new KeyedReader("granted-snapshot", f(), null, "snapshot"), 60],
      [new KeyedReader("granted-where-snapshot", f(), f(), "snapshot"), 90],
      // After retention has dropped history: the snapshot still has every key.
      [new KeyedReader("late-snapshot", f(), null, "snapshot"), Math.round(minutes * 30)],
    ];
    for (const [r] of readers) {
      say(`reader ${r.name}: grant ${JSON.stringify(r.grant)}, where ${JSON.stringify(r.own)}`);
    }
    const pollers = [
      new LatestPoller("latest", null, nodes, mint),
      new LatestPoller("granted-latest", f(), nodes, mint),
    ];
    for (const p of pollers) p.start(5000);

    const t0 = Date.now();
    const feedMs = minutes * 60_000;
    let nextProgress = 60_000;
    const started = new Set<KeyedReader>();
    while (Date.now() - t0 < feedMs) {
      const at = Date.now() - t0;
      for (const [r, s] of readers) {
        if (!started.has(r) && at >= s * 1000) {
          started.add(r);
          await r.start(urls, mint);
          if (r.from === "snapshot") {
            say(`reader ${r.name}: snapshot ${JSON.stringify(r.snapshot)}`);
          }
        }
      }
      if (at >= nextProgress) {
        nextProgress += 60_000;
        const heads = await Promise.all(nodes.map((n) => headOf(n, mint)));
        const rss = memory.samples();
        const du = disk.samples();
        say(
          `min ${Math.round(at / 60_000)}: ` +
            nodes.map((n, i) => {
              const h = heads[i];
              return `${n.name} ${(h?.cluster as { role?: string })?.role ?? "?"} end ${
                h?.end_offset ?? "?"
              } rss ${rss[n.name]?.at(-1)?.rss.toFixed(0)} disk ${
                ["total", "chunks", "segments", "other"].map((k) =>
                  du[n.name]?.at(-1)?.[k as "total"].toFixed(2)
                ).join("/")
              }`;
            }).join(", ") +
            `; tokens ${mint.total}; reconnects: producers ${
              producers.map((p) => p.reconnects).join("/")
            }, readers ${readers.map(([r]) => r.reconnects).join("/")}`,
        );
      }
      await new Promise((r) => setTimeout(r, 500));
    }

    // The feed ends: the samples stop, the clients are answered.
    memory.stop();
    disk.stop();
    // The levels and the slopes, of the feed alone (the checks after it are not sampled).
    printLevels(memory.samples(), disk.samples(), step);
    const mem: Record<string, MemoryTrend> = memory.report(window);
    const du: Record<string, DiskTrend> = disk.report(window);
    const judged: Record<string, unknown> = {};
    for (const [name, m] of Object.entries(mem)) {
      const mean = (m.rssWindowStartMiB + m.rssWindowEndMiB) / 2;
      const isFlat = flat(m.rssSlopeMiBPerMin, m.windowMinutes, mean);
      judged[`rss ${name}`] = isFlat;
      say(
        `RSS ${name.padEnd(6)}: ${m.rssFirstMiB.toFixed(0)} -> ${
          m.rssLastMiB.toFixed(0)
        } MiB (max ${m.rssMaxMiB.toFixed(0)}), window ${m.windowMinutes.toFixed(1)} min: ${
          m.rssWindowStartMiB.toFixed(0)
        } -> ${m.rssWindowEndMiB.toFixed(0)} MiB, slope ${
          m.rssSlopeMiBPerMin.toFixed(3)
        } MiB/min (JS heap ${m.heapUsedSlopeMiBPerMin.toFixed(3)}, external ${
          m.externalSlopeMiBPerMin.toFixed(3)
        }): ${isFlat ? "flat" : "NOT FLAT"}`,
      );
    }
    for (const [name, d] of Object.entries(du)) {
      const mean = (d.windowStartMiB + d.windowEndMiB) / 2;
      const isFlat = flat(d.totalSlopeMiBPerMin, d.windowMinutes, mean);
      // The archive keeps everything by design: reported, not judged.
      if (name !== "s3rver") judged[`disk ${name}`] = isFlat;
      say(
        `disk ${name.padEnd(6)}: ${d.firstMiB.toFixed(1)} -> ${d.lastMiB.toFixed(1)} MiB (max ${
          d.maxMiB.toFixed(1)
        }), window ${d.windowMinutes.toFixed(1)} min: ${d.windowStartMiB.toFixed(1)} -> ${
          d.windowEndMiB.toFixed(1)
        } MiB, slope ${d.totalSlopeMiBPerMin.toFixed(3)} MiB/min (chunks ${
          d.chunksSlopeMiBPerMin.toFixed(3)
        }, segments ${d.segmentsSlopeMiBPerMin.toFixed(3)}, other ${
          d.otherSlopeMiBPerMin.toFixed(3)
        })${name === "s3rver" ? " (the archive: not judged)" : isFlat ? ": flat" : ": NOT FLAT"}`,
      );
    }
    if (values.out) {
      await Deno.writeTextFile(
        values.out,
        JSON.stringify({
          seed,
          minutes,
          window,
          memory: mem,
          disk: du,
          flat: judged,
          memorySamples: memory.samples(),
          diskSamples: disk.samples(),
        }),
      );
    }
    for (const p of pollers) p.stop();
    await Promise.all(producers.map((p) => withTimeout(p.stop(), 180_000, `${p.id} to stop`)));
    say(`fed: ${producers.map((p) => `${p.id} ${p.acked.size} acked`).join(", ")}`);

    let rows = 0;
    try {
      // Every node at one end.
      let end = 0;
      await until(async () => {
        const heads = await Promise.all(nodes.map((n) => headOf(n, mint)));
        const ends = heads.map((h) => h?.end_offset as number | undefined);
        if (ends.some((e) => e === undefined) || new Set(ends).size !== 1) return false;
        end = ends[0]!;
        return true;
      }, 60_000);
      const leader = nodes[0];
      const log = await withTimeout(readLog(leader, mint, end), 600_000, "the final log");
      rows = log.length;
      say(`final log: ${log.length} rows, end ${end}`);

      // 1. Every acknowledged row once, at its offset; no row twice.
      {
        const bad: string[] = [];
        const contiguous = log.every((r, i) => r.offset === i + 1);
        if (!contiguous || log.length !== end - 1) bad.push(`the log is not offsets 1..${end - 1}`);
        const seen = new Map<string, number>();
        for (const r of log) {
          const k = `${r.row.src}/${r.row.seq}`;
          seen.set(k, (seen.get(k) ?? 0) + 1);
        }
        let acked = 0;
        for (const p of producers) {
          bad.push(...p.problems.slice(0, 3));
          for (const [seq, offset] of p.acked) {
            acked++;
            const r = log[offset - 1];
            const sent = JSON.stringify(p.sent.get(seq));
            if (r?.text !== sent) {
              bad.push(`${p.id} seq ${seq} acked at ${offset}: log has ${r?.text}`);
            }
          }
          for (const seq of p.answerLost) {
            if (seen.get(`${p.id}/${seq}`) !== 1) {
              bad.push(`${p.id} seq ${seq} (answer lost) not once`);
            }
          }
        }
        const twice = [...seen].filter(([, n]) => n > 1);
        if (twice.length) bad.push(`${twice.length} rows twice, e.g. ${twice[0][0]}`);
        check(
          "acked rows present once",
          bad.length === 0,
          bad.length ? bad.slice(0, 5).join("; ") : `${acked} acked rows, ${log.length} in the log`,
        );
      }

      // 2. The readers: wait until each has what it should, then check.
      // The readers that started (a feed shorter than a reader's start leaves it out).
      const ran = readers.filter(([r]) => started.has(r));
      // The offset of the last row a reader should get: the last its filter passes
      // from where it started, or else the last of its snapshot.
      const expectedLast = (r: KeyedReader) => {
        const start = r.from === "snapshot" ? (r.snapshot?.end ?? 1) : r.from;
        for (let i = log.length - 1; i >= 0 && log[i].offset >= start; i--) {
          if (r.test(log[i].row)) return log[i].offset;
        }
        if (r.snapshot === null) return 0;
        return snapshotModel(log, r.snapshot.end, r.test).at(-1)?.offset ?? 0;
      };
      await until(
        () => ran.every(([r]) => r.last >= expectedLast(r) || r.ended !== null),
        120_000,
      ).catch(() => {});
      await Promise.allSettled(ran.map(([r]) => withTimeout(r.stop(), 10_000, r.name)));
      let violations = 0;
      for (const [r] of ran) {
        const c = r.check(log, end);
        violations += c.grantViolations;
        const ok = c.problems.length === 0 && r.ended === null;
        check(
          `reader ${r.name}`,
          ok,
          ok
            ? `${r.rows.length} rows${
              r.snapshot ? ` (snapshot of ${r.snapshot.keys} keys at ${r.snapshot.end})` : ""
            }, ${r.reconnects} reconnects`
            : [r.ended ?? "", ...c.problems].filter((x) => x).slice(0, 4).join("; "),
        );
      }
      check("grants honoured", violations === 0, `${violations} rows outside a grant`);

      // 3. /latest against the model at each answer's end.
      for (const p of pollers) {
        const c = p.check(log);
        check(
          `/latest ${p.name}`,
          c.wrong === 0 && c.problems.length === 0 && c.checked > 0,
          c.problems.length
            ? c.problems.slice(0, 3).join("; ")
            : `${c.checked} answers match the model`,
        );
      }

      // 4. The nodes' snapshots at the end: equal, and the model's.
      {
        const want = snapshotModel(log, end, () => true).map((r) => `[${r.offset},${r.text}]`);
        const bad: string[] = [];
        for (const n of nodes) {
          const res = await fetch(`${n.url}/t/latest`, {
            headers: { authorization: `Bearer ${await mint.token("ops", READ_ALL)}` },
          });
          const lines = (await res.text()).split("\n").filter((l) => l !== "").map((l) => {
            const comma = l.indexOf(",");
            return `[${l.slice(1, comma)},${JSON.stringify(JSON.parse(l.slice(comma + 1, -1)))}]`;
          });
          if (res.headers.get("streamcast-end") !== String(end)) {
            bad.push(`${n.name}'s end ${res.headers.get("streamcast-end")}`);
          }
          if (JSON.stringify(lines) !== JSON.stringify(want)) {
            bad.push(`${n.name}'s snapshot differs`);
          }
        }
        check(
          "snapshots at the end",
          bad.length === 0,
          bad.length ? bad.join("; ") : `${want.length} keys on each node`,
        );
      }

      // 5. Retention dropped history on every node (its head's earliest stays 1:
      // --replay-archive serves the rest from the archive).
      {
        const dropped = await Promise.all(nodes.map((n) => retentionDropped(n, mint)));
        const heads = await Promise.all(nodes.map((n) => headOf(n, mint)));
        const held = heads.map((h) => h?.bytes as number | undefined);
        check(
          "retention dropped history",
          dropped.every((d) => d > 0),
          nodes.map((n, i) => `${n.name} dropped ${dropped[i]} rows, holds ${held[i]} B`).join(
            ", ",
          ),
        );
      }

      // 6. Every client reconnected on fresh tokens.
      {
        const counts = [
          ...producers.map((p) => [p.id, p.reconnects] as const),
          ...ran.map(([r]) => [r.name, r.reconnects] as const),
        ];
        check(
          "tokens expired and were renewed",
          counts.every(([, n]) => n > 0) || minutes * 60 < Number(life[2]),
          `${mint.total} tokens minted; reconnects ${
            counts.map(([k, n]) => `${k} ${n}`).join(", ")
          }`,
        );
      }

      // 7. verify on each node's folder, the nodes stopped.
      await Promise.all(nodes.map((n) => n.stop()));
      for (const n of nodes) {
        const bad = await verify(join(n.root, "t"));
        check(`verify ${n.name}`, bad === null, bad ?? "ok");
      }
    } catch (err) {
      // A check that could not run is a failed check; the report is still written.
      check("the checks ran", false, String(err).split("\n")[0]);
    }
    report = {
      seed,
      minutes,
      window,
      flags: {
        retainBytes: values["retain-bytes"],
        retainAge: values["retain-age"],
        sealEvery: values["seal-every"],
        tokenSeconds: values["token-seconds"],
        pace: values.pace,
      },
      rows,
      tokens: mint.total,
      checks,
      flat: judged,
      memory: mem,
      disk: du,
    };
    if (values.out) {
      await Deno.writeTextFile(
        values.out,
        JSON.stringify(
          { ...report, memorySamples: memory.samples(), diskSamples: disk.samples() },
          null,
          1,
        ),
      );
    }
  } finally {
    memory.stop();
    disk.stop();
    await stopS3(s3);
    await rmrf(root);
  }
  console.log(JSON.stringify(report, null, 1));
  const failed = checks.filter((c) => !c.ok);
  say(failed.length ? `${failed.length} checks FAILED` : `all ${checks.length} checks passed`);
  return failed.length || checks.length === 0 ? 1 : 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
