// deno.json is what `cli.ts` runs with; deno.dev.json is the same plus the
// packages only tests and benchmarks use. They must not drift apart.
import { assert, assertEquals } from "./harness/assert.ts";
import { REPO } from "./harness/demo.ts";

async function readJson(path: string): Promise<Record<string, unknown>> {
  return JSON.parse(await Deno.readTextFile(`${REPO}/${path}`));
}

Deno.test("deno.dev.json holds every package of deno.json at the same version, and its compiler options", async () => {
  const main = await readJson("deno.json");
  const dev = await readJson("deno.dev.json");
  const mainImports = main.imports as Record<string, string>;
  const devImports = dev.imports as Record<string, string>;
  for (const [name, spec] of Object.entries(mainImports)) {
    assertEquals(devImports[name], spec, `deno.dev.json pins ${name} as deno.json does`);
  }
  assertEquals(dev.compilerOptions, main.compilerOptions);
  // Doc examples import the package by its own name and exports.
  assertEquals([dev.name, dev.version, dev.exports], [main.name, main.version, main.exports]);
  assertEquals(dev.nodeModulesDir, main.nodeModulesDir);
});

Deno.test("deno.lock names no test-only package, so cli.ts never fetches one", async () => {
  const main = (await readJson("deno.json")).imports as Record<string, string>;
  const dev = (await readJson("deno.dev.json")).imports as Record<string, string>;
  const lock = await Deno.readTextFile(`${REPO}/deno.lock`);
  const devOnly = Object.entries(dev).filter(([k]) => !(k in main));
  assert(devOnly.length > 0);
  for (const [name, spec] of devOnly) {
    assert(!lock.includes(`"${spec}"`), `deno.lock must not hold ${spec} (${name})`);
  }
});
