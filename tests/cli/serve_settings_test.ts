// The settings table of `serve` is the one list: the usage text, the flags and
// the config keys come from it, and docs/CLI.md says what each setting means.
import { assert, assertEquals } from "../harness/assert.ts";
import { CONFIG_KEYS, SERVE_FLAGS, SERVE_USAGE, SETTINGS } from "../../cli/serve/settings.ts";

const DOCS = await Deno.readTextFile(new URL("../../docs/CLI.md", import.meta.url));

/** The rows of the markdown table under `heading`, as cells. */
function table(heading: string): string[][] {
  const lines = DOCS.split("\n");
  let at = lines.findIndex((l) => l.startsWith(heading));
  assert(at !== -1, heading);
  while (!lines[at].startsWith("|")) at++;
  const rows: string[][] = [];
  for (at += 2; lines[at]?.startsWith("|"); at++) {
    rows.push(lines[at].split(/(?<!\\)\|/).slice(1, -1).map((c) => c.trim()));
  }
  return rows;
}

Deno.test("serve settings: each flag is in the usage, the parser and the docs' flags table", () => {
  const flags = table("## Flags");
  for (const s of SETTINGS) {
    assert(SERVE_FLAGS[s.flag]?.type === s.type, s.flag);
    assert(SERVE_USAGE.includes(`  --${s.flag}`), `--${s.flag} is not in the usage`);
    const row = flags.find((r) => r[0].includes(`\`--${s.flag}`) && r[2] === s.docs);
    assert(row, `docs/CLI.md has no row for --${s.flag} saying ${JSON.stringify(s.docs)}`);
  }
  assertEquals(Object.keys(SERVE_FLAGS).length, SETTINGS.length);
});

Deno.test("serve settings: the config keys are the table's, and docs/CLI.md lists each", () => {
  const keys = table("| key ").flatMap((r) => [...r[0].matchAll(/`([A-Za-z0-9]+)`/g)])
    .map((m) => m[1]);
  const want = SETTINGS.flatMap((s) => s.key === undefined ? [] : [s.key]);
  assertEquals([...CONFIG_KEYS], want);
  assertEquals(new Set(keys), new Set(want));
});
