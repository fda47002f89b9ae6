// `restore` and `tail` take --s3-timeout as `serve` does: against a store that
// takes connections and never answers, restore fails with the timeout named
// (each request of the SDK's tries gives up after the flag's seconds), and a
// value outside whole seconds 1-3600 is a usage error naming the flag.
import { assert, assertEquals } from "../harness/assert.ts";
import { silentStore, useS3Credentials } from "../harness/s3.ts";
import { rmrf, tempDir } from "../harness/util.ts";

const CLI = new URL("../../cli.ts", import.meta.url).pathname;

async function cli(args: string[]): Promise<{ code: number; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    stdout: "null",
    stderr: "piped",
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

Deno.test("restore --s3-timeout: a store that never answers fails the restore, the timeout named", async () => {
  useS3Credentials();
  const dir = await tempDir();
  const silent = silentStore();
  try {
    const got = await cli([
      ...["restore", "t", "--root", dir, "--archive", "s3://archive/t"],
      ...["--s3-endpoint", silent.endpoint, "--s3-path-style"],
      ...["--s3-timeout", "1"],
    ]);
    assertEquals(got.code, 1, got.stderr);
    assert(/cannot read the archive: .*time/i.test(got.stderr), got.stderr);
    assert(silent.held.length >= 1, "restore reached the store");
  } finally {
    await silent.close();
    await rmrf(dir);
  }
});

Deno.test("restore and tail: --s3-timeout takes whole seconds 1-3600", async () => {
  const dir = await tempDir();
  try {
    for (const bad of ["0", "3601", "1.5", "soon"]) {
      const restore = await cli([
        ...["restore", "t", "--root", dir, "--archive", "s3://archive/t", "--s3-timeout", bad],
      ]);
      assertEquals(restore.code, 2, restore.stderr);
      assert(/--s3-timeout must be an integer 1-3600/.test(restore.stderr), restore.stderr);
      const tail = await cli([
        ...["tail", "ws://127.0.0.1:1/t", "--catch-up", "--archive", "s3://archive/t"],
        ...["--s3-timeout", bad],
      ]);
      assertEquals(tail.code, 2, tail.stderr);
      assert(/--s3-timeout must be an integer 1-3600/.test(tail.stderr), tail.stderr);
    }
  } finally {
    await rmrf(dir);
  }
});
