// The archive's history stays whole when another writer cut its chunks
// elsewhere (docs/SPEC.md §4.2, §11.12): a cluster's earlier leader archived
// chunks whose boundaries differ from the local log's. Merging keeps every
// offset in exactly one listed chunk (the archived chunk reaching into the
// local chunks is re-made from its rows below them), and a reader replaying
// the whole history from the archive gets each row once.
import { assert, assertEquals, assertThrows } from "../harness/assert.ts";
import { Log } from "../../log/mod.ts";
import { ArchiveStore, mergeManifests, straddlingChunk } from "../../log/chunk/archive.ts";
import { checkManifest, type ChunkEntry, type Manifest } from "../../log/chunk/chunk.ts";
import { restoreLog } from "../../log/restore.ts";
import { rmrf, rng, tempDir } from "../harness/util.ts";
import { startS3, stopS3 } from "../harness/s3.ts";
import { join } from "node:path";

const ID = "0123456789abcdef0123456789abcdef";

function entry(first: number, last: number, tag: string): ChunkEntry {
  const sha256 = `${tag}${first.toString(16)}-${last.toString(16)}`.padEnd(64, "0")
    .replace(/[^0-9a-f]/g, "f").slice(0, 64);
  return { first, last, rows: last - first + 1, bytes: 1, sha256, first_ts: first, last_ts: last };
}

function manifest(chunks: ChunkEntry[]): Manifest {
  const through = chunks.at(-1)?.last ?? 0;
  return { stream: "t", stream_id: ID, generation: 1, through, chunks, retired: [] };
}

// Cuts offsets first..last into chunks of 1..maxLen rows.
function cut(first: number, last: number, maxLen: number, next: () => number, tag: string) {
  const out: ChunkEntry[] = [];
  for (let o = first; o <= last;) {
    const end = Math.min(last, o + Math.floor(next() * maxLen));
    out.push(entry(o, end, tag));
    o = end + 1;
  }
  return out;
}

// The offsets a reader replaying the manifest's chunks in order is given.
function replayed(m: Manifest): number[] {
  const out: number[] = [];
  for (const c of m.chunks) for (let o = c.first; o <= c.last; o++) out.push(o);
  return out;
}

Deno.test("mergeManifests: chunks of another leader cut at other boundaries leave no offset out and none twice", () => {
  const seed = Number(Deno.env.get("STREAMCAST_MERGE_SEED") ?? Date.now() % 1_000_000);
  console.log(`seed ${seed} (STREAMCAST_MERGE_SEED)`);
  const next = rng(seed);
  for (let round = 0; round < 200; round++) {
    const end = 20 + Math.floor(next() * 200);
    // Leader A archived 1..end; leader B's local chunks begin somewhere inside.
    const archived = manifest(cut(1, end, 40, next, "a"));
    const localFirst = 2 + Math.floor(next() * (end - 1));
    const local = manifest(cut(localFirst, end + 50, 30, next, "b"));
    const straddler = straddlingChunk(archived, local);
    const inside = archived.chunks.find((c) => c.first < localFirst && c.last >= localFirst);
    assertEquals(straddler, inside ?? null, `seed ${seed} round ${round}`);
    // What the archiver makes of it: the straddler's rows below the local tier.
    const remade = straddler ? entry(straddler.first, localFirst - 1, "c") : null;
    const merged = mergeManifests(archived, local, remade);
    const want = Array.from({ length: end + 50 }, (_, i) => i + 1);
    assertEquals(replayed(merged), want, `seed ${seed} round ${round}`);
    assertEquals(checkManifest(merged), null, `seed ${seed} round ${round}`);
    assertEquals(merged.through, end + 50);
    if (straddler) {
      // Never dropped silently: without the re-made chunk the merge refuses.
      assertThrows(() => mergeManifests(archived, local), Error, `${straddler.first}..`);
    }
  }
});

