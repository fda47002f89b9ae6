// Child process of the hostile-clients test: the attackers, kept out of the
// test's own event loop so that the latency it measures is the server's.
//
//   deno run -A tests/system/reliability/_hostile.ts PORT SEED REPLAY CHURN LORIS BIG
//
// SEED and REPLAY (0 or 1) are the parent's fresh seed and replay mode (see
// tests/harness/seeds.ts): each connection is one case, with its own generator.
// - CHURN connections opening and closing, 100 at a time: valid subscribes
//   (some from offset 1), refused ones, data frames, abrupt TCP closes;
// - LORIS sockets sending an upgrade request one byte at a time, slowly,
//   started together and running while the churn goes on;
// - BIG connections sending 1-8 MiB binary or text frames and frames that
//   declare more than the runtime accepts.
// Prints one JSON line of counts on stdout; every socket is closed at the end.
import { closePayload, frame, RawConn, upgradeRequest } from "../../harness/soak/raw_frames.ts";
import { caseRng, planCases } from "../../harness/seeds.ts";

const [port, seed, replay, churn, loris, big] = Deno.args.map(Number);
/** One generator per connection of each kind, from the run's cases. */
function generators(n: number, suite: string, salt: number): (() => number)[] {
  return planCases(n, suite, seed >>> 0, replay === 1).map((c) => caseRng(c, salt));
}
const enc = new TextEncoder();
const counts: Record<string, number> = {};
const count = (k: string) => (counts[k] = (counts[k] ?? 0) + 1);
const open = new Set<RawConn>();

function pick<T>(rand: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rand() * xs.length)];
}

async function churnOne(rand: () => number): Promise<void> {
  const target = pick(rand, [
    "/rel",
    "/rel?frames=batch",
    "/rel?offset=1",
    "/rel?offset=earliest&frames=batch",
    "/nope",
    "/rel?ofset=1",
    "/rel?offset=99999999999",
  ]);
  let c: RawConn;
  try {
    c = await RawConn.open(port);
  } catch {
    count("connect failed");
    return;
  }
  open.add(c);
  try {
    await c.write(enc.encode(upgradeRequest(port, target)));
    const a = await c.readHead(10_000);
    if (a.status !== 101) {
      count(`http ${a.status}`);
      return;
    }
    const first = await c.readFrame(10_000);
    if (!first) {
      count("no first frame");
      return;
    }
    if (first.opcode === 8) {
      count(`refused ${(first.data[0] << 8) | first.data[1]}`);
      return;
    }
    const how = rand();
    if (how < 0.4) {
      await c.write(frame(8, closePayload(1000)));
      const e = await c.ending(5_000);
      count(e.kind === "close" ? `closed ${e.code}` : `close: ${e.kind}`);
    } else if (how < 0.7) {
      count("aborted");
    } else {
      await c.write(frame(rand() < 0.5 ? 1 : 2, enc.encode("hello")));
      const e = await c.ending(5_000);
      count(e.kind === "close" ? `data frame -> ${e.code}` : `data frame -> ${e.kind}`);
    }
  } finally {
    c.close();
    open.delete(c);
  }
}

async function lorisOne(stepMs: number, until: number): Promise<void> {
  let c: RawConn;
  try {
    c = await RawConn.open(port);
  } catch {
    count("loris connect failed");
    return;
  }
  open.add(c);
  try {
    const req = enc.encode(upgradeRequest(port, "/rel"));
    // Everything but the last byte, one at a time, until the phase ends.
    for (let i = 0; i < req.length - 1 && Date.now() < until; i++) {
      if (!(await c.write(req.subarray(i, i + 1)))) {
        count("loris cut off by the server");
        return;
      }
      await new Promise((r) => setTimeout(r, stepMs));
    }
    count("loris held to the end");
  } finally {
    c.close();
    open.delete(c);
  }
}

async function bigOne(rand: () => number): Promise<void> {
  const { c, answer } = await RawConn.upgrade(port, "/rel?frames=batch");
  open.add(c);
  try {
    if (answer.status !== 101 || !(await c.readFrame(10_000))) {
      count("big: no subscribe");
      return;
    }
    const r = rand();
    if (r < 0.7) {
      const n = (1 + Math.floor(rand() * 8)) << 20;
      await c.write(frame(rand() < 0.5 ? 2 : 1, new Uint8Array(n).fill(120)));
    } else {
      await c.write(frame(2, new Uint8Array(1024), { declaredLength: 2 ** 33 }));
    }
    const e = await c.ending(20_000);
    count(e.kind === "close" ? `big -> ${e.code}` : `big -> ${e.kind}`);
  } finally {
    c.close();
    open.delete(c);
  }
}

const t0 = Date.now();
const lorisDone = Promise.all(
  generators(loris, "hostile loris", 0x1051).map((rand) =>
    lorisOne(40 + Math.floor(rand() * 60), t0 + 12_000)
  ),
);
const bigs = generators(big, "hostile big", 0xb16);
const bigDone = (async () => {
  for (let i = 0; i < bigs.length; i += 5) await Promise.all(bigs.slice(i, i + 5).map(bigOne));
})();
const churns = generators(churn, "hostile churn", 0xc4);
for (let i = 0; i < churns.length; i += 100) {
  await Promise.all(churns.slice(i, i + 100).map(churnOne));
}
const churnMs = Date.now() - t0;
await Promise.all([lorisDone, bigDone]);
for (const c of open) c.close();
console.log(JSON.stringify({ churnMs, totalMs: Date.now() - t0, stillOpen: open.size, counts }));
