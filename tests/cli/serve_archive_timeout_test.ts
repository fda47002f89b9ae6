// An S3 store that takes connections and never answers: each request of the
// archive fails after --s3-timeout (said as archive_error) and is tried again,
// instead of waiting for as long as TCP takes to give up, and the server goes
// on taking rows meanwhile.
import { assert, assertEquals } from "../harness/assert.ts";
import { runServe, type ServeProc, startServe } from "../harness/serve.ts";
import { silentStore, useS3Credentials } from "../harness/s3.ts";
import { freePort, rmrf, tempDir, until } from "../harness/util.ts";

const SCHEMA = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };

// The `archive_error` events serve logged (JSON lines on stderr).
function archiveErrors(s: ServeProc): Record<string, unknown>[] {
  return s.stderr().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l))
    .filter((e) => e.event === "archive_error");
}

async function post(url: string, v: number): Promise<number> {
  const r = await fetch(`${url}/t`, {
    method: "POST",
    headers: { "content-type": "application/x-ndjson" },
    body: JSON.stringify({ v }) + "\n",
  });
  await r.body?.cancel();
  return r.status;
}

Deno.test("serve --archive: a store that never answers fails each request after --s3-timeout, said as archive_error; rows are still taken", async () => {
  useS3Credentials();
  const dir = await tempDir();
  const silent = silentStore();
  let s: ServeProc | null = null;
  try {
    await Deno.writeTextFile(`${dir}/t.json`, JSON.stringify(SCHEMA));
    s = await startServe([
      "--stream",
      `t=${dir}/t.json`,
      "--publish",
      "t",
      "--root",
      `${dir}/data`,
      "--archive",
      "s3://archive/t",
      "--s3-endpoint",
      silent.endpoint,
      "--s3-path-style",
      "--s3-timeout",
      "1",
      "--seal-every",
      "1",
      "--log-format",
      "json",
      "--port",
      String(freePort()),
    ]);
    const url = s.url;
    assertEquals(await post(url, 1), 200);
    await until(
      () => archiveErrors(s!).length > 0,
      30_000,
      "an archive_error once the silent store's first request times out",
    );
    const error = String(archiveErrors(s).at(-1)!.error);
    assert(/time/i.test(error), `archive_error names the timeout: ${error}`);
    assert(silent.held.length >= 1, "the archive reached the store");
    // Tried again: more requests reach the store, and rows are still taken.
    const reached = silent.held.length;
    await until(() => silent.held.length > reached, 30_000, "the archive to try the store again");
    assertEquals(await post(url, 2), 200);
    const head = await (await fetch(`${url}/t/head`)).json();
    assertEquals(head.end_offset, 3);
  } finally {
    await s?.stop();
    await silent.close();
    await rmrf(dir);
  }
});

Deno.test("serve: --s3-timeout needs --archive and takes whole seconds 1-3600", async () => {
  const dir = await tempDir();
  try {
    await Deno.writeTextFile(`${dir}/t.json`, JSON.stringify(SCHEMA));
    const base = ["--stream", `t=${dir}/t.json`, "--root", `${dir}/data`, "--port", "0"];
    const alone = await runServe([...base, "--s3-timeout", "5"]);
    assertEquals(alone.code, 2);
    assert(/--s3-timeout need --archive/.test(alone.stderr), alone.stderr);
    const zero = await runServe([...base, "--archive", "s3://archive/t", "--s3-timeout", "0"]);
    assertEquals(zero.code, 2);
    assert(/--s3-timeout/.test(zero.stderr), zero.stderr);
  } finally {
    await rmrf(dir);
  }
});