Deno.test("mergeManifests: the archive's older chunks, then the local ones; none when none is older", () => {
  const archived = manifest([entry(1, 10, "a"), entry(11, 20, "a")]);
  const local = manifest([entry(21, 30, "b")]);
  assertEquals(
    mergeManifests(archived, local).chunks.map((c) => [c.first, c.last]),
    [[1, 10], [11, 20], [21, 30]],
  );
  assertEquals(mergeManifests(null, local).chunks, local.chunks);
  assertEquals(mergeManifests(archived, manifest([])).through, 20);
});

const payload = (o: number) => JSON.stringify({ o, text: `row ${o}` });

async function readAll(log: Log, from: number): Promise<{ offset: number; text: string }[]> {
  const out: { offset: number; text: string }[] = [];
  const r = log.reader(from);
  const dec = new TextDecoder();
  try {
    while (true) {
      const b = await r.read();
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) {
        const s = b.starts[i];
        out.push({ offset: b.offsets[i], text: dec.decode(b.buf.subarray(s, s + b.lengths[i])) });
      }
    }
  } finally {
    r.close();
  }
  return out;
}

// Appends offsets first..last, sealing a chunk after each offset in `cuts`.
async function write(log: Log, first: number, last: number, cuts: number[]): Promise<void> {
  let o = first;
  for (const end of [...cuts, last]) {
    if (end < o) continue;
    const rows = [];
    for (; o <= end; o++) rows.push(payload(o));
    await log.appendMany(rows);
    await log.roll();
  }
  await log.chunks.settled();
}

Deno.test("archive of two leaders cut at other boundaries: a restore replays every row exactly once", async () => {
  const s3 = await startS3();
  const root = await tempDir();
  const archive = { uri: "s3://archive/leaders", endpoint: s3.endpoint, forcePathStyle: true };
  const store = new ArchiveStore(archive, "t");
  try {
    // Leader A (term 1) archived offsets 1..30 as 1..7, 8..19, 20..30.
    const a = await Log.open(join(root, "a"), { name: "t", archive, timers: false });
    a.chunks.setRetention({ archiveTerm: 1 });
    const streamId = a.streamId;
    await write(a, 1, 30, [7, 19]);
    assertEquals(a.chunks.manifest!.chunks.map((c) => [c.first, c.last]), [[1, 7], [8, 19], [
      20,
      30,
    ]]);
    assert(await a.archive.settled(20_000), JSON.stringify(a.archive.state));
    await a.close();
    // Leader B (term 2) holds the same rows from 12 on (its older chunks are
    // gone), cut where it chose: 12..25, 26..40.
    const b = await Log.open(join(root, "b"), { name: "t", archive, timers: false, streamId });
    b.chunks.setRetention({ archiveTerm: 2 });
    await b.fence(12);
    await write(b, 12, 40, [25]);
    assertEquals(b.chunks.manifest!.chunks.map((c) => [c.first, c.last]), [[12, 25], [26, 40]]);
    assert(await b.archive.settled(20_000), JSON.stringify(b.archive.state));
    await b.close();
    const m = (await store.getManifest())!;
    assertEquals(m.term, 2);
    assertEquals(
      m.chunks.map((c) => [c.first, c.last]),
      [[1, 7], [8, 11], [12, 25], [26, 40]],
    );
    const want = Array.from({ length: 40 }, (_, i) => ({ offset: i + 1, text: payload(i + 1) }));
    // A reader of the archive's chunks (restored, every chunk copied back).
    const hydrated = await restoreLog(join(root, "hydrated"), "t", {
      archive,
      hydrate: true,
      logOptions: { timers: false },
    });
    try {
      assertEquals(await readAll(hydrated.log, 1), want);
    } finally {
      await hydrated.log.close();
    }
    // A reader replaying from the archive itself (nothing copied back).
    const replay = await restoreLog(join(root, "replay"), "t", {
      archive,
      logOptions: { timers: false, replayArchive: true },
    });
    try {
      assertEquals(replay.log.earliest, 1);
      assertEquals(await readAll(replay.log, 1), want);
    } finally {
      await replay.log.close();
    }
  } finally {
    store.close();
    await rmrf(root);
    await stopS3(s3);
  }
});
