// The open-files limit, read and raised through libc, and the bound on connections.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import {
  connectionBound,
  DESCRIPTORS_FOR_REQUESTS,
  DESCRIPTORS_PER_REPLAY_READER,
  DESCRIPTORS_PER_STREAM,
  descriptorsInUse,
  openFilesLimit,
  raiseOpenFilesLimit,
} from "../../server/open_files.ts";

const RLIMIT_NOFILE = 7;

// This process's soft limit set to `soft` (the hard one kept), through libc.
function setSoftLimit(soft: number, hard: number): void {
  const lib = Deno.dlopen("libc.so.6", {
    setrlimit: { parameters: ["i32", "buffer"], result: "i32" },
  });
  try {
    const rc = lib.symbols.setrlimit(
      RLIMIT_NOFILE,
      new BigUint64Array([BigInt(soft), BigInt(hard)]),
    );
    assertEquals(rc, 0, `setrlimit(${soft}, ${hard})`);
  } finally {
    lib.close();
  }
}

// "Max open files  SOFT  HARD  files", as the kernel reports this process's limit.
async function procLimits(): Promise<[number, number]> {
  const text = await Deno.readTextFile("/proc/self/limits");
  const m = /^Max open files\s+(\d+)\s+(\d+)/m.exec(text);
  assert(m !== null, text);
  return [Number(m[1]), Number(m[2])];
}

Deno.test("open files limit is read as the kernel reports it", async () => {
  const limit = await openFilesLimit();
  assert(limit !== null);
  assertEquals([limit.soft, limit.hard], await procLimits());
});

Deno.test("open files raiseOpenFilesLimit raises the soft limit to the hard limit", async () => {
  const [soft, hard] = await procLimits();
  const lowered = Math.floor(hard / 2);
  setSoftLimit(lowered, hard);
  try {
    assertEquals(await procLimits(), [lowered, hard]);
    const { before, after } = await raiseOpenFilesLimit();
    assertEquals(before, { soft: lowered, hard });
    assertEquals(after, { soft: hard, hard });
    assertEquals(await procLimits(), [hard, hard]);
    // Already at the hard limit: nothing to do.
    const again = await raiseOpenFilesLimit();
    assertEquals(again.before, again.after);
  } finally {
    setSoftLimit(soft, hard);
  }
});

Deno.test("open files descriptorsInUse counts the descriptors held", async () => {
  const dir = await tempDir("streamcast-fds-");
  try {
    const before = await descriptorsInUse();
    assert(before !== null && before >= 3);
    const files = await Promise.all(
      [0, 1, 2, 3, 4].map((i) => Deno.open(`${dir}/${i}`, { create: true, write: true })),
    );
    assertEquals(await descriptorsInUse(), before + 5);
    for (const f of files) f.close();
    assertEquals(await descriptorsInUse(), before);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("open files connectionBound keeps a reserve per stream and reader, and for requests", () => {
  const reserve = (inUse: number, streams: number, readers: number) =>
    inUse + DESCRIPTORS_PER_STREAM * streams + DESCRIPTORS_PER_REPLAY_READER * readers +
    DESCRIPTORS_FOR_REQUESTS;
  for (
    const [softLimit, inUse, streams, readers] of [
      [1024, 36, 1, 16],
      [65536, 200, 40, 16],
      [4096, 50, 0, 1],
    ]
  ) {
    const r = reserve(inUse, streams, readers);
    assertEquals(
      connectionBound({ softLimit, inUse, streams, maxReplayReaders: readers }),
      { bound: softLimit - r, reserve: r },
    );
  }
  // A limit the reserve swallows still leaves one connection (each refused past it).
  assertEquals(connectionBound({ softLimit: 100, inUse: 90, streams: 2, maxReplayReaders: 16 }), {
    bound: 1,
    reserve: reserve(90, 2, 16),
  });
  assertEquals(
    connectionBound({ softLimit: Infinity, inUse: 30, streams: 1, maxReplayReaders: 16 }).bound,
    Infinity,
  );
});
