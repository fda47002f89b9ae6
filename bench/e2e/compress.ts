/**
 * compress=zstd (docs/SPEC.md §2.6) against plain batched frames and against
 * per-connection permessage-deflate (a Node `ws` server with
 * perMessageDeflate on), in the same run, on 127.0.0.1:
 *
 * - bytes per row on the wire (bytes read off the subscriber's TCP socket:
 *   frames, headers and compression included), for the 6-column trade row and
 *   for a nested row (the trade row plus an order book serialised as JSON in a
 *   string column), live at 500 rows/s (one row per commit) and at replay;
 * - server CPU per delivered row at 1/100/1000 subscribers, live at 500
 *   rows/s in commits of 10 rows (every contender sends the same frames;
 *   streamcast's group commit may merge commits when fsync is slow), the
 *   median of three rounds;
 * - replay's server CPU per row (one subscriber): what compressing each
 *   catch-up read costs;
 * - compress=zstd-dict (the stream's raw-content dictionary, libzstd through
 *   FFI) beside the three, and what the `zstd` command makes of the same
 *   single-row frames with raw-content and trained dictionaries.
 *
 * Run alone: deno run --config deno.dev.json -A bench/run.ts --only compress [--quick]
 */
import { ensureNodeWs, freePort, Proc, sleep } from "../harness/contenders.ts";
import {
  type BenchRow,
  benchRow as row,
  type BenchSection,
  renderSection,
} from "../harness/report.ts";
import { SCHEMA } from "../../tests/harness/trades.ts";
import { type Kind, rowsOf } from "../harness/compress_rows.ts";
import type { CompressServerConfig } from "../harness/compress_server.ts";
import { zstdFrame } from "../../server/frames/compressed_frames.ts";
import { browserDecode } from "../harness/browser_zstd.ts";

const NESTED_SCHEMA = {
  type: "object",
  properties: { ...SCHEMA.properties, book: { type: "string" } },
  required: [...SCHEMA.required, "book"],
};

/** A way of sending the rows: streamcast's frames (plain, compressed) or Node `ws` with permessage-deflate. */
export type Contender = "plain" | "zstd" | "zstd-dict" | "zstd-stream" | "deflate";

const files = new Map<Kind, string>();
async function rowsFile(kind: Kind): Promise<string> {
  let f = files.get(kind);
  if (!f) {
    f = await Deno.makeTempFile({ prefix: `streamcast-bench-${kind}-`, suffix: ".ndjson" });
    await Deno.writeTextFile(f, rowsOf(kind, 20_000).join("\n") + "\n");
    files.set(kind, f);
  }
  return f;
}

/** One measured run: rows delivered, bytes read, server CPU, compressions, rows published. */
export interface Run {
  rows: number;
  bytes: number;
  serverCpuUs: number;
  zstdFrames: number;
  published: number;
}

function startServer(c: Contender, cfg: CompressServerConfig): Proc {
  return c === "deflate"
    ? new Proc("deflate", "node", ["bench/harness/compress_node.mjs", JSON.stringify(cfg)])
    : new Proc(c, Deno.execPath(), [
      "run",
      "--config",
      "deno.dev.json",
      "-A",
      "bench/harness/compress_server.ts",
      JSON.stringify(cfg),
    ]);
}

function urlOf(c: Contender, port: number, query = ""): string {
  if (c === "deflate") return `ws://127.0.0.1:${port}/`;
  const z = c === "plain" ? "" : `&compress=${c}`;
  return `ws://127.0.0.1:${port}/t?frames=batch${z}${query}`;
}

function startClient(c: Contender, url: string, subs: number, until?: number): Proc {
  const cfg = {
    url,
    subs,
    deflate: c === "deflate",
    stream: c === "zstd-stream",
    ...(until ? { until } : {}),
  };
  return new Proc("client", Deno.execPath(), [
    "run",
    "--config",
    "deno.dev.json",
    "-A",
    "bench/harness/compress_client.ts",
    JSON.stringify(cfg),
  ]);
}

