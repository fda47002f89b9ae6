// Hostile clients against a real `cli.ts serve` (docs/SPEC.md §3.4): 2,000
// connections churning, slow-loris upgrade requests, oversized and binary
// frames — from a separate process (_hostile.ts), while this process feeds
// rows stamped with their send time and a normal subscriber measures
// send→receive latency, calm first, then under attack. Timings are reported,
// and only gross failures are asserted (a stall over 1 s beyond what the
// machine itself stalled this process, a lost row, the server's memory or
// descriptors running away).
import { assert, assertEquals } from "../../harness/assert.ts";
import {
  fdCount,
  NAME,
  portOf,
  quantile,
  rowText,
  rssMiB,
  serveChild,
  sleep,
  workspace,
} from "../../harness/soak/workload.ts";
import { concat, frame, RawConn } from "../../harness/soak/raw_frames.ts";
import { TestSub } from "../../harness/subscriber.ts";

import { FRESH_SEED, REPLAY, seedBanner } from "../../harness/seeds.ts";

console.log(seedBanner("hostile clients"));
const HOSTILE = new URL("./_hostile.ts", import.meta.url).pathname;
// The 256 MiB target of docs/PERFORMANCE.md is the steady-state bound (1000 subscribers, half of
// them stalled: bench/e2e/memory.ts). Under this attack the server measured 225-306
// MiB at its peak (2026-11-29): the JavaScript heap grows to ~90 MiB under the
// churn's allocation rate, 5 clients at a time send 1-8 MiB frames that the
// runtime buffers before streamcast sees them, and catching-up attackers that
// never read hold their share of the send budget. The gross bound asserted
// here catches a runaway (memory held per connection, or never given back).
const RSS_LIMIT_MIB = 400;

function now(): number {
  return performance.timeOrigin + performance.now();
}

/** A live subscriber that timestamps every row's arrival. */
class LatencySub {
  readonly ws: WebSocket;
  readonly latencies: Record<string, number[]> = {};
  phase = "calm";
  offsets: number[] = [];
  closed: CloseEvent | null = null;
  lastArrival = 0;
  worstGapMs = 0;
  #opened: Promise<void>;

  constructor(url: string) {
    this.ws = new WebSocket(url);
    let greeted = false;
    let resolve!: () => void;
    this.#opened = new Promise((r) => (resolve = r));
    this.ws.onmessage = (e) => {
      const t = now();
      if (!greeted) {
        greeted = true;
        this.lastArrival = t;
        resolve();
        return;
      }
      for (const line of (e.data as string).split("\n")) {
        const comma = line.indexOf(",");
        this.offsets.push(Number(line.slice(1, comma)));
        const msg = JSON.parse(line.slice(comma + 1, -1));
        (this.latencies[this.phase] ??= []).push(t - msg.ts);
      }
      this.worstGapMs = Math.max(this.worstGapMs, t - this.lastArrival);
      this.lastArrival = t;
    };
    this.ws.onclose = (e) => (this.closed = e);
    this.ws.onerror = () => {};
  }

  opened(): Promise<void> {
    return this.#opened;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    const done = new Promise((r) => this.ws.addEventListener("close", r));
    this.ws.close();
    await done;
  }
}

function summary(xs: number[] | undefined): string {
  if (!xs || xs.length === 0) return "no rows";
  const a = [...xs];
  return `n=${a.length} p50=${quantile(a, 0.5).toFixed(2)} p99=${quantile(a, 0.99).toFixed(2)} ` +
    `max=${quantile(a, 1).toFixed(2)} ms`;
}

