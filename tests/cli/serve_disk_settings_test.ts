// `serve`'s disk settings as an operator gives them: retention by flag and
// by config key, server-wide and per stream (a stream's own wins), sizes and
// durations in their units, and a bad value refused naming the flag or key.
import { join } from "node:path";
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { settingsFrom } from "../../cli/serve/config.ts";
import { streamOptionsOf } from "../../cli/serve/streams.ts";
import { UsageError } from "../../cli/_args.ts";
import { Fatal } from "../../cli/serve/fatal.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { runServe } from "../harness/serve.ts";

Deno.test("serve disk settings: flags reach every stream's log; a stream's own config wins", async () => {
  const dir = await tempDir();
  try {
    const config = join(dir, "serve.json");
    await Deno.writeTextFile(
      config,
      JSON.stringify({
        streams: {
          a: { schema: "a.json", retainBytes: "2GiB" },
          b: { schema: "b.json", retainAge: 90 },
          e: { schema: "e.json", ephemeral: true },
        },
      }),
    );
    const s = await settingsFrom({
      config,
      "retain-age": "7d",
      "retain-bytes": "500MB",
      "min-free-bytes": "1GiB",
      "seal-every": "5",
    });
    assertEquals([s.retainAge, s.retainBytes, s.minFreeBytes], [604_800, 500_000_000, 2 ** 30]);
    const a = streamOptionsOf(s, s.streams.get("a")!);
    assertEquals(a.logOptions?.chunks, { retainAgeMs: 604_800_000, retainBytes: 2 ** 31 });
    assertEquals(a.logOptions?.maintainEveryMs, 5000);
    assertEquals(a.minFreeBytes, 2 ** 30);
    const b = streamOptionsOf(s, s.streams.get("b")!);
    assertEquals(b.logOptions?.chunks, { retainAgeMs: 90_000, retainBytes: 500_000_000 });
    assertEquals(streamOptionsOf(s, s.streams.get("e")!).minFreeBytes, undefined);
    const none = await settingsFrom({ stream: ["t=t.json"] });
    assertEquals([none.retainAge, none.retainBytes, none.minFreeBytes], [null, null, 64 << 20]);
    assertEquals(streamOptionsOf(none, none.streams.get("t")!).logOptions?.chunks, undefined);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("serve disk settings: a bad size or duration is refused naming the flag or key", async () => {
  const err = await assertRejects(
    () => settingsFrom({ stream: ["t=t.json"], "retain-age": "soon" }),
    UsageError,
  );
  assert(/--retain-age must be a duration like 90s/.test(err.message), err.message);
  const size = await assertRejects(
    () => settingsFrom({ stream: ["t=t.json"], "retain-bytes": "2 parsecs" }),
    UsageError,
  );
  assert(/--retain-bytes must be a size like 500MB/.test(size.message), size.message);
  const dir = await tempDir();
  try {
    const config = join(dir, "serve.json");
    await Deno.writeTextFile(
      config,
      JSON.stringify({ streams: { t: { schema: "t.json", retainBytes: -1 } } }),
    );
    const bad = await assertRejects(() => settingsFrom({ config }), Fatal);
    assert(/"streams\.t\.retainBytes" must be a size/.test(bad.message), bad.message);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("serve disk settings: a retention age or size past its bounds is refused at start, naming the value and the bound", async () => {
  const dir = await tempDir();
  try {
    const schema = join(dir, "t.json");
    await Deno.writeTextFile(
      schema,
      JSON.stringify({ type: "object", properties: { v: { type: "number" } }, required: ["v"] }),
    );
    const base = ["--stream", `t=${schema}`, "--root", join(dir, "data"), "--port", "0"];
    const cases: [string[], string][] = [
      [["--retain-age", "1e-300"], "--retain-age must be"],
      [["--retain-age", "0.5"], '--retain-age must be at least 1 s, got "0.5" (0.5 s)'],
      [
        ["--retain-age", "36501d"],
        '--retain-age must be at most 100 years (3153600000 s = 36500d), got "36501d"',
      ],
      [["--retain-bytes", "100"], '--retain-bytes must be at least 1KiB (1024 bytes), got "100"'],
      [["--retain-bytes", "1025TiB"], "--retain-bytes must be at most 1PiB"],
      [
        ["--retain-bytes", "2000TB"],
        '--retain-bytes must be at most 1PiB (1125899906842624 bytes), got "2000TB"',
      ],
    ];
    for (const [flags, message] of cases) {
      const r = await runServe([...base, ...flags]);
      assertEquals(r.code, 2, `${flags.join(" ")}: ${r.stderr}`);
      assert(r.stderr.includes(message), `${flags.join(" ")}: ${r.stderr}`);
    }
    // Config file: the same bounds per stream, named by the key.
    const config = join(dir, "serve.json");
    await Deno.writeTextFile(
      config,
      JSON.stringify({ root: join(dir, "data"), streams: { t: { schema, retainAge: 1e300 } } }),
    );
    const r = await runServe(["--config", config, "--port", "0"]);
    assert(r.code !== 0, r.stderr);
    assert(
      r.stderr.includes(
        '"streams.t.retainAge" must be at most 100 years (3153600000 s = 36500d), got 1e+300',
      ),
      r.stderr,
    );
  } finally {
    await rmrf(dir);
  }
});
