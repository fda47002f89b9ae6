// The chunk worker's steps under a failed write (log/chunk/host.ts,
// log/chunk/steps.ts): a sealed segment whose chunk cannot be written stays
// first in line, and no later segment is listed, merged or taken for chunked
// past it — or a merge would cover its offsets and its segment be deleted
// with rows no chunk holds.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { Log, type LogIo, verifyLog } from "../../log/mod.ts";
import { REAL_IO } from "../../log/disk/io.ts";
import { Logger } from "../../common/logger.ts";

function enospc(): Error {
  return Object.assign(new Error("No space left on device (os error 28)"), { code: "ENOSPC" });
}

async function offsets(log: Log): Promise<number[]> {
  const out: number[] = [];
  const r = log.reader(log.earliest ?? log.endOffset);
  while (true) {
    const b = await r.read();
    if (b.count === 0) break;
    out.push(...b.offsets.subarray(0, b.count));
  }
  r.close();
  return out;
}

Deno.test("chunks: a seal whose chunk write fails is chunked again before any later one", async () => {
  const dir = await tempDir();
  try {
    // The sync of the second chunk file written fails once (a full disk).
    const paths = new WeakMap<Deno.FsFile, string>();
    let chunkSyncs = 0;
    let failed = 0;
    const io: LogIo = {
      ...REAL_IO,
      open: async (path, options) => {
        const f = await REAL_IO.open(path, options);
        paths.set(f, path);
        return f;
      },
      syncData: (file) => {
        if (/\.ndjson\.zst\.tmp-/.test(paths.get(file) ?? "") && ++chunkSyncs === 2) {
          failed++;
          return Promise.reject(enospc());
        }
        return REAL_IO.syncData(file);
      },
    };
    const said: string[] = [];
    const options = {
      io,
      timers: false,
      chunks: { fanIn: 2, graceMs: 0 },
      logger: new Logger({ format: "json", write: (l) => said.push(l) }),
    };
    const log = await Log.open(dir, options);
    for (let seal = 0; seal < 3; seal++) {
      await log.appendMany(Array.from({ length: 4 }, (_, i) => `{"s":${seal},"i":${i}}`));
      await log.roll();
      await log.chunks.settled();
    }
    assertEquals(failed, 1);
    assert(log.chunks.error?.includes("No space left"), String(log.chunks.error));
    assertEquals(said.map((l) => JSON.parse(l).event), ["chunk_worker_error"]);
    // The failed seal (rows 5..8) waited; the next maintenance chunks it first.
    await log.chunks.settled(true);
    assertEquals(await offsets(log), Array.from({ length: 12 }, (_, i) => i + 1));
    const m = log.chunks.manifest!;
    assertEquals(m.chunks.reduce((n, c) => n + c.rows, 0), 12);
    await log.close();
    assertEquals((await verifyLog(dir)).error, null);
    const again = await Log.open(dir, { ...options, io: REAL_IO });
    assertEquals(await offsets(again), Array.from({ length: 12 }, (_, i) => i + 1));
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("chunks: a merge whose write fails (a full disk) ends, leaves no file behind, and is made again", async () => {
  const dir = await tempDir();
  try {
    const paths = new WeakMap<Deno.FsFile, string>();
    let failMerge = false;
    let failed = 0;
    const io: LogIo = {
      ...REAL_IO,
      open: async (path, options) => {
        const f = await REAL_IO.open(path, options);
        paths.set(f, path);
        return f;
      },
      write: (file, bytes) => {
        // Every write of the merged chunk fails.
        if (failMerge && /merge\.tmp-/.test(paths.get(file) ?? "")) {
          failed++;
          return Promise.reject(enospc());
        }
        return REAL_IO.write(file, bytes);
      },
    };
    const options = {
      io,
      timers: false,
      chunks: { fanIn: 2, graceMs: 0 },
      logger: Logger.silent(),
    };
    const log = await Log.open(dir, options);
    const seal = async (s: number) => {
      await log.appendMany(Array.from({ length: 4 }, (_, i) => `{"s":${s},"i":${i}}`));
      await log.roll();
    };
    await seal(0);
    await log.chunks.settled();
    // The second seal's chunk is written; its merge with the first fails.
    failMerge = true;
    await seal(1);
    await log.chunks.settled();
    failMerge = false;
    assert(failed > 0, "the merge was failed");
    assert(log.chunks.error?.includes("No space left"), String(log.chunks.error));
    const left = [];
    for await (const e of Deno.readDir(`${dir}/chunks`)) {
      if (e.name.includes("tmp")) left.push(e.name);
    }
    assertEquals(left, []);
    // The next maintenance merges them.
    await log.chunks.settled(true);
    assertEquals(log.chunks.manifest!.chunks.length, 1);
    assertEquals(await offsets(log), Array.from({ length: 8 }, (_, i) => i + 1));
    await log.close();
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
  }
});
