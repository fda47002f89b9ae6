/**
 * streamcast against NATS, the peer users would most often pick instead, on
 * the two things both do: replaying stored history to a subscriber, and live
 * fan-out of published rows to many subscribers. Same trade rows, same
 * machine, same run; every NATS figure comes from Debian's `nats-server`
 * (JetStream on a file store) and `npm:nats`, and the bench fails, not
 * skips, when nats-server cannot start.
 *
 * - Replay: 1 M stored rows read from the first by one subscriber. Ours: the
 *   replay server (bench/e2e/replay.ts) to a batched WebSocket subscriber in a
 *   separate process; NATS: a JetStream pull consumer (no acks) in a separate
 *   process (bench/harness/nats_client.ts).
 * - Live fan-out at 1, 10 and 100 subscribers: rows published flat out from
 *   this process and counted at a separate load generator. Ours: `cli.ts
 *   serve --publish` (fsync on), the client's `publisher()` with 100-row
 *   frames, each acknowledged once durable, and `frames=batch` subscribers
 *   (bench/harness/fanout_client.ts). NATS JetStream: core publishes into the
 *   stream's subject (the fastest way into JetStream: no per-message ack),
 *   pull consumers (no acks) from new messages on. NATS core: plain subjects (no
 *   storage, no replay, no ack) — the ceiling of NATS itself.
 *
 * Run alone: deno run --config deno.dev.json -A bench/run.ts --only nats_peer [--quick]
 */
import { connect as natsConnect } from "nats";
import { publisher } from "../../client/publisher.ts";
import { type NatsServer, publishUnacked, startNats } from "../harness/nats.ts";
import { socketRate } from "./replay.ts";
import { fill } from "../harness/trade_log.ts";
import { makeRows, startServe } from "./publish.ts";
import { Proc, procCpuMs, sleep } from "../harness/contenders.ts";
import { type BenchRow, type BenchSection, renderSection } from "../harness/report.ts";
import { tradeRows } from "../../tests/harness/trades.ts";

const here = new URL(".", import.meta.url).pathname;
const enc = new TextEncoder();

async function nats(): Promise<NatsServer> {
  const n = await startNats();
  if ("missing" in n) throw new Error(`bench nats_peer: ${n.missing}`);
  return n;
}

interface Rate {
  rate: number;
  serverCpu: number;
  genCpu: number;
}

/** Replay of `rows` rows through NATS JetStream: an pull consumer (no acks) from the first message. */
async function natsReplay(rows: number): Promise<Rate> {
  const n = await nats();
  const nc = await natsConnect({ servers: n.url });
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: "REPLAY", subjects: ["replay.>"], storage: "file" as never });
    const make = tradeRows(7);
    const payloads = Array.from({ length: rows }, (_, i) => enc.encode(JSON.stringify(make(i))));
    await publishUnacked(nc, "REPLAY", "replay.rows", payloads, 1000, 120_000);
    const c0 = procCpuMs(n.pid);
    const t0 = performance.now();
    const gen = new Proc("nats replay generator", Deno.execPath(), [
      "run",
      "-A",
      "--config",
      `${here}../../deno.dev.json`,
      `${here}../harness/nats_client.ts`,
      JSON.stringify({
        url: n.url,
        subs: 1,
        mode: "replay",
        subject: "replay.rows",
        stream: "REPLAY",
        until: rows,
      }),
    ]);
    const r = JSON.parse(await gen.line((l) => l.startsWith("{"), 300_000));
    await gen.child.status;
    const wallMs = performance.now() - t0;
    return {
      rate: r.rows / (r.ms / 1000),
      genCpu: r.cpuUs / 1000 / r.ms * 100,
      serverCpu: (procCpuMs(n.pid) - c0) / wallMs * 100,
    };
  } finally {
    await nc.close();
    await n.stop();
  }
}

