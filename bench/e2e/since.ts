/**
 * `since=` resolution on a log of ≥ 1 GiB: the greeting latency of a
 * `since=T` subscribe (the server resolves T through the log's time lookup:
 * a binary search over the segments' times, then one segment's beacons, then
 * at most about two beacon intervals of records) against a plain `offset=N`
 * subscribe at the same offset, in the same run, through a real server on
 * 127.0.0.1. Also the lookup alone (`Log.offsetAt`) and what it read.
 *
 * The log is built with big rows and fsync off (seconds, not minutes), with an
 * injected clock so every commit has its own time, and deleted afterwards.
 *
 * Run alone: deno run -A bench/e2e/since.ts [--quick]
 */
import { serve } from "../../server/serve.ts";
import { Stream } from "../../server/stream/stream.ts";
import { lookupStats } from "../../log/read/time_seek.ts";
import { type BenchSection, median, renderSection } from "../harness/report.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, pad: { type: "string" } },
  required: ["i", "pad"],
};

const ROW_BYTES = 4096;
const ROWS_PER_COMMIT = 256; // 1 MiB per commit

function p99(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))];
}

/** Milliseconds from opening a socket at `url` to its first frame (the greeting). */
function greetingMs(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const ws = new WebSocket(url);
    ws.onmessage = (e) => {
      const ms = performance.now() - t0;
      const g = JSON.parse(e.data as string);
      ws.onmessage = null;
      ws.close();
      if (!g.streamcast) reject(new Error(`not a greeting: ${e.data}`));
      else ws.onclose = () => resolve(ms);
    };
    ws.onerror = () => {};
    ws.onclose = (e) => reject(new Error(`closed ${e.code} ${e.reason} before a greeting`));
  });
}

/** Runs the benchmark; `quick` builds the same 1 GiB log but times fewer subscribes. */
export async function run(quick: boolean): Promise<BenchSection> {
  const root = await Deno.makeTempDir({ prefix: "streamcast-since-bench-" });
  try {
    let now = Date.UTC(2026, 0, 1);
    const stream = await Stream.open("big", {
      schema: SCHEMA,
      root,
      maxReplay: null,
      logOptions: { fsync: false, chunks: false, timers: false, sealEveryMs: 0, clock: () => now },
    });
    const log = stream.log!;
    const enc = new TextEncoder();
    const pad = "p".repeat(ROW_BYTES - 30);
    const target = 1 << 30;
    const t0 = performance.now();
    let i = 0;
    while (log.sizeBytes < target) {
      now += 7; // ms between commits
      const rows = Array.from(
        { length: ROWS_PER_COMMIT },
        () => enc.encode(`{"i":${++i},"pad":"${pad}"}`),
      );
      await log.appendMany(rows);
    }
    const buildS = (performance.now() - t0) / 1000;
    const sizeGiB = log.sizeBytes / (1 << 30);
    const firstUs = log.segments()[0].firstTimeUs;
    const lastUs = log.segments().at(-1)!.lastTimeUs;
    console.error(
      `since bench: built ${sizeGiB.toFixed(2)} GiB (${i} rows, ${log.segments().length} ` +
        `segments) in ${buildS.toFixed(1)} s`,
    );

    const server = serve([stream], { port: 0, onListen: () => {} });
    const ws = `ws://127.0.0.1:${server.addr.port}/big`;
    const n = quick ? 40 : 200;
    const sinceMs: number[] = [];
    const offsetMs: number[] = [];
    const lookupMs: number[] = [];
    let reads = 0;
    let bytes = 0;
    let seed = 12345;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    try {
      // Warm both paths once.
      await greetingMs(`${ws}?since=${firstUs}`);
      await greetingMs(`${ws}?offset=1`);
      for (let k = 0; k < n; k++) {
        const us = Math.floor(firstUs + rand() * (lastUs - firstUs));
        const stats = lookupStats();
        const l0 = performance.now();
        const at = await log.offsetAt(us, stats);
        lookupMs.push(performance.now() - l0);
        reads = Math.max(reads, stats.reads);
        bytes = Math.max(bytes, stats.bytes);
        // Alternate which goes first, so neither always finds a warmer cache.
        if (k % 2 === 0) {
          sinceMs.push(await greetingMs(`${ws}?since=${us}`));
          offsetMs.push(await greetingMs(`${ws}?offset=${at.offset}`));
        } else {
          offsetMs.push(await greetingMs(`${ws}?offset=${at.offset}`));
          sinceMs.push(await greetingMs(`${ws}?since=${us}`));
        }
      }
    } finally {
      await server.shutdown();
    }
    const ratio = median(sinceMs) / median(offsetMs);
    const note = `${sizeGiB.toFixed(2)} GiB log, ${log.segments().length} segments of 64 MiB, ` +
      `1 MiB beacons; ${n} random times`;
    return {
      title: "since= resolution on a 1 GiB log",
      baseline: "a plain `offset=` subscribe at the offset the time resolves to, same run",
      rows: [
        {
          case: "greeting latency, median",
          ours: median(sinceMs),
          baseline: median(offsetMs),
          unit: "ms",
          ratio,
          target: "",
          met: null,
          note,
        },
        {
          case: "greeting latency, p99",
          ours: p99(sinceMs),
          baseline: p99(offsetMs),
          unit: "ms",
          ratio: p99(sinceMs) / p99(offsetMs),
          target: "",
          met: null,
        },
      ],
      notes: [
        `The lookup alone (\`Log.offsetAt\`, in-process): median ${
          median(lookupMs).toFixed(3)
        } ms, p99 ${p99(lookupMs).toFixed(3)} ms; at most ${reads} beacon reads ` +
        `of 40 bytes and ${(bytes / 1024).toFixed(0)} KiB of records per lookup. ` +
        `Built with fsync off in ${buildS.toFixed(0)} s; the server runs in the ` +
        `benchmark's process.`,
      ],
    };
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

if (import.meta.main) {
  console.log(renderSection(await run(Deno.args.includes("--quick"))));
}
