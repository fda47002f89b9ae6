// `cli.ts tail --since T` as a real process against a real server whose log
// has an injected clock (exact append times).
import { assert, assertEquals } from "../harness/assert.ts";
import { fixture, line } from "../harness/client_server.ts";

const CLI = new URL("../../cli.ts", import.meta.url).pathname;

async function run(args: string[]): Promise<{ code: number; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

Deno.test("tail --since starts at the first row at or after the time", async () => {
  let now = 0;
  const f = await fixture({ logOptions: { clock: () => now, timers: false } });
  try {
    for (let g = 0; g < 4; g++) {
      now = (g + 1) * 1000;
      await f.send(5 * g + 1, 5 * g + 5);
    }
    for (const since of ["3000000", "1970-01-01T00:00:03Z"]) {
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", CLI, "tail", f.url, "--since", since, "--no-reconnect"],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const stderr = new Response(child.stderr).text();
      const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      while (text.split("\n").length - 1 < 10) {
        const r = await reader.read();
        if (r.done) break;
        text += r.value;
      }
      child.kill("SIGINT");
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
      const status = await child.status;
      const err = await stderr;
      assertEquals(status.code, 0, err);
      assertEquals(
        text.trimEnd().split("\n"),
        Array.from({ length: 10 }, (_, k) => line(11 + k)),
        `since ${since}`,
      );
      assert(err.includes("replaying 11..20"), err);
    }
  } finally {
    await f.stop();
  }
});

Deno.test("tail --since refuses a bad time and --offset beside it (exit 2)", async () => {
  for (
    const [args, want] of [
      [["--since", "soon"], "since must be RFC 3339"],
      [["--since", "0", "--offset", "1"], "not both"],
    ] as const
  ) {
    const r = await run(["tail", "ws://127.0.0.1:1/t", ...args]);
    assertEquals(r.code, 2, r.stderr);
    assert(r.stderr.includes(want), r.stderr);
  }
});
