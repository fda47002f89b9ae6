// `deno task compile` builds dist/streamcast from cli.ts. Compiling needs the
// denort runtime from the network, so the test checks what can be checked
// here: the entry point type-checks with everything it imports.
import { assert } from "../../harness/assert.ts";
import { REPO } from "../../harness/demo.ts";

Deno.test("cli.ts (the compile entry point) type-checks", async () => {
  const res = await new Deno.Command(Deno.execPath(), {
    args: ["check", "cli.ts"],
    cwd: REPO,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const text = new TextDecoder().decode(res.stderr) + new TextDecoder().decode(res.stdout);
  assert(res.success, `deno check cli.ts failed:\n${text}`);
});