/** Live: `rate` rows/s in commits (frames) of `tick` rows to `subs` subscribers, over `seconds`. */
export async function live(
  c: Contender,
  kind: Kind,
  subs: number,
  rate: number,
  tick: number,
  seconds: number,
): Promise<Run> {
  const port = freePort();
  const schema = kind === "trade" ? SCHEMA : NESTED_SCHEMA;
  const server = startServer(c, {
    port,
    rows: await rowsFile(kind),
    schema,
    // zstd-dict: rows in the log before the subscribers come, for the dictionary.
    prefill: c === "zstd-dict" ? 1000 : 0,
    subs,
    rate,
    tick,
  });
  let client: Proc | null = null;
  try {
    await server.line((l) => l === "READY");
    client = startClient(c, urlOf(c, port), subs);
    await client.line((l) => l === "OPEN", 120_000);
    await sleep(1000); // warm-up
    const [s0, c0] = await Promise.all([server.mark(), client.mark()]);
    await sleep(seconds * 1000);
    const [s1, c1] = await Promise.all([server.mark(), client.mark()]);
    return {
      rows: (c1.rows as number) - (c0.rows as number),
      bytes: (c1.bytes as number) - (c0.bytes as number),
      serverCpuUs: (s1.cpuUs as number) - (s0.cpuUs as number),
      zstdFrames: ((s1.zstd as number) ?? 0) - ((s0.zstd as number) ?? 0),
      published: (s1.rows as number) - (s0.rows as number),
    };
  } finally {
    await client?.stop();
    await server.stop();
  }
}

/** Replay: one subscriber reads `n` stored rows from offset 1. */
async function replay(c: Contender, kind: Kind, n: number): Promise<Run> {
  const port = freePort();
  const schema = kind === "trade" ? SCHEMA : NESTED_SCHEMA;
  const server = startServer(c, {
    port,
    rows: await rowsFile(kind),
    schema,
    prefill: n,
    subs: 0,
    rate: 0,
    tick: 1,
  });
  try {
    await server.line((l) => l === "READY", 120_000);
    const s0 = await server.mark();
    const client = startClient(c, urlOf(c, port, "&offset=1"), 1, n);
    const r = JSON.parse(await client.line((l) => l.startsWith("{"), 120_000));
    await client.child.status;
    const s1 = await server.mark();
    return {
      rows: r.rows,
      bytes: r.bytes,
      serverCpuUs: (s1.cpuUs as number) - (s0.cpuUs as number),
      zstdFrames: ((s1.zstd as number) ?? 0) - ((s0.zstd as number) ?? 0),
      published: n,
    };
  } finally {
    await server.stop();
  }
}

// Sizes of single-row live frames compressed by the zstd command with a
// dictionary: raw content (the `dictRows` rows before them) and trained
// (`zstd --train` on earlier frames). Returns bytes per frame, averaged.
async function dictionaryBytes(kind: Kind, dictRows: number): Promise<
  { none: number; raw: number; trained: number; plain: number; dictBytes: number }
