// `cli.ts tail` and `cli.ts head` as real processes against a real server.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { fixture, line } from "../harness/client_server.ts";

const CLI = new URL("../../cli.ts", import.meta.url).pathname;

/** Spawns cli.ts; `dispose()` kills it if still running (for failure paths) and waits for it. */
function cli(args: string[]): Deno.ChildProcess & { dispose(): Promise<void> } {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // A tail that hangs fails the test instead of hanging it.
  const watchdog = setTimeout(() => kill(), 60_000);
  function kill() {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already exited.
    }
  }
  return Object.assign(child, {
    async dispose() {
      clearTimeout(watchdog);
      kill();
      await child.status;
    },
  });
}

async function output(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Reads complete lines from a child's stdout until `n`; returns them and the reader. */
async function readLines(
  reader: ReadableStreamDefaultReader<string>,
  n: number,
  buffered: { text: string },
): Promise<string[]> {
  while (buffered.text.split("\n").length - 1 < n) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered.text += value;
  }
  return buffered.text.split("\n").slice(0, n);
}

function assertNoStackTrace(stderr: string): void {
  assert(
    !/Uncaught|\n\s+at .*:\d+:\d+|panicked/.test(stderr),
    `a stack trace on stderr:\n${stderr}`,
  );
}

Deno.test("tail piped into a reader that stops after 5 lines exits 0 without a trace", async () => {
  const f = await fixture({ maxReplay: null });
  let publishing = true;
  try {
    await f.send(1, 2000);
    // Like `yes | head`: rows keep coming, so tail keeps writing into the closed pipe.
    const publisher = (async () => {
      let next = 2001;
      while (publishing) {
        await f.send(next, next + 49);
        next += 50;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const child = cli(["tail", f.url, "--offset", "1"]);
    const stderr = new Response(child.stderr).text();
    let lines: string[];
    let status: Deno.CommandStatus;
    try {
      const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
      lines = await readLines(reader, 5, { text: "" });
      await reader.cancel(); // closes the pipe, as `head -n 5` does
      status = await child.status;
    } finally {
      await child.dispose();
      publishing = false;
      await publisher;
    }
    const err = await stderr;
    assertEquals(
      lines,
      [1, 2, 3, 4, 5].map((o) => line(o)),
      "lines exactly as the server sent them",
    );
    assertEquals(status.code, 0, err);
    assertNoStackTrace(err);
    assert(err.includes("replaying 1.."), err);
  } finally {
    publishing = false;
    await f.stop();
  }
});

Deno.test("tail exits 0 on SIGINT, and its cursor resumes at the next unprinted row", async () => {
  const f = await fixture();
  const dir = await tempDir();
  try {
    const cursor = `${dir}/tail.cursor`;
    await f.send(1, 50);
    for (const [from, to] of [[1, 50], [51, 60]]) {
      const child = cli(["tail", f.url, "--offset", "1", "--cursor", cursor]);
      const stderr = new Response(child.stderr).text();
      const buffered = { text: "" };
      let lines: string[];
      let status: Deno.CommandStatus;
      try {
        const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
        lines = await readLines(reader, to - from + 1, buffered);
        child.kill("SIGINT");
        for (let r = await reader.read(); !r.done; r = await reader.read()) {
          buffered.text += r.value; // drain to the end: nothing more may come
        }
        status = await child.status;
      } finally {
        await child.dispose();
      }
      const err = await stderr;
      assertEquals(status.code, 0, err);
      assertNoStackTrace(err);
      assertEquals(lines, Array.from({ length: to - from + 1 }, (_, k) => line(from + k)));
      assertEquals(buffered.text.split("\n").length - 1, to - from + 1, "no extra line");
      assertEquals(JSON.parse(await Deno.readTextFile(cursor)).offset, to + 1);
      if (from > 1) assert(err.includes(`resuming from ${cursor} at offset ${from}`), err);
      await f.send(51, 60);
    }
  } finally {
    await rmrf(dir);
    await f.stop();
  }
});

Deno.test("tail exits 1 with the refusal's message", async () => {
  const f = await fixture();
  try {
    await f.send(1, 50);
    const r = await output(["tail", f.url, "--offset", "999"]);
    assertEquals(r.code, 1, r.stderr);
    assertEquals(r.stdout, "");
    assert(r.stderr.includes("offset 999 is ahead") && r.stderr.includes("end is 51"), r.stderr);
    assertNoStackTrace(r.stderr);
    const nf = await output(["tail", `ws://127.0.0.1:${f.port}/nope`]);
    assertEquals(nf.code, 1, nf.stderr);
    assert(nf.stderr.includes('no stream "nope"'), nf.stderr);
    const bad = await output(["tail", f.url, "--offset", "-3"]);
    assertEquals(bad.code, 2, bad.stderr);
    const help = await output(["tail", "--help"]);
    assertEquals(help.code, 0);
    assert(help.stdout.includes("ON BY DEFAULT"), help.stdout);
  } finally {
    await f.stop();
  }
});

Deno.test("head prints the stream's head JSON and exits 1 for an unknown stream", async () => {
  const f = await fixture();
  try {
    await f.send(1, 7);
    for (const url of [f.url, `http://127.0.0.1:${f.port}/trades`]) {
      const r = await output(["head", url]);
      assertEquals(r.code, 0, r.stderr);
      const head = JSON.parse(r.stdout);
      const want = f.stream.head();
      for (const k of ["stream", "stream_id", "end_offset", "earliest", "durable", "schema"]) {
        assertEquals(head[k], want[k as keyof typeof want], k);
      }
      assertEquals(head.end_offset, 8);
    }
    const nf = await output(["head", `ws://127.0.0.1:${f.port}/nope`]);
    assertEquals(nf.code, 1);
    assert(nf.stderr.includes('no stream "nope"'), nf.stderr);
    assertNoStackTrace(nf.stderr);
  } finally {
    await f.stop();
  }
});
