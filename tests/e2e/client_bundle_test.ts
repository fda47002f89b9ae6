// The browser bundle of the client that the viewer loads (/_/client.js) is
// generated (`deno task bundle`) and committed: it must match its sources.
import { assert } from "../_assert.ts";
import { REPO } from "./_demo.ts";

const BUNDLE = "server/_client_bundle.js";

Deno.test("client bundle is fresh: deno task bundle reproduces server/_client_bundle.js", async () => {
  // The task's own command line, writing to a temp file instead.
  const task = JSON.parse(await Deno.readTextFile(`${REPO}/deno.json`)).tasks.bundle as string;
  const args = task.trim().split(/\s+/);
  assert(args[0] === "deno" && args.includes("-o"), `unexpected bundle task: ${task}`);
  const out = args.indexOf("-o") + 1;
  assert(args[out] === BUNDLE, `the bundle task writes ${args[out]}, not ${BUNDLE}`);
  const tmp = await Deno.makeTempFile({ prefix: "streamcast-bundle-", suffix: ".js" });
  try {
    args[out] = tmp;
    // Run from the repository's root: the bundle names its modules by paths relative to it.
    const res = await new Deno.Command(Deno.execPath(), {
      args: args.slice(1),
      cwd: REPO,
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    assert(res.success, `deno bundle failed:\n${new TextDecoder().decode(res.stderr)}`);
    const fresh = await Deno.readFile(tmp);
    const committed = await Deno.readFile(`${REPO}/${BUNDLE}`);
    const same = fresh.length === committed.length && fresh.every((b, i) => b === committed[i]);
    assert(
      same,
      `${BUNDLE} is stale: run \`deno task bundle\` and commit the result (bundled here by ` +
        `Deno ${Deno.version.deno}; a new Deno may bundle differently, which also needs a re-bundle)`,
    );
    // The browser path uses web APIs only.
    assert(!new TextDecoder().decode(fresh).includes("Deno."), "the client bundle uses Deno APIs");
  } finally {
    await Deno.remove(tmp).catch(() => {});
  }
});
