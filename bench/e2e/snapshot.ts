/**
 * A keyed stream's snapshot to one subscriber: the time from opening the
 * socket to the first live row, for a snapshot of 100,000 keys
 * (`?snapshot=1&frames=batch`: the latest row of each key, then live),
 * against the way to the same state without a key — replaying the whole log
 * from offset 1 (`?offset=1&frames=batch`), here 4 rows a key, 400,000 rows —
 * in the same run. The server is a `cli.ts serve` child process (fsync on,
 * the default); the subscriber, and the publisher of the live row (POSTed
 * once the greeting came), are this process.
 *
 * Run alone: deno run -A bench/e2e/snapshot.ts [--quick]
 */
import { type BenchSection, median, renderSection } from "../harness/report.ts";
import { startServe } from "../../tests/harness/serve.ts";
import { freePort } from "../../tests/harness/util.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";

const KEYS = 100_000;

/** Ms from opening `url` to the first row at or after the greeting's start (the live row). */
function firstLiveMs(
  url: string,
  publish: () => Promise<void>,
): Promise<{ ms: number; rows: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const ws = new WebSocket(url);
    let live = -1;
    let rows = 0;
    ws.onmessage = (e) => {
      const text = e.data as string;
      if (live === -1) {
        const g = JSON.parse(text);
        live = g.snapshot ? g.snapshot.end : g.end_offset;
        publish().catch(reject);
        return;
      }
      // The last line of a batch is its highest offset.
      const lines = text.split("\n");
      rows += lines.length;
      const last = lines[lines.length - 1];
      if (Number(last.slice(1, last.indexOf(","))) >= live) {
        const ms = performance.now() - t0;
        ws.onmessage = null;
        ws.onclose = () => resolve({ ms, rows });
        ws.close();
      }
    };
    ws.onerror = () => {};
    ws.onclose = (e) => reject(new Error(`closed ${e.code} ${e.reason} before the live row`));
  });
}

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const root = await Deno.makeTempDir({ prefix: "streamcast-snapshot-bench-" });
  const schema = `${root}/trades.json`;
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  const port = freePort();
  const proc = await startServe([
    "--stream",
    `t=${schema}`,
    "--publish",
    "t",
    "--key",
    "t=trade_id",
    "--max-replay",
    "none",
    "--root",
    `${root}/data`,
    "--port",
    String(port),
    "--log-level",
    "warn",
  ]);
  const http = `http://127.0.0.1:${port}`;
  const ws = `ws://127.0.0.1:${port}/t`;
  try {
    const make = tradeRows(5);
    const rowsPerKey = 4;
    const total = KEYS * rowsPerKey;
    const batch = 10_000;
    for (let i = 0; i < total; i += batch) {
      let body = "";
      for (let k = i; k < i + batch; k++) {
        const row = make(k);
        row.trade_id = 100_000_000 + (k % KEYS);
        body += JSON.stringify(row) + "\n";
      }
      const res = await fetch(`${http}/t`, {
        method: "POST",
        headers: { "content-type": "application/x-ndjson" },
        body,
      });
      if (res.status !== 200) throw new Error(`POST: ${res.status} ${await res.text()}`);
      await res.body?.cancel();
    }
    let live = total;
    const publish = async () => {
      const row = make(++live);
      const res = await fetch(`${http}/t`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify([row]),
      });
      await res.body?.cancel();
    };
    const rounds = quick ? 3 : 9;
    const snap: number[] = [];
    const replay: number[] = [];
    let snapRows = 0;
    let replayRows = 0;
    await firstLiveMs(`${ws}?snapshot=1&frames=batch`, publish); // warm-up
    for (let r = 0; r < rounds; r++) {
      // Alternate which goes first, so neither always finds a warmer cache.
      const a = () => firstLiveMs(`${ws}?snapshot=1&frames=batch`, publish);
      const b = () => firstLiveMs(`${ws}?offset=1&frames=batch`, publish);
      let x, y;
      if (r % 2 === 0) {
        x = await a();
        y = await b();
      } else {
        y = await b();
        x = await a();
      }
      snap.push(x.ms);
      replay.push(y.ms);
      snapRows = x.rows;
      replayRows = y.rows;
    }
    const ours = median(snap);
    const base = median(replay);
    return {
      title: "Keyed streams: a snapshot of 100,000 keys to one subscriber",
      baseline: "replaying the whole log from offset 1 (400,000 rows: 4 a key) to reach the " +
        "same state, same server, same run",
      rows: [{
        case: "time from the socket's open to the first live row, median",
        ours,
        baseline: base,
        unit: "ms",
        ratio: ours / base,
        target: "",
        met: null,
      }],
      notes: [
        `A \`cli.ts serve\` child with \`--key t=trade_id\` holding ${
          total.toLocaleString("en")
        } ` +
        `trade rows over ${KEYS.toLocaleString("en")} keys; the subscriber (frames=batch) ` +
        `POSTs one row as its greeting arrives and stops at it. The snapshot sent ` +
        `${snapRows.toLocaleString("en")} rows, the replay ${replayRows.toLocaleString("en")} ` +
        `(the live row included); median of ${rounds} of each, alternated.`,
      ],
    };
  } finally {
    await proc.stop();
    await Deno.remove(root, { recursive: true });
  }
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
