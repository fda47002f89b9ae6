// The leader's ring of recent commits (cluster/commit_ring.ts) against a
// model: random commit sizes (some larger than the whole buffer), random
// lookups. What must hold after every push: the newest commit is held; what
// is held is a run of consecutive commits, each with exactly the bytes
// pushed; at most `capacity` bytes are held (a commit larger than that
// alone); and an older commit was dropped only when it could not have fit.
import { assert, assertEquals } from "../harness/assert.ts";
import { rng } from "../harness/util.ts";
import { CommitRing } from "../../cluster/commit_ring.ts";

// Seeds that once failed, run every time (none yet).
const KEPT: number[] = [];

function run(seed: number): void {
  const rand = rng(seed);
  // Half the seeds: commits of 1–4 bytes, thousands held (the index grows).
  const tiny = rand() < 0.5;
  const capacity = tiny ? 4096 + Math.floor(rand() * 4096) : 64 + Math.floor(rand() * 4096);
  const most = tiny ? 4 : Math.floor(capacity / 3);
  const ring = new CommitRing(capacity);
  const pushed: { first: number; end: number; bytes: Uint8Array }[] = [];
  let offset = 1;
  let maxLen = 0;
  for (let step = 0; step < 6000; step++) {
    if (rand() < 0.001) {
      ring.clear();
      pushed.length = 0;
      assertEquals([ring.start, ring.end, ring.bytes], [0, 0, 0]);
    }
    const big = rand() < 0.02;
    const len = big ? capacity + 1 + Math.floor(rand() * 100) : 1 + Math.floor(rand() * most);
    maxLen = Math.max(maxLen, big ? 0 : len);
    const bytes = new Uint8Array(len).map(() => Math.floor(rand() * 256));
    const rows = 1 + Math.floor(rand() * 5);
    ring.push(offset, offset + rows, bytes);
    pushed.push({ first: offset, end: offset + rows, bytes });
    offset += rows;
    const at = `seed ${seed}, step ${step}`;
    // The newest is held, with its bytes.
    assertEquals(ring.get(offset - rows)?.bytes, bytes, at);
    assertEquals(ring.end, offset, at);
    // What is held: consecutive, exact, within capacity (a big one alone).
    const held = pushed.filter((c) => c.first >= ring.start);
    let sum = 0;
    for (const c of held) {
      const got = ring.get(c.first);
      assert(got !== null, `${at}: ${c.first} in [${ring.start}, ${ring.end}) is not held`);
      assertEquals([got.end, got.bytes], [c.end, c.bytes], at);
      sum += c.bytes.length;
    }
    assertEquals(ring.bytes, sum, at);
    assert(big ? held.length === 1 : sum <= capacity, `${at}: ${sum} bytes held in ${capacity}`);
    // Dropped only for want of room: the one just older could not have been kept.
    const older = pushed.filter((c) => c.first < ring.start).at(-1);
    if (older && !big && older.bytes.length <= capacity) {
      assert(
        sum + older.bytes.length > capacity - maxLen,
        `${at}: ${older.first} dropped with ${sum} of ${capacity} bytes held`,
      );
    }
    assertEquals(older ? ring.get(older.first) : null, null, at);
    // No commit starts mid-commit or past the end.
    assertEquals(ring.get(offset), null, at);
    if (rows > 1) assertEquals(ring.get(offset - rows + 1), null, at);
  }
}

Deno.test("CommitRing against a model: the newest held, a consecutive run of exact commits, within capacity", () => {
  const seed = crypto.getRandomValues(new Uint32Array(1))[0];
  console.log(`seed ${seed} (keep it in KEPT if this fails)`);
  for (let k = 0; k < 6; k++) run((seed + k) >>> 0);
  for (const s of KEPT) run(s);
});

Deno.test("CommitRing refuses a commit that does not follow its end, and a capacity out of range", () => {
  const ring = new CommitRing(16);
  ring.push(1, 2, new Uint8Array(4));
  let err: unknown = null;
  try {
    ring.push(5, 6, new Uint8Array(4));
  } catch (e) {
    err = e;
  }
  assert(err instanceof RangeError && /from 5 does not follow the ring's end 2/.test(err.message));
  for (const bad of [0, -1, 1.5, 2 ** 31]) {
    let e2: unknown = null;
    try {
      new CommitRing(bad);
    } catch (e) {
      e2 = e;
    }
    assert(e2 instanceof RangeError, String(bad));
  }
});
