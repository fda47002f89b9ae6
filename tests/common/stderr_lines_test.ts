import { deepStrictEqual, equal, match } from "node:assert/strict";
import { setImmediate } from "node:timers";
import { STDERR_FLUSH_BYTES, StderrLines } from "../../common/stderr_lines.ts";

const turn = () => new Promise((r) => setImmediate(r));

// A writer into a real file that counts its calls, and may take fewer bytes than offered.
async function fileWriter(most = Infinity) {
  const path = await Deno.makeTempFile({ prefix: "streamcast-stderr-lines-" });
  const file = await Deno.open(path, { write: true });
  const calls: number[] = [];
  const write = (bytes: Uint8Array) => {
    const n = file.writeSync(bytes.subarray(0, Math.min(most, bytes.length)));
    calls.push(n);
    return n;
  };
  return {
    write,
    calls,
    text: () => Deno.readTextFile(path),
    async close() {
      file.close();
      await Deno.remove(path);
    },
  };
}

Deno.test("stderr lines writes every line of a turn in one write at its end", async () => {
  const f = await fileWriter();
  const lines = new StderrLines(f.write);
  for (let i = 0; i < 1000; i++) lines.write(`line ${i}`);
  equal(f.calls.length, 0);
  await turn();
  equal(f.calls.length, 1);
  const expected = Array.from({ length: 1000 }, (_, i) => `line ${i}\n`).join("");
  equal(await f.text(), expected);
  lines.write("next turn");
  await turn();
  equal(f.calls.length, 2);
  equal(await f.text(), expected + "next turn\n");
  await f.close();
});

Deno.test("stderr lines writes at once past its byte bound, and finishes a partial write", async () => {
  const f = await fileWriter(1000);
  const lines = new StderrLines(f.write);
  const line = "x".repeat(999);
  const n = Math.ceil(STDERR_FLUSH_BYTES / 1000);
  for (let i = 0; i < n; i++) lines.write(line);
  // Flushed in this turn, in 1000-byte pieces (the writer takes no more).
  equal(f.calls.length, n);
  equal(await f.text(), `${line}\n`.repeat(n));
  lines.flush(); // nothing queued: no write
  equal(f.calls.length, n);
  await turn();
  equal(f.calls.length, n);
  await f.close();
});

Deno.test("stderr lines drops its queue when the write fails, without throwing", async () => {
  let calls = 0;
  const lines = new StderrLines(() => {
    calls++;
    throw new Deno.errors.BrokenPipe("closed");
  });
  lines.write("lost");
  lines.flush();
  lines.flush();
  equal(calls, 1);
  await turn();
  equal(calls, 1);
});

// A process that logs through batchedStderr and then ends as `how` says, in the same turn.
async function runLogger(how: string): Promise<{ code: number; stderr: string }> {
  const url = new URL("../../common/stderr_lines.ts", import.meta.url).href;
  const logger = new URL("../../common/logger.ts", import.meta.url).href;
  const program = `
    import { batchedStderr } from ${JSON.stringify(url)};
    import { Logger } from ${JSON.stringify(logger)};
    const log = new Logger({ write: batchedStderr });
    for (let i = 0; i < 3; i++) log.info("subscribe", { n: i });
    ${how}
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", program],
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

const QUEUED = "streamcast: subscribe n=0\nstreamcast: subscribe n=1\nstreamcast: subscribe n=2\n";

Deno.test("stderr lines are written when the process calls Deno.exit in the same turn", async () => {
  const r = await runLogger("Deno.exit(3);");
  equal(r.code, 3);
  equal(r.stderr, QUEUED);
});

Deno.test("stderr lines are written when the program ends", async () => {
  const r = await runLogger("");
  equal(r.code, 0);
  equal(r.stderr, QUEUED);
});

Deno.test("stderr lines: a warn line goes out at once with the lines before it", async () => {
  // The process dies of an uncaught error in the same turn: no end-of-turn write happens.
  const r = await runLogger('log.warn("dropped", { code: 4429 }); throw new Error("boom");');
  equal(r.code, 1);
  deepStrictEqual(r.stderr.split("\n").slice(0, 4), [
    ...QUEUED.trimEnd().split("\n"),
    "streamcast: warn dropped code=4429",
  ]);
  match(r.stderr, /boom/);
});
