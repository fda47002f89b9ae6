// The streamcast contender of bench/e2e/compress.ts: a durable stream served by
// `serve()`, the subscriber's URL picking plain batched or compress=zstd frames.
//
// usage: compress_server.ts CONFIG_JSON   (see CompressServerConfig)
//
// Prefills `prefill` rows, prints "READY", waits for `subs` subscribers, then
// publishes `rate` rows/s in commits of `tick` rows (paced by timers) until
// "stop" arrives on stdin; "mark" is answered with {t, cpuUs, rows, zstd}
// (zstd: frames compressed so far, from the stream's metrics).
import process from "node:process";
import { serve, Stream } from "../../mod.ts";
import { stdinLines } from "./stdin_lines.ts";

/** What the server does. */
export interface CompressServerConfig {
  /** Port on 127.0.0.1. */
  port: number;
  /** NDJSON file of the rows to publish, cycled through. */
  rows: string;
  /** The rows' JSON Schema. */
  schema: Record<string, unknown>;
  /** Rows stored before READY (for replay). */
  prefill: number;
  /** Subscribers to wait for before publishing. */
  subs: number;
  /** Rows/s; 0: publish nothing. */
  rate: number;
  /** Rows per commit (1: single sends). */
  tick: number;
}

const cfg: CompressServerConfig = JSON.parse(Deno.args[0]);
const cpu0 = process.cpuUsage();
const wall = () => performance.timeOrigin + performance.now();
const rows = (await Deno.readTextFile(cfg.rows)).trim().split("\n").map((l) => JSON.parse(l));
const root = await Deno.makeTempDir({ prefix: "streamcast-bench-compress-" });
const stream = await Stream.open("t", { schema: cfg.schema, root, maxReplay: null });
let published = 0;
let stopping = false;
for (let i = 0; i < cfg.prefill; i += 1000) {
  const n = Math.min(1000, cfg.prefill - i);
  await stream.sendMany(Array.from({ length: n }, (_, k) => rows[(i + k) % rows.length]));
}
const server = serve([stream], { port: cfg.port, onListen: () => {}, pingIntervalS: 0 });
console.log("READY");

async function commands(): Promise<void> {
  for await (const cmd of stdinLines()) {
    if (cmd === "mark") {
      const c = process.cpuUsage(cpu0);
      const text = server.metrics.render();
      const zstd = text.split("\n").filter((l) => l.startsWith("streamcast_zstd_frames_total{"))
        .reduce((n, l) => n + Number(l.split(" ").at(-1)), 0);
      console.log(JSON.stringify({ t: wall(), cpuUs: c.user + c.system, rows: published, zstd }));
    } else if (cmd === "stop") {
      stopping = true;
      await server.shutdown();
      await Deno.remove(root, { recursive: true });
      Deno.exit(0);
    }
  }
}
void commands();
while (stream.subscribers < cfg.subs) await new Promise((r) => setTimeout(r, 5));
if (cfg.rate > 0) {
  const t0 = performance.now();
  let i = cfg.prefill;
  while (!stopping) {
    const due = cfg.prefill + Math.floor((performance.now() - t0) * cfg.rate / 1000);
    while (i + cfg.tick <= due) {
      if (cfg.tick === 1) void stream.send(rows[i % rows.length]);
      else {
        void stream.sendMany(
          Array.from({ length: cfg.tick }, (_, k) => rows[(i + k) % rows.length]),
        );
      }
      i += cfg.tick;
    }
    published = i - cfg.prefill;
    const wait = t0 + (i + cfg.tick - cfg.prefill) * 1000 / cfg.rate - performance.now();
    await new Promise((r) => setTimeout(r, Math.max(0, wait)));
  }
}
