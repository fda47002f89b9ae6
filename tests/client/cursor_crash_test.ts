// A consumer process with a file cursor is SIGKILLed mid-stream and restarted:
// across runs it receives every offset, and none twice beyond the rows handled
// since its last save.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { fixture } from "../harness/client_server.ts";

const TOTAL = 4000;
const SAVE_EVERY = 50;
const CONSUMER = new URL("./_consumer.ts", import.meta.url).pathname;

interface Run {
  offsets: number[];
  code: number;
  stderr: string;
}

/** Runs the consumer; kills it with SIGKILL once it printed `killAfter` lines (if given). */
async function runConsumer(url: string, cursor: string, killAfter?: number): Promise<Run> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CONSUMER, url, cursor, String(TOTAL), String(SAVE_EVERY)],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  let text = "";
  let killed = false;
  // A consumer that hangs fails the test instead of hanging it.
  const watchdog = setTimeout(() => {
    killed = true;
    child.kill("SIGKILL");
  }, 60_000);
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
      if (!killed && killAfter !== undefined && text.split("\n").length - 1 >= killAfter) {
        child.kill("SIGKILL");
        killed = true;
      }
    }
  } finally {
    clearTimeout(watchdog);
    if (!killed && killAfter !== undefined) {
      try {
        child.kill("SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
  const status = await child.status;
  // A line cut by the kill is not a complete print.
  const complete = text.slice(0, text.lastIndexOf("\n") + 1);
  const offsets = complete.split("\n").filter((l) => l !== "").map(Number);
  return { offsets, code: status.code, stderr: await stderr };
}

async function readCursor(path: string): Promise<number> {
  return JSON.parse(await Deno.readTextFile(path)).offset;
}

Deno.test("cursor: a consumer killed mid-stream resumes with no row skipped and few repeated", async () => {
  const f = await fixture({ maxReplay: null });
  const dir = await tempDir();
  let publishing = true;
  try {
    await f.send(1, 1000);
    // Rows keep coming while the consumer runs, is killed and restarts.
    const publisher = (async () => {
      let next = 1001;
      while (next <= TOTAL && publishing) {
        await f.send(next, Math.min(next + 9, TOTAL));
        next += 10;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const cursor = `${dir}/consumer.cursor`;
    const runs: Run[] = [];
    const saved: number[] = [];
    for (const killAfter of [700, 900, 800]) {
      const run = await runConsumer(f.url, cursor, killAfter);
      assert(run.code !== 0, `run ${runs.length + 1} was killed (code ${run.code})\n${run.stderr}`);
      runs.push(run);
      saved.push(await readCursor(cursor));
    }
    const last = await runConsumer(f.url, cursor);
    assertEquals(last.code, 0, last.stderr);
    runs.push(last);
    publishing = false;
    await publisher;

    for (const [i, run] of runs.entries()) {
      assert(run.offsets.length > 0, `run ${i + 1} printed nothing`);
      // Within a run, offsets are contiguous.
      for (let k = 1; k < run.offsets.length; k++) {
        assertEquals(run.offsets[k], run.offsets[k - 1] + 1, `run ${i + 1} at ${k}`);
      }
    }
    assertEquals(runs[0].offsets[0], 1);
    for (let i = 1; i < runs.length; i++) {
      const lastPrinted = runs[i - 1].offsets.at(-1)!;
      const resumedAt = runs[i].offsets[0];
      // The restart starts exactly at the saved cursor ...
      assertEquals(resumedAt, saved[i - 1], `run ${i + 1} starts at the saved cursor`);
      // ... which never passes a row not printed (no skip) ...
      assert(
        resumedAt <= lastPrinted + 1,
        `run ${i + 1} skipped ${lastPrinted + 1}..${resumedAt - 1}`,
      );
      // ... and repeats at most the rows since the last save, plus the current one.
      const repeated = lastPrinted + 1 - resumedAt;
      assert(repeated <= SAVE_EVERY + 1, `run ${i + 1} repeated ${repeated} rows`);
    }
    assertEquals(runs.at(-1)!.offsets.at(-1), TOTAL);
    const seen = new Set(runs.flatMap((r) => r.offsets));
    assertEquals(seen.size, TOTAL, "every offset was printed");
    assertEquals(await readCursor(cursor), TOTAL + 1, "the final commit saved past the last row");
  } finally {
    publishing = false;
    await rmrf(dir);
    await f.stop();
  }
});