/** Replay of `rows` rows through streamcast (segments) to one batched subscriber. */
async function oursReplay(rows: number): Promise<Rate> {
  const root = await Deno.makeTempDir({ prefix: "streamcast-bench-peer-" });
  try {
    await fill(root, rows, false);
    return await socketRate(root, rows);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

/**
 * Delivered rows/s at the load generator `gen` while `publish` runs flat out:
 * the difference between two marks `windowMs` apart, after `warmMs`.
 */
async function window(
  gen: Proc,
  serverPid: number,
  publish: (stop: () => boolean) => Promise<void>,
  warmMs: number,
  windowMs: number,
): Promise<Rate & { perSub: string; pubCpu: number }> {
  let done = false;
  const pub = publish(() => done);
  try {
    await gen.line((l) => l === "FLOWING", 60_000);
    await sleep(warmMs);
    const m0 = await gen.mark();
    const c0 = procCpuMs(serverPid);
    const p0 = procCpuMs(Deno.pid);
    await sleep(windowMs);
    const m1 = await gen.mark();
    const c1 = procCpuMs(serverPid);
    const p1 = procCpuMs(Deno.pid);
    const ms = (m1.t as number) - (m0.t as number);
    const ps = m1.perSub as { min: number; median: number; max: number };
    return {
      rate: ((m1.rows as number) - (m0.rows as number)) / (ms / 1000),
      genCpu: ((m1.cpuUs as number) - (m0.cpuUs as number)) / 1000 / ms * 100,
      serverCpu: (c1 - c0) / ms * 100,
      pubCpu: (p1 - p0) / ms * 100,
      perSub: `${ps.min}/${ps.median}/${ps.max}`,
    };
  } finally {
    done = true;
    await pub;
    await gen.stop();
  }
}

/** streamcast live fan-out to `subs` batched subscribers, rows published over the publish socket. */
async function oursLive(subs: number, warmMs: number, windowMs: number) {
  const sc = await startServe(true);
  try {
    const gen = new Proc("streamcast live generator", Deno.execPath(), [
      "run",
      "-A",
      `${here}../harness/fanout_client.ts`,
      JSON.stringify({ url: `${sc.url}?frames=batch`, subs }),
    ]);
    await gen.line((l) => l === "OPEN", 60_000);
    const rows = makeRows(100_000);
    return await window(
      gen,
      sc.pid,
      async (stop) => {
        const pub = await publisher(sc.url, { producer: "peer-bench" });
        const pending: Promise<unknown>[] = [];
        for (let i = 0; !stop(); i = (i + 100) % rows.length) {
          pending.push(pub.publish(rows.slice(i, i + 100)));
          if (pending.length >= 64) await pending.shift();
        }
        await Promise.all(pending);
        await pub.close();
      },
      warmMs,
      windowMs,
    );
  } finally {
    await sc.stop();
  }
}

/** NATS live fan-out to `subs` subscribers: core subjects, or JetStream pull consumers (no acks). */
async function natsLive(
  subs: number,
  mode: "core" | "jetstream",
  warmMs: number,
  windowMs: number,
) {
  const n = await nats();
  const nc = await natsConnect({ servers: n.url });
  try {
    if (mode === "jetstream") {
      const jsm = await nc.jetstreamManager();
      await jsm.streams.add({ name: "LIVE", subjects: ["live.>"], storage: "file" as never });
    }
    const gen = new Proc(`nats ${mode} generator`, Deno.execPath(), [
      "run",
      "-A",
      "--config",
      `${here}../../deno.dev.json`,
      `${here}../harness/nats_client.ts`,
      JSON.stringify({ url: n.url, subs, mode, subject: "live.rows", stream: "LIVE" }),
    ]);
    await gen.line((l) => l === "OPEN", 60_000);
    const payloads = makeRows(100_000).map((r) => enc.encode(JSON.stringify(r)));
    return await window(
      gen,
      n.pid,
      async (stop) => {
        for (let i = 0; !stop(); i = (i + 1) % payloads.length) {
          nc.publish("live.rows", payloads[i]);
          if (i % 1000 === 999) await nc.flush();
        }
        await nc.flush();
      },
      warmMs,
      windowMs,
    );
  } finally {
    await nc.close();
    await n.stop();
  }
}

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const rows = quick ? 200_000 : 1_000_000;
  const [warmMs, windowMs] = quick ? [500, 1000] : [1500, 3000];
  const out: BenchRow[] = [];
  const ours = await oursReplay(rows);
  const theirs = await natsReplay(rows);
  out.push({
    case: `replay ${
      rows / 1e6
    } M stored rows to one subscriber: batched frames vs JetStream pull consumer (no acks)`,
    ours: ours.rate,
    baseline: theirs.rate,
    unit: "rows/s",
    ratio: ours.rate / theirs.rate,
    target: "ahead of NATS",
    met: ours.rate > theirs.rate,
    serverCpu: [ours.serverCpu, theirs.serverCpu],
    genCpu: [ours.genCpu, theirs.genCpu],
  });
  const fairness: string[] = [];
  const publisherCpu: string[] = [];
  for (const subs of [1, 10, 100]) {
    const o = await oursLive(subs, warmMs, windowMs);
    const js = await natsLive(subs, "jetstream", warmMs, windowMs);
    const core = await natsLive(subs, "core", warmMs, windowMs);
    const s = subs === 1 ? "subscriber" : "subscribers";
    const peers: [string, Rate, boolean][] = [
      ["JetStream pull consumers (no acks)", js, true],
      ["NATS core (no storage)", core, false],
    ];
    for (const [peer, theirs, target] of peers) {
      out.push({
        case: `live, ${subs} ${s}: batched, acked durable publish vs ${peer}`,
        ours: o.rate,
        baseline: theirs.rate,
        unit: "rows/s",
        ratio: o.rate / theirs.rate,
        target: target ? "ahead of NATS" : "",
        met: target ? o.rate > theirs.rate : null,
        serverCpu: [o.serverCpu, theirs.serverCpu],
        genCpu: [o.genCpu, theirs.genCpu],
      });
    }
    fairness.push(
      `${subs} ${s}: streamcast ${o.perSub}, JetStream ${js.perSub}, NATS core ${core.perSub}`,
    );
    publisherCpu.push(
      `${subs} ${s}: streamcast ${o.pubCpu.toFixed(0)} %, JetStream ${
        js.pubCpu.toFixed(0)
      } %, NATS core ${core.pubCpu.toFixed(0)} %`,
    );
  }
  return {
    title: "Against NATS: replay and live fan-out",
    baseline:
      "Debian's nats-server (JetStream on a file store) with `npm:nats` 2.29.3, the same trade rows, in the same run: a JetStream pull consumer (no acks) for replay and live fan-out, and NATS core subjects (no storage) as the ceiling of NATS itself.",
    rows: out,
    notes: [
      "Replay: the rows are stored first (ours: `Stream.sendMany` into a fresh log; NATS: core publishes into the stream's subject, then waiting until the stream holds them all), then one subscriber in a separate process reads them all from the first; rows/s from its first row to its last. Ours sends batched text frames over a WebSocket (the load generator counts rows by newlines); the pull consumer (no acks) pulls batches of up to 10,000 messages.",
      "Live: the publisher runs flat out in the bench process, the subscribers in one load-generator process (one socket or NATS connection each), and rows/s delivered to all of them together is counted between two marks 3 s apart after 1.5 s of warm-up. Our publisher's rows are each acknowledged only once fsync'd (100-row frames, 64 in flight); the NATS publisher's core publishes get no acknowledgement at all (an acked JetStream publish is far slower: see the publishing section, same run), so the NATS side is given the easier contract.",
      `Rows per subscriber over the window (least/median/most): ${fairness.join("; ")}.`,
      "Server CPU: the streamcast or nats-server process (its own threads); generator CPU: the load generator. The publisher (this bench process) is not in those columns; its CPU over the window, where 100 % means it is the limit: " +
      publisherCpu.join("; ") + ".",
    ],
  };
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
