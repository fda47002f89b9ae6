// The NATS load generator: one process holding every NATS subscriber of a
// benchmark (one connection each, as each WebSocket subscriber has its own
// socket), counting the messages they receive. It speaks the same lines as
// fanout_client.ts: "OPEN" once every subscriber is set up, "FLOWING" at the
// first message, then one JSON line ({t, rows, cpuUs, perSub}) per "mark" on
// stdin, and it exits on "stop". With `until` it exits by itself once that
// many messages arrived in all, printing {rows, ms, cpuUs}.
//
// usage: nats_client.ts CONFIG_JSON   (see NatsLoadConfig)
import process from "node:process";
import { AckPolicy, connect, DeliverPolicy, type NatsConnection } from "nats";
import { stdinLines } from "./stdin_lines.ts";

/** What the NATS load generator does. */
export interface NatsLoadConfig {
  /** nats://127.0.0.1:PORT */
  url: string;
  /** Subscribers (one connection each). */
  subs: number;
  /**
   * `core`: a plain subscription to `subject` (no storage, no replay);
   * `jetstream`: a pull consumer of `stream` (no acks), from new messages on;
   * `replay`: the same from the stream's first message.
   */
  mode: "core" | "jetstream" | "replay";
  subject: string;
  stream?: string;
  /** Exit once this many messages arrived in all; print {rows, ms, cpuUs}. */
  until?: number;
}

const cfg: NatsLoadConfig = JSON.parse(Deno.args[0]);
const cpu0 = process.cpuUsage();
const cpuUs = () => {
  const c = process.cpuUsage(cpu0);
  return c.user + c.system;
};
const wall = () => performance.timeOrigin + performance.now();

let rows = 0;
let firstAt = 0;
let firstCpu = 0;
const perSub = new Float64Array(cfg.subs);
let perSubAtMark = new Float64Array(cfg.subs);
const conns: NatsConnection[] = [];

function got(i: number): void {
  if (rows === 0) {
    firstAt = performance.now();
    firstCpu = cpuUs();
    console.log("FLOWING");
  }
  rows++;
  perSub[i]++;
  if (cfg.until && rows === cfg.until) {
    const ms = performance.now() - firstAt;
    console.log(JSON.stringify({ rows, ms, cpuUs: cpuUs() - firstCpu }));
    Deno.exit(0);
  }
}

async function open(i: number): Promise<void> {
  const nc = await connect({ servers: cfg.url, noEcho: true });
  conns.push(nc);
  if (cfg.mode === "core") {
    nc.subscribe(cfg.subject, { callback: () => got(i) });
    await nc.flush();
    return;
  }
  // A pull consumer of its own with no acks: what an ordered consumer sets
  // up (npm:nats's ordered consumer never starts against nats-server 2.9
  // here: its consume() does not resolve).
  const jsm = await nc.jetstreamManager();
  const name = `sub-${i}`;
  await jsm.consumers.add(cfg.stream!, {
    durable_name: name,
    ack_policy: AckPolicy.None,
    filter_subject: cfg.subject,
    deliver_policy: cfg.mode === "replay" ? DeliverPolicy.All : DeliverPolicy.New,
  });
  const consumer = await nc.jetstream().consumers.get(cfg.stream!, name);
  // It pulls in batches of up to max_messages.
  const messages = await consumer.consume({ max_messages: 10_000 });
  void (async () => {
    for await (const _ of messages) got(i);
  })();
}

async function commands(): Promise<void> {
  for await (const cmd of stdinLines()) {
    if (cmd === "mark") {
      const d = perSub.map((x, j) => x - perSubAtMark[j]).sort();
      perSubAtMark = perSub.slice();
      console.log(JSON.stringify({
        t: wall(),
        rows,
        cpuUs: cpuUs(),
        perSub: { min: d[0], median: d[d.length >> 1], max: d[d.length - 1] },
      }));
    } else if (cmd === "stop") {
      await Promise.all(conns.map((c) => c.close().catch(() => {})));
      Deno.exit(0);
    }
  }
  Deno.exit(0);
}

if (!cfg.until) void commands();
for (let i = 0; i < cfg.subs; i += 20) {
  const wave = [];
  for (let k = i; k < Math.min(cfg.subs, i + 20); k++) wave.push(open(k));
  await Promise.all(wave);
}
console.log("OPEN");
