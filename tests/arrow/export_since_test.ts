// export --since/--until: the rows appended in [since, until), found through
// the log's time lookup, for an open log and for a folder read without its
// lock (the CLI), across segments and chunks.
import { Log, LogEvictedError } from "../../log/mod.ts";
import { exportLog } from "../../arrow/export.ts";
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";

const S = 1_000_000;
const cli = new URL("../../cli/export.ts", import.meta.url).pathname;

// Rows 10g+1 .. 10g+10 appended at (g+1) s, g = 0..9, over small segments.
async function timedLog(dir: string, chunks = false): Promise<Log> {
  let now = 0;
  const log = await Log.open(dir, {
    clock: () => now,
    timers: false,
    sealEveryMs: 0,
    segmentBytes: 1024,
    beaconInterval: 1024,
    chunks: chunks ? { fanIn: 1000 } : false,
  });
  for (let g = 0; g < 10; g++) {
    now = (g + 1) * 1000;
    await log.appendMany(Array.from({ length: 10 }, (_, k) => `{"i":${10 * g + k + 1}}`));
  }
  return log;
}

async function offsets(path: string): Promise<number[]> {
  const text = await Deno.readTextFile(path);
  return text.trimEnd().split("\n").filter((l) => l).map((l) => JSON.parse(l)[0]);
}

const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, k) => a + k);

Deno.test("exportLog since/until: rows appended in [since, until), open log and folder", async () => {
  const dir = await tempDir();
  try {
    const log = await timedLog(`${dir}/t`);
    const out = `${dir}/o.ndjson`;
    const cases: [{ since?: number; until?: number; from?: number; to?: number }, number[]][] = [
      [{ since: 3 * S }, range(21, 100)],
      [{ since: 3 * S + 1, until: 6 * S }, range(31, 50)],
      [{ until: 2 * S + 1 }, range(1, 20)],
      [{ since: 0, until: S }, []],
      [{ since: 99 * S }, []],
      [{ since: 3 * S, from: 40, to: 55 }, range(40, 55)],
      [{ since: 5 * S, from: 10 }, range(41, 100)],
    ];
    for (const [opts, want] of cases) {
      await exportLog(log, null, { format: "ndjson", out, ...opts });
      assertEquals(await offsets(out), want, `open log ${JSON.stringify(opts)}`);
    }
    await log.close();
    for (const [opts, want] of cases) {
      await exportLog(`${dir}/t`, null, { format: "ndjson", out, ...opts });
      assertEquals(await offsets(out), want, `folder ${JSON.stringify(opts)}`);
    }
    await assertRejects(
      () => exportLog(`${dir}/t`, null, { format: "ndjson", out, since: 5, until: 5 }),
      RangeError,
      "not before until",
    );
    await assertRejects(
      () => exportLog(`${dir}/t`, null, { format: "ndjson", out, since: -1 }),
      RangeError,
      "since must be",
    );
  } finally {
    await rmrf(dir);
  }
});

Deno.test("exportLog since through chunks; evicted when retention dropped older rows", async () => {
  const dir = await tempDir();
  try {
    const log = await timedLog(`${dir}/t`, true);
    await log.roll();
    await log.chunks.settled();
    const chunks = log.chunks.manifest!.chunks;
    assert(chunks.length >= 3);
    const out = `${dir}/o.ndjson`;
    const c = chunks[1];
    await exportLog(log, null, { format: "ndjson", out, since: c.first_ts });
    assertEquals((await offsets(out))[0], c.first);
    // Inside the chunk (between two commits, and at one): the exact rows, from
    // its time index; `until` inside a chunk cuts it exactly too.
    assert(c.last_ts > c.first_ts, "the chunk holds several commits");
    const g = Math.round(c.first_ts / S); // commit g (0-based) is rows 10g+1.., at (g+1) s
    await exportLog(log, null, { format: "ndjson", out, since: c.first_ts + 1, until: c.last_ts });
    assertEquals(await offsets(out), range(10 * g + 1, 10 * Math.round(c.last_ts / S) - 10));
    await exportLog(`${dir}/t`, null, { format: "ndjson", out, since: (g + 1) * S });
    assertEquals((await offsets(out))[0], 10 * g + 1);
    log.chunks.setRetention({ retainBytes: chunks.slice(2).reduce((n, e) => n + e.bytes, 0) });
    await log.chunks.settled(true);
    await assertRejects(
      () => exportLog(log, null, { format: "ndjson", out, since: 0 }),
      LogEvictedError,
    );
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("cli export --since --until writes the rows of that time range", async () => {
  const dir = await tempDir();
  try {
    const log = await timedLog(`${dir}/t`);
    await log.close();
    const run = async (...args: string[]) => {
      const o = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", cli, `${dir}/t`, "--format", "ndjson", "--out", `${dir}/o`, ...args],
        stdout: "piped",
        stderr: "piped",
      }).output();
      return { code: o.code, stderr: new TextDecoder().decode(o.stderr) };
    };
    const ok = await run("--since", "1970-01-01T00:00:03Z", "--until", String(6 * S));
    assertEquals(ok.code, 0, ok.stderr);
    assertEquals(await offsets(`${dir}/o`), range(21, 50));
    assert(ok.stderr.includes("offsets 21..50"), ok.stderr);
    for (const args of [["--since", "later"], ["--since", "9", "--until", "9"]]) {
      const bad = await run(...args);
      assertEquals(bad.code, 2, bad.stderr);
    }
  } finally {
    await rmrf(dir);
  }
});
