// A newcomer's first command on a fresh machine: a fresh clone and an empty
// DENO_DIR (Deno's package cache), then `deno run -A cli.ts demo`. It must be
// serving without downloading any package that only the tests or benchmarks
// use (those are in deno.dev.json, not deno.json).
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { REPO } from "../../harness/demo.ts";

async function readJson(path: string): Promise<Record<string, unknown>> {
  return JSON.parse(await Deno.readTextFile(path));
}

/** The packages deno.dev.json adds to deno.json: the test and benchmark tools. */
async function devOnlyPackages(): Promise<string[]> {
  const main = (await readJson(`${REPO}/deno.json`)).imports as Record<string, string>;
  const dev = (await readJson(`${REPO}/deno.dev.json`)).imports as Record<string, string>;
  return Object.keys(dev).filter((k) => !(k in main));
}

Deno.test("a fresh clone with an empty package cache serves the demo without fetching test tools", async () => {
  const devOnly = await devOnlyPackages();
  assert(devOnly.length > 0, "deno.dev.json names the test-only packages");
  const dir = await tempDir();
  let child: Deno.ChildProcess | null = null;
  try {
    const clone = `${dir}/streamcast`;
    const cloned = await new Deno.Command("git", {
      args: ["clone", "--quiet", "--no-hardlinks", REPO, clone],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert(cloned.success, new TextDecoder().decode(cloned.stderr));
    const started = performance.now();
    child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "cli.ts", "demo", "--port", "0", "--root", `${dir}/data`],
      cwd: clone,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1", DENO_DIR: `${dir}/deno_dir`, DENO_NO_UPDATE_CHECK: "1" },
    }).spawn();
    let stderr = "";
    const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
    const deadline = setTimeout(() => child?.kill("SIGKILL"), 120_000);
    try {
      while (!/listening on http:\/\/\S+/.test(stderr)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`demo exited before listening:\n${stderr}`);
        stderr += value;
      }
    } finally {
      clearTimeout(deadline);
    }
    const seconds = (performance.now() - started) / 1000;
    const downloads = stderr.split("\n").filter((l) => l.startsWith("Download "));
    console.log(`fresh demo: serving after ${seconds.toFixed(1)} s, ${downloads.length} downloads`);
    assert(downloads.length > 0, "an empty DENO_DIR downloads the runtime packages");
    for (const name of devOnly) {
      const fetched = downloads.filter((l) =>
        l.includes(`registry.npmjs.org/${name}/`) ||
        l.endsWith(`registry.npmjs.org/${name.replace("/", "%2f")}`) ||
        l.endsWith(`registry.npmjs.org/${name}`)
      );
      assertEquals(fetched, [], `demo must not download the test-only package ${name}`);
    }
    const url = /listening on (http:\/\/\S+)/.exec(stderr)![1];
    const health = await fetch(`${url}/_/health`);
    assertEquals(health.status, 200);
    await health.body?.cancel();
    child.kill("SIGINT");
    assertEquals((await child.status).code, 0);
    reader.releaseLock();
    child = null;
  } finally {
    if (child) {
      child.kill("SIGKILL");
      await child.status;
    }
    await rmrf(dir);
  }
});