Deno.test("hostile clients: churn, slow loris and oversized frames neither stall a normal subscriber nor blow up the server", async () => {
  const w = await workspace();
  const s = await serveChild(w);
  const pid = s.proc.pid;
  let feeding = true;
  let feeder: Promise<void> = Promise.resolve();
  let sub: LatencySub | null = null;
  // How late this process's own timers ran: on a machine busy with other
  // work the server is starved as much, and a stall that long is the
  // machine's, not the server's.
  let starvedMs = 0;
  let tick = performance.now();
  const lagProbe = setInterval(() => {
    const t = performance.now();
    starvedMs = Math.max(starvedMs, t - tick - 20);
    tick = t;
  }, 20);
  try {
    let seq = 0;
    let history = "";
    for (let i = 0; i < 2000; i++) history += rowText(++seq, now()) + "\n";
    await s.write(history);
    await sleep(300);
    sub = new LatencySub(`${s.ws}/${NAME}`);
    await sub.opened();
    // ~500 rows/s, one row per write, each stamped just before it is written.
    feeder = (async () => {
      while (feeding) {
        await s.write(rowText(++seq, now()) + "\n");
        await sleep(2);
      }
    })();
    const rss: Record<string, number[]> = {};
    const sampler = setInterval(() => {
      (rss[sub!.phase] ??= []).push(rssMiB(pid));
    }, 200);
    const fdsBefore = fdCount(pid);
    await sleep(5_000);
    sub.phase = "hostile";
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        HOSTILE,
        String(portOf(s.url)),
        String(FRESH_SEED),
        REPLAY ? "1" : "0",
        "2000",
        "300",
        "40",
      ],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const killer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    const out = await child.output();
    clearTimeout(killer);
    const hostile = new TextDecoder().decode(out.stdout).trim();
    assertEquals(out.code, 0, `hostile child failed:\n${new TextDecoder().decode(out.stderr)}`);
    sub.phase = "after";
    await sleep(2_000);
    feeding = false;
    await feeder;
    clearInterval(sampler);
    const fdsAfter = fdCount(pid);
    // The last rows written may still be on their way through stdin.
    let end = 0;
    for (const stop = Date.now() + 10_000; end !== seq + 1 && Date.now() < stop; await sleep(50)) {
      end = (await (await fetch(`${s.url}/${NAME}/head`)).json()).end_offset as number;
    }
    assertEquals(end, seq + 1, "every row fed was stored");
    const deadline = Date.now() + 10_000;
    while (sub.offsets.at(-1) !== end - 1 && Date.now() < deadline) await sleep(20);

    const peak = (xs?: number[]) => Math.max(...(xs ?? [NaN]));
    console.log(
      `hostile: attackers ${hostile}\n` +
        `  latency calm:    ${summary(sub.latencies.calm)}\n` +
        `  latency hostile: ${summary(sub.latencies.hostile)}\n` +
        `  latency after:   ${summary(sub.latencies.after)}\n` +
        `  worst gap between rows ${sub.worstGapMs.toFixed(0)} ms; server RSS peak calm ` +
        `${peak(rss.calm).toFixed(1)} MiB, hostile ${peak(rss.hostile).toFixed(1)} MiB, after ` +
        `${peak(rss.after).toFixed(1)} MiB; server fds ${fdsBefore} before, ${fdsAfter} after; ` +
        `this process's timers ran up to ${starvedMs.toFixed(0)} ms late`,
    );
    const result = JSON.parse(hostile);
    assertEquals(result.stillOpen, 0, "the attackers closed every socket");
    assertEquals(sub.closed, null, "the normal subscriber was dropped");
    const first = sub.offsets[0];
    for (let i = 0; i < sub.offsets.length; i++) {
      assertEquals(sub.offsets[i], first + i, "the normal subscriber's rows are contiguous");
    }
    assertEquals(sub.offsets.at(-1), end - 1, "the normal subscriber got every row");
    const stallBound = 1000 + 2 * starvedMs;
    assert(
      sub.worstGapMs < stallBound,
      `the normal subscriber stalled for ${sub.worstGapMs} ms (bound ${stallBound} ms)`,
    );
    const p99 = quantile([...sub.latencies.hostile], 0.99);
    assert(p99 < stallBound, `p99 latency under attack ${p99} ms (bound ${stallBound} ms)`);
    assert(fdsAfter <= fdsBefore + 4, `server fds: ${fdsBefore} before, ${fdsAfter} after`);
    assert(!/request failed|Uncaught|panicked/.test(s.stderr()), `server errors:\n${s.stderr()}`);
    await sub.close();
    assertEquals((await s.signal("SIGTERM")).code, 0, "clean stop");
    // Last, so that a memory overrun does not hide any of the checks above.
    const peakAll = Math.max(peak(rss.calm), peak(rss.hostile), peak(rss.after));
    assert(
      peakAll < RSS_LIMIT_MIB,
      `server RSS peaked at ${peakAll.toFixed(1)} MiB (bound under attack: ${RSS_LIMIT_MIB} MiB)`,
    );
  } finally {
    clearInterval(lagProbe);
    feeding = false;
    await feeder;
    await sub?.close();
    await s.stop();
    await w.rm();
  }
});

// Deno reassembles a fragmented message in memory before the application sees
// any of it, and (Deno 2.9, measured) does not end one that grows past its 64
// MiB frame limit: each connection that keeps a message open costs the server
// that much, whatever streamcast does with the message afterwards (it would
// close with 1008). docs/CLI.md § Limits says so and points at a proxy. This
// checks what streamcast does control — everyone else is served meanwhile, and
// the memory comes back when such clients go — and reports the cost.
Deno.test("hostile clients: unfinished fragmented messages do not stop the others, and their memory is given back", async () => {
  const w = await workspace();
  const s = await serveChild(w);
  const pid = s.proc.pid;
  const port = portOf(s.url);
  const conns: RawConn[] = [];
  let watcher: TestSub | null = null;
  try {
    await s.write(rowText(1) + "\n");
    watcher = await TestSub.open(`${s.ws}/${NAME}?offset=1`);
    await watcher.waitLines(1);
    const before = rssMiB(pid);
    let peak = before;
    const piece = new Uint8Array(4 << 20).fill(97);
    // Four clients each keep a 40 MiB message open; a fifth goes past 64 MiB.
    for (let i = 0; i < 5; i++) {
      const { c, answer } = await RawConn.upgrade(port, `/${NAME}`);
      conns.push(c);
      assertEquals(answer.status, 101);
      await c.readFrame(10_000);
      const frames: Uint8Array[] = [frame(2, piece, { fin: false })];
      for (let k = 1; k < (i < 4 ? 10 : 17); k++) frames.push(frame(0, piece, { fin: false }));
      await c.write(concat(...frames));
      peak = Math.max(peak, rssMiB(pid));
    }
    const over = await conns[4].ending(2_000);
    peak = Math.max(peak, rssMiB(pid));
    // Meanwhile a subscriber is served.
    await s.write(rowText(2) + "\n");
    await watcher.waitLines(2);
    for (const c of conns) c.close();
    await sleep(1000);
    const after = rssMiB(pid);
    console.log(
      `fragmented messages: server RSS ${before.toFixed(1)} MiB before, peak ${
        peak.toFixed(1)
      } MiB with 4 × 40 MiB + 1 × 68 MiB unfinished messages (the 68 MiB one: ` +
        `${JSON.stringify(over)} after 2 s), ${after.toFixed(1)} MiB after they closed`,
    );
    assertEquals(watcher.closed, null, "the subscriber kept its connection");
    assertEquals(
      (await (await fetch(`${s.url}/${NAME}/head`)).json()).end_offset,
      3,
      "the server still answers",
    );
    assert(after < before + 64, `RSS ${after.toFixed(1)} MiB after, ${before.toFixed(1)} before`);
  } finally {
    for (const c of conns) c.close();
    await watcher?.close();
    await s.stop();
    await w.rm();
  }
});
