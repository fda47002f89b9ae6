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
