// `cli.ts tail --snapshot` as a real process against a real server with a
// keyed stream: the latest row per key, then the rows after, live.
import { assert, assertEquals } from "../harness/assert.ts";
import { fixture, line } from "../harness/client_server.ts";

const CLI = new URL("../../cli.ts", import.meta.url).pathname;

Deno.test("tail --snapshot prints the latest row per key, then the rows after it", async () => {
  const f = await fixture({ key: ["symbol"] });
  try {
    await f.send(1, 10);
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "tail", f.url, "--snapshot", "--no-reconnect"],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(child.stderr).text();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    let sent = false;
    while (text.split("\n").length - 1 < 4) {
      const r = await reader.read();
      if (r.done) break;
      text += r.value;
      if (!sent && text.split("\n").length - 1 >= 2) {
        sent = true;
        await f.send(11, 12);
      }
    }
    child.kill("SIGINT");
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
    const status = await child.status;
    const err = await stderr;
    assertEquals(status.code, 0, err);
    assertEquals(text.trimEnd().split("\n"), [9, 10, 11, 12].map((i) => line(i)));
    assert(err.includes("the latest row of 2 key(s) below offset 11"), err);
  } finally {
    await f.stop();
  }
});

Deno.test("tail --snapshot refuses --offset and --since beside it (exit 2)", async () => {
  for (const extra of [["--offset", "1"], ["--since", "0"]]) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "tail", "ws://127.0.0.1:1/t", "--snapshot", ...extra],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(out.stderr);
    assertEquals(out.code, 2, err);
    assert(err.includes("--snapshot starts at the snapshot"), err);
  }
});
