// The browser bundle of the client that the viewer loads (/_/client.js) is
// generated (`deno task bundle`) and committed: it must match its sources.
import { assert, assertEquals } from "../../harness/assert.ts";
import { REPO } from "../../harness/demo.ts";
import { BANNER, BUNDLE } from "../../../tools/bundle_client.ts";

Deno.test("client bundle is fresh: deno task bundle reproduces server/viewer/_client_bundle.js", async () => {
  const task = JSON.parse(await Deno.readTextFile(`${REPO}/deno.json`)).tasks.bundle as string;
  assertEquals(task, "deno run -A tools/bundle_client.ts");
  const tmp = await Deno.makeTempFile({ prefix: "streamcast-bundle-", suffix: ".js" });
  try {
    // The task's own script, writing to a temp file instead.
    const res = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "tools/bundle_client.ts", tmp],
      cwd: REPO,
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    assert(res.success, `bundling failed:\n${new TextDecoder().decode(res.stderr)}`);
    const fresh = await Deno.readFile(tmp);
    const committed = await Deno.readFile(`${REPO}/${BUNDLE}`);
    const same = fresh.length === committed.length && fresh.every((b, i) => b === committed[i]);
    assert(
      same,
      `${BUNDLE} is stale: run \`deno task bundle\` and commit the result (bundled here by ` +
        `Deno ${Deno.version.deno}; a new Deno may bundle differently, which also needs a re-bundle)`,
    );
    const text = new TextDecoder().decode(fresh);
    assert(text.startsWith(BANNER), "the bundle starts with its generated banner");
    // The browser path uses web APIs only.
    assert(!text.includes("Deno."), "the client bundle uses Deno APIs");
  } finally {
    await Deno.remove(tmp).catch(() => {});
  }
});