> {
  const rows = rowsOf(kind, 6000);
  const frame = (i: number) => `[${i + 1},${rows[i]}]`;
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-dict-" });
  try {
    const sample = Array.from({ length: 300 }, (_, k) => 5000 + k);
    await Deno.mkdir(`${dir}/in`);
    await Deno.mkdir(`${dir}/train`);
    for (const i of sample) await Deno.writeTextFile(`${dir}/in/${i}`, frame(i));
    const raw = Array.from({ length: dictRows }, (_, k) => frame(5000 - dictRows + k)).join("\n");
    await Deno.writeTextFile(`${dir}/raw.dict`, raw);
    for (let i = 0; i < 4000; i++) await Deno.writeTextFile(`${dir}/train/${i}`, frame(i));
    const zstd = async (args: string[]) => {
      const o = await new Deno.Command("zstd", { args, stdout: "null", stderr: "piped" }).output();
      if (!o.success) {
        throw new Error(`zstd ${args.join(" ")}: ${new TextDecoder().decode(o.stderr)}`);
      }
    };
    await zstd([
      "-q",
      "--train",
      "-r",
      `${dir}/train`,
      "-o",
      `${dir}/trained.dict`,
      "--maxdict=16384",
    ]);
    const sizes = async (dict: string) => {
      const out = `${dir}/out-${dict}`;
      await Deno.mkdir(out);
      await zstd(["-q", "-1", "-D", `${dir}/${dict}`, "--output-dir-flat", out, "-r", `${dir}/in`]);
      let total = 0;
      for await (const e of Deno.readDir(out)) total += (await Deno.stat(`${out}/${e.name}`)).size;
      return total / sample.length;
    };
    const none = sample.reduce((n, i) => n + zstdFrame(frame(i)).length, 0) / sample.length;
    const plain = sample.reduce((n, i) => n + frame(i).length, 0) / sample.length;
    return {
      none,
      plain,
      raw: await sizes("raw.dict"),
      trained: await sizes("trained.dict"),
      dictBytes: (await Deno.stat(`${dir}/trained.dict`)).size,
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Runs the compress benchmarks. */
export async function run(quick: boolean): Promise<BenchSection[]> {
  await ensureNodeWs();
  const only = Deno.env.get("BENCH_COMPRESS_SUBS"); // one subscriber count, CPU only (for probing)
  const seconds = quick ? 2 : 4;
  const replayRows = quick ? 10_000 : 20_000;
  const bytesRows: BenchRow[] = [];
  const notes: string[] = [];
  for (const kind of (only ? [] : ["trade", "nested"]) as Kind[]) {
    const r: Record<string, Run> = {};
    for (const c of ["plain", "zstd", "zstd-dict", "deflate"] as Contender[]) {
      r[c] = await live(c, kind, 1, 500, 1, seconds);
      r[`${c}-replay`] = await replay(c, kind, replayRows);
    }
    const per = (x: Run) => x.bytes / x.rows;
    bytesRows.push(
      row(
        `${kind} row, live 500 rows/s (1 row/commit): zstd vs plain`,
        per(r.zstd),
        per(r.plain),
        "B/row",
      ),
      row(
        `${kind} row, live 500 rows/s (1 row/commit): zstd + dictionary vs plain`,
        per(r["zstd-dict"]),
        per(r.plain),
        "B/row",
        "",
        null,
        `zstd without: ${per(r.zstd).toFixed(1)} B/row`,
      ),
      row(
        `${kind} row, live 500 rows/s: permessage-deflate vs plain`,
        per(r.deflate),
        per(r.plain),
        "B/row",
      ),
      row(
        `${kind} row, replay: zstd vs plain`,
        per(r["zstd-replay"]),
        per(r["plain-replay"]),
        "B/row",
      ),
      row(
        `${kind} row, replay: zstd + dictionary vs plain`,
        per(r["zstd-dict-replay"]),
        per(r["plain-replay"]),
        "B/row",
      ),
      row(
        `${kind} row, replay: permessage-deflate vs plain`,
        per(r["deflate-replay"]),
        per(r["plain-replay"]),
        "B/row",
      ),
      row(
        `${kind} row, replay server CPU: zstd vs plain`,
        r["zstd-replay"].serverCpuUs * 1000 / r["zstd-replay"].rows,
        r["plain-replay"].serverCpuUs * 1000 / r["plain-replay"].rows,
        "ns/row",
      ),
      row(
        `${kind} row, replay server CPU: permessage-deflate vs plain`,
        r["deflate-replay"].serverCpuUs * 1000 / r["deflate-replay"].rows,
        r["plain-replay"].serverCpuUs * 1000 / r["plain-replay"].rows,
        "ns/row",
      ),
    );
    const d = await dictionaryBytes(kind, 128);
    bytesRows.push(
      row(
        `${kind} row, one row per frame: zstd, raw-content dictionary (128 rows) vs none`,
        d.raw,
        d.none,
        "B/row",
        "",
        null,
        "zstd command, -1",
      ),
      row(
        `${kind} row, one row per frame: zstd, trained dictionary (${d.dictBytes} B) vs none`,
        d.trained,
        d.none,
        "B/row",
        "",
        null,
        "zstd --train on 4000 earlier frames",
      ),
      row(
        `${kind} row, one row per frame: zstd (no dictionary) vs the text`,
        d.none,
        d.plain,
        "B/row",
      ),
    );
  }
  const cpuRows: BenchRow[] = [];
  for (const subs of only ? [Number(only)] : quick ? [1, 100] : [1, 100, 1000]) {
    const r: Record<string, Run> = {};
    // Rounds of the three in turn; each contender's median round (by CPU per
    // delivered row), so a burst of load elsewhere on the machine hits all three alike.
    const rounds: Record<string, Run[]> = { plain: [], zstd: [], "zstd-dict": [], deflate: [] };
    for (let k = 0; k < (quick ? 1 : 3); k++) {
      for (const c of ["plain", "zstd", "zstd-dict", "deflate"] as Contender[]) {
        const x = await live(c, "trade", subs, 500, 10, seconds);
        console.error(`bench: compress ${subs} subscribers ${c}: ${JSON.stringify(x)}`);
        rounds[c].push(x);
      }
    }
    const per = (x: Run) => x.serverCpuUs * 1000 / x.rows;
    for (const c of Object.keys(rounds)) {
      r[c] = [...rounds[c]].sort((a, b) => per(a) - per(b))[rounds[c].length >> 1];
    }
    const ratio = per(r.zstd) / per(r.plain);
    cpuRows.push(
      row(
        `${subs} subscribers: zstd vs plain batch`,
        per(r.zstd),
        per(r.plain),
        "ns/delivered row",
        subs === 1000 ? "≤ 1.2×" : "",
        subs === 1000 ? ratio <= 1.2 : null,
        `${r.zstd.zstdFrames} zstd compressions for ${r.zstd.published} rows published ` +
          `(${(r.zstd.rows / Math.max(1, r.zstd.published)).toFixed(0)} deliveries per row)`,
      ),
      row(
        `${subs} subscribers: zstd + dictionary vs plain batch`,
        per(r["zstd-dict"]),
        per(r.plain),
        "ns/delivered row",
        "",
        null,
        `${r["zstd-dict"].zstdFrames} compressions for ${r["zstd-dict"].published} rows published`,
      ),
      row(
        `${subs} subscribers: permessage-deflate vs plain batch`,
        per(r.deflate),
        per(r.plain),
        "ns/delivered row",
        "",
        null,
        `delivered ${r.deflate.rows} of ${r.deflate.published * subs} rows`,
      ),
    );
  }
  notes.push(
    "Bytes are read off each subscriber's TCP socket (the `ws` client's bytesRead), so WebSocket " +
      "headers and the greeting count. permessage-deflate: Node `ws` with perMessageDeflate " +
      "{threshold: 0} (context kept per connection), the `ws` client negotiating it.",
  );
  const lines = rowsOf("trade", 20_000).map((r, i) => `[${i + 1},${r}]`);
  const browserRows: BenchRow[] = (only ? [] : await browserDecode(lines, [1, 10, 4096])).map((d) =>
    row(
      `${d.rows} row${d.rows > 1 ? "s" : ""} per frame: fzstd decode vs JSON.parse of the rows`,
      d.decodeNs,
      d.parseNs,
      "ns/row",
    )
  );
  return [
    {
      title: "compress=zstd in the browser: decoding with fzstd (pure JS) in Chromium",
      baseline:
        "what the client does with each plain frame anyway: split the lines and JSON.parse " +
        "each (trade rows), in the same page",
      rows: browserRows,
    },
    {
      title: "compress=zstd: bytes per row on the wire",
      baseline: "plain batched text frames (frames=batch), same server, same rows, same run",
      rows: bytesRows,
      notes,
    },
    {
      title: "compress=zstd: server CPU per delivered row (live, 500 rows/s in commits of 10)",
      baseline: "plain batched text frames (frames=batch), same server, same run",
      rows: cpuRows,
    },
  ];
}

if (import.meta.main) {
  for (const s of await run(Deno.args.includes("--quick"))) console.log(renderSection(s));
}
