// The progress line of long CLI work (export, restore, tail --catch-up): its
// text, its drawing, and that a piped stderr never gets it.
import { join } from "node:path";
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { Progress } from "../../cli/_progress.ts";
import { Stream } from "../../server/stream/stream.ts";
import { fixture } from "../harness/client_server.ts";

const CLI = new URL("../../cli.ts", import.meta.url).pathname;

function assertMatch(text: string, pattern: RegExp): void {
  assert(pattern.test(text), `${pattern} does not match ${JSON.stringify(text)}`);
}

Deno.test("progress line says rows, rows/s, and offset X of Y", () => {
  const p = new Progress("export", { enabled: false });
  assertMatch(
    p.line({ rows: 10, offset: 10, total: 100 }),
    /^export: 10 rows, \d+ rows\/s, offset 10 of 100$/,
  );
  assertMatch(p.line({ rows: 3 }), /^export: 3 rows, \d+ rows\/s$/);
  assertMatch(p.line({ rows: 3, offset: 7 }), /^export: 3 rows, \d+ rows\/s, offset 7$/);
  assertMatch(
    p.line({ rows: 3, offset: 7, total: 9, detail: "1.0 MiB written" }),
    /^export: 3 rows, \d+ rows\/s, offset 7 of 9, 1\.0 MiB written$/,
  );
  assertEquals(
    new Progress("restore", { enabled: false }).line({ detail: "hydrated chunk 1/2" }),
    "restore: hydrated chunk 1/2",
  );
});

Deno.test("progress redraws one \\r line at most every 250 ms and ends it with a newline", () => {
  const out: string[] = [];
  const p = new Progress("tail: catching up", { enabled: true, write: (t) => out.push(t) });
  p.update({ rows: 1, offset: 1, total: 5 });
  p.update({ rows: 2, offset: 2, total: 5 }); // too soon: not drawn
  assertEquals(out.length, 1);
  const CLEAR = "\r\x1b[2K"; // back to the line's start, erase it
  assert(out[0].startsWith(CLEAR), JSON.stringify(out[0]));
  assertMatch(
    out[0].slice(CLEAR.length),
    /^tail: catching up: 1 rows, \d+ rows\/s, offset 1 of 5$/,
  );
  p.done();
  assert(out[1].startsWith(CLEAR), JSON.stringify(out[1]));
  assertMatch(
    out[1].slice(CLEAR.length),
    /^tail: catching up: 2 rows, \d+ rows\/s, offset 2 of 5$/,
  );
  assertEquals(out[2], "\n");
  assert(p.drawn);
  // Disabled (stderr not a terminal): nothing at all.
  const quiet: string[] = [];
  const q = new Progress("export", { enabled: false, write: (t) => quiet.push(t) });
  q.update({ rows: 1 });
  q.done();
  assertEquals([quiet.length, q.drawn], [0, false]);
});

Deno.test("export with a piped stderr prints its last line and no progress line", async () => {
  const root = await tempDir("streamcast-progress-");
  try {
    const stream = await Stream.open("ticks", {
      root,
      schema: { type: "object", properties: { v: { type: "integer" } }, required: ["v"] },
    });
    await stream.sendMany(Array.from({ length: 5000 }, (_, i) => ({ v: i })));
    await stream.close();
    const out = join(root, "ticks.ndjson");
    const r = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "export", join(root, "ticks"), "--format", "ndjson", "--out", out],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(r.stderr);
    assertEquals(r.code, 0, err);
    assert(!err.includes("\r"), JSON.stringify(err));
    assertMatch(err, /^export: wrote 5000 rows \(offsets 1\.\.5000\) to .* as ndjson, .*\n$/);
  } finally {
    await rmrf(root);
  }
});

Deno.test("tail --catch-up with a piped stderr draws no progress line", async () => {
  const f = await fixture({ maxReplay: 10 });
  try {
    for (let i = 1; i <= 1000; i += 500) {
      await f.send(i, i + 499);
      await f.stream.log!.roll();
    }
    await f.stream.log!.chunks.settled();
    const proc = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "tail", f.url, "--offset", "1", "--catch-up"],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(proc.stderr).text();
    const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    const deadline = Date.now() + 20_000;
    while (text.split("\n").length <= 1000 && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    proc.kill("SIGINT");
    reader.releaseLock();
    await proc.stdout.cancel().catch(() => {});
    assertEquals((await proc.status).code, 0);
    const err = await stderr;
    assertEquals(text.split("\n").filter(Boolean).length, 1000);
    assert(err.includes("replaying 1..1000"), err);
    assert(!err.includes("\r"), JSON.stringify(err));
  } finally {
    await f.stop();
  }
});
