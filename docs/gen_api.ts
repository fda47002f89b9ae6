/**
 * Generates the reference part of docs/API.md from `deno doc --json`: every
 * export of every entry point, with its kind and the first sentence of its
 * JSDoc, between the markers `<!-- reference:start -->` and
 * `<!-- reference:end -->`. A test fails when the committed file is stale.
 *
 * deno task docs           rewrite docs/API.md
 * deno task docs --check   exit 1 if it would change
 */

const ENTRIES: [string, string][] = [
  ["@streamcast/server/client", "client/mod.ts"],
  ["@streamcast/server/log", "log/mod.ts"],
  ["@streamcast/server/arrow", "arrow.ts"],
  ["@streamcast/server", "mod.ts"],
];
const START = "<!-- reference:start -->";
const END = "<!-- reference:end -->";

interface DocSymbol {
  name: string;
  declarations: { kind: string; jsDoc?: { doc?: string } }[];
}

function firstSentence(doc: string | undefined): string {
  if (!doc) return "";
  const text = doc.split("\n\n")[0].replace(/\s+/g, " ").trim();
  const m = /^(.*?[.!?])(\s|$)/.exec(text);
  const s = (m ? m[1] : text).replace(/\{@linkcode ([^}]+)\}/g, "`$1`").replace(/\|/g, "\\|");
  return s.length > 200 ? s.slice(0, 197) + "…" : s;
}

/** Renders the reference section. */
export async function reference(root: string): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", ...ENTRIES.map(([, f]) => f)],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (out.code !== 0) throw new Error(new TextDecoder().decode(out.stderr));
  const json = JSON.parse(new TextDecoder().decode(out.stdout));
  const seen = new Set<string>();
  const lines = [
    START,
    "",
    "## Reference",
    "",
    "Generated from `deno doc` by `deno task docs`: every export of every entry point (a name re-exported by a later entry point is listed once, under the first).",
  ];
  for (const [spec, file] of ENTRIES) {
    const url = new URL(file, `file://${root}/`).href;
    const symbols: DocSymbol[] = json.nodes[url]?.symbols ?? [];
    const rows = symbols
      .filter((s) => !seen.has(s.name))
      .sort((a, b) => a.name.localeCompare(b.name));
    if (rows.length === 0) continue;
    lines.push("", `### ${spec}`, "", "| export | kind | what |", "|---|---|---|");
    for (const s of rows) {
      seen.add(s.name);
      const d = s.declarations[0];
      const kind = s.declarations.map((x) => x.kind).filter((k, i, a) => a.indexOf(k) === i)
        .join(", ");
      lines.push(`| \`${s.name}\` | ${kind} | ${firstSentence(d?.jsDoc?.doc)} |`);
    }
  }
  lines.push("", END);
  return lines.join("\n") + "\n";
}

/** docs/API.md with its reference section replaced. */
export async function regenerate(root: string): Promise<{ before: string; after: string }> {
  const path = `${root}/docs/API.md`;
  const before = await Deno.readTextFile(path);
  const ref = await reference(root);
  const i = before.indexOf(START);
  const j = before.indexOf(END);
  const after = i >= 0 && j > i
    ? before.slice(0, i) + ref + before.slice(j + END.length + 1)
    : before.trimEnd() + "\n\n" + ref;
  return { before, after };
}

if (import.meta.main) {
  const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
  const { before, after } = await regenerate(root);
  if (Deno.args.includes("--check")) {
    if (before !== after) {
      console.error("docs/API.md is stale: run `deno task docs`");
      Deno.exit(1);
    }
  } else {
    await Deno.writeTextFile(`${root}/docs/API.md`, after);
    console.error("wrote docs/API.md");
  }
}
