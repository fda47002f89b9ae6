// The layout rules of README's "Where things are", checked on the source:
// no import cycle among the project's modules, each folder imports only the
// folders it may (and inside server/, each step of the data path only the
// steps below it); the package's entry points are
// folders' mod.ts files; no benchmark imports a test file but the shared
// harness (tests/harness/), which imports no other test file; inside bench/,
// the helpers (harness/) import no benchmark and the micro-benchmarks (micro/)
// none of the end-to-end ones (e2e/); and tests/ mirrors the source, a folder
// of tests per source folder; no source file reaches another part's
// `_`-prefixed member.
import { assert } from "./harness/assert.ts";
import { REPO } from "./harness/demo.ts";

const SOURCE = /\.(ts|js|mjs)$/;
const SKIP_DIRS = new Set(["node_modules", ".git", "data", "tmp", "dist"]);

/** What each top-level folder may import besides itself (npm packages are always allowed). */
const MAY_IMPORT: Record<string, readonly string[]> = {
  common: [],
  wire: [],
  log: ["common"],
  client: ["common", "wire"],
  schema: ["common"],
  arrow: ["common", "wire", "log", "client", "schema"],
  cluster: ["common", "log"],
  iceberg: ["common", "log", "schema", "arrow"],
  server: ["common", "wire", "log", "client", "schema", "arrow", "cluster", "iceberg"],
  cli: [
    "common",
    "wire",
    "log",
    "client",
    "schema",
    "arrow",
    "cluster",
    "iceberg",
    "server",
    "cli.ts",
    "mod.ts",
  ],
};

/**
 * What each folder of server/ may import of server/ besides itself: the
 * folders below it on the data path, and "." for the shared modules at the
 * top of server/ (every file there but serve.ts, the Deno.serve binding,
 * which may import any folder and which only mod.ts imports, and mod.ts, the
 * folder's public entry, which may import any of server/ and which nothing in
 * server/ imports). The shared modules (".") import no folder of server/.
 */
const SERVER_MAY_IMPORT: Record<string, readonly string[]> = {
  ".": [],
  access: ["."],
  frames: [],
  viewer: [],
  fanout: ["frames", "access", "."],
  stream: ["fanout", "frames", "."],
  publish: ["stream", "access", "."],
  mirror: ["stream", "."],
  member: ["stream", "."],
  admin: ["stream", "."],
  ingest: ["stream", "."],
  http: ["publish", "stream", "fanout", "frames", "viewer", "access", "."],
};
const SERVER_BINDING = "server/serve.ts";
const SERVER_ENTRY = "server/mod.ts";

async function* walk(dir: string, rel = ""): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    if (e.isDirectory) {
      if (!SKIP_DIRS.has(e.name)) yield* walk(`${dir}/${e.name}`, `${rel}${e.name}/`);
    } else if (e.isFile && SOURCE.test(e.name)) {
      yield `${rel}${e.name}`;
    }
  }
}

/** Relative imports of a module (static, re-exports and literal dynamic ones), resolved to repo paths. */
function importsOf(path: string, text: string): string[] {
  const found: string[] = [];
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const re =
    /(?:^|[\s;])(?:import|export)\s[^;]*?from\s*["']([^"']+)["']|import\s*\(\s*["']([^"']+)["']\s*\)|^\s*import\s*["']([^"']+)["']/gm;
  for (const m of code.matchAll(re)) {
    const spec = m[1] ?? m[2] ?? m[3];
    if (!spec.startsWith(".")) continue;
    found.push(new URL(spec, `file:///${path}`).pathname.slice(1));
  }
  return found;
}

function topOf(path: string): string {
  return path.includes("/") ? path.slice(0, path.indexOf("/")) : path;
}

async function sources(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const rel of walk(REPO)) out.set(rel, await Deno.readTextFile(`${REPO}/${rel}`));
  return out;
}

Deno.test("layout has no import cycle among the project's modules", async () => {
  const files = await sources();
  const graph = new Map<string, string[]>();
  for (const [path, text] of files) {
    graph.set(path, importsOf(path, text).filter((p) => files.has(p)));
  }
  const state = new Map<string, "open" | "done">();
  const cycles: string[] = [];
  const visit = (node: string, stack: string[]): void => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") {
        cycles.push([...stack.slice(stack.indexOf(next)), next].join(" → "));
      } else if (!state.has(next)) visit(next, stack);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node, []);
  assert(cycles.length === 0, `import cycles:\n${cycles.join("\n")}`);
});

Deno.test("layout: each folder imports only the folders it may", async () => {
  const files = await sources();
  const wrong: string[] = [];
  for (const [path, text] of files) {
    const from = topOf(path);
    const allowed = MAY_IMPORT[from];
    if (!allowed) continue; // tests, bench, examples, docs and the entry points may import anything
    for (const target of importsOf(path, text)) {
      const to = topOf(target);
      if (to !== from && !allowed.includes(to)) wrong.push(`${path} imports ${target}`);
    }
  }
  assert(wrong.length === 0, `imports against the layout:\n${wrong.join("\n")}`);
});

// The part of server/ a server path is in: its folder, or "." for a file at the top.
function serverPart(path: string): string {
  const rest = path.slice("server/".length);
  return rest.includes("/") ? rest.slice(0, rest.indexOf("/")) : ".";
}

Deno.test("layout: each folder of server/ imports only the steps of the data path below it", async () => {
  const files = await sources();
  const wrong: string[] = [];
  for (const [path, text] of files) {
    if (!path.startsWith("server/")) continue;
    for (const target of importsOf(path, text)) {
      if (!target.startsWith("server/") || !files.has(target)) continue;
      if (path === SERVER_ENTRY) continue;
      if (target === SERVER_ENTRY) {
        wrong.push(`${path} imports ${target} (the public entry: nothing in server/ imports it)`);
        continue;
      }
      if (target === SERVER_BINDING && path !== SERVER_BINDING) {
        wrong.push(`${path} imports ${target} (the binding: only mod.ts imports it)`);
        continue;
      }
      if (path === SERVER_BINDING) continue;
      const from = serverPart(path);
      const to = serverPart(target);
      const allowed = SERVER_MAY_IMPORT[from];
      if (!allowed) wrong.push(`${path}: server/${from}/ has no rule in SERVER_MAY_IMPORT`);
      else if (to !== from && !allowed.includes(to)) wrong.push(`${path} imports ${target}`);
    }
  }
  assert(wrong.length === 0, `imports against server/'s layout:\n${wrong.join("\n")}`);
});

/**
 * What each folder of log/ may import of log/'s folders besides itself: the
 * parts below it. Any folder may import the shared files at the top of log/
 * (options, errors, `log.json`, recovery…) but not the façade (log.ts) or
 * the public entry (mod.ts), which sit on top of every part.
 */
const LOG_MAY_IMPORT: Record<string, readonly string[]> = {
  disk: [],
  segment: ["disk"],
  producer: ["disk", "segment"],
  chunk: ["disk", "segment", "producer"],
  read: ["disk", "segment", "chunk"],
  replica: ["disk", "segment", "producer", "chunk", "read"],
};
const LOG_TOP: readonly string[] = ["log/log.ts", "log/mod.ts"];

// The part of log/ a log path is in: its folder, or "." for a file at the top.
function logPart(path: string): string {
  const rest = path.slice("log/".length);
  return rest.includes("/") ? rest.slice(0, rest.indexOf("/")) : ".";
}

Deno.test("layout: each folder of log/ imports only the parts below it, never the façade", async () => {
  const files = await sources();
  const wrong: string[] = [];
  for (const [path, text] of files) {
    if (!path.startsWith("log/") || logPart(path) === ".") continue;
    const from = logPart(path);
    const allowed = LOG_MAY_IMPORT[from];
    if (!allowed) {
      wrong.push(`${path}: log/${from}/ has no rule in LOG_MAY_IMPORT`);
      continue;
    }
    for (const target of importsOf(path, text)) {
      if (!target.startsWith("log/")) continue;
      const to = logPart(target);
      if (LOG_TOP.includes(target)) wrong.push(`${path} imports ${target} (the façade or entry)`);
      else if (to !== "." && to !== from && !allowed.includes(to)) {
        wrong.push(`${path} imports ${target}`);
      }
    }
  }
  assert(wrong.length === 0, `imports against log/'s layout:\n${wrong.join("\n")}`);
});

/** The folders of tests/ that are no source folder's mirror. */
const TESTS_OWN = new Set(["harness", "system", "fixtures"]);

Deno.test("layout: tests/ mirrors the source, one folder of tests per source folder", async () => {
  const wrong: string[] = [];
  for await (const e of Deno.readDir(`${REPO}/tests`)) {
    if (!e.isDirectory || TESTS_OWN.has(e.name)) continue;
    const source = await Deno.stat(`${REPO}/${e.name}`).catch(() => null);
    if (!source?.isDirectory) wrong.push(`tests/${e.name}/ mirrors no source folder`);
    else {
      for await (const sub of Deno.readDir(`${REPO}/tests/${e.name}`)) {
        if (!sub.isDirectory) continue;
        const part = await Deno.stat(`${REPO}/${e.name}/${sub.name}`).catch(() => null);
        if (!part?.isDirectory) {
          wrong.push(`tests/${e.name}/${sub.name}/ mirrors no folder of ${e.name}/`);
        }
      }
    }
  }
  assert(wrong.length === 0, `test folders:\n${wrong.join("\n")}`);
});

const HARNESS = "tests/harness/";

Deno.test("layout: benchmarks import of tests/ only the shared harness, which imports no other test file", async () => {
  const files = await sources();
  const wrong: string[] = [];
  for (const [path, text] of files) {
    const bench = path.startsWith("bench/");
    if (!bench && !path.startsWith(HARNESS)) continue;
    for (const target of importsOf(path, text)) {
      if (target.startsWith("tests/") && !target.startsWith(HARNESS)) {
        wrong.push(`${path} imports ${target}`);
      }
    }
  }
  assert(wrong.length === 0, `imports of test files outside ${HARNESS}:\n${wrong.join("\n")}`);
});

/** What each folder of bench/ may import of bench/ besides itself. */
const BENCH_MAY_IMPORT: Record<string, readonly string[]> = {
  harness: [],
  micro: ["harness"],
  e2e: ["harness"],
  ".": ["harness", "micro", "e2e"],
};

Deno.test("layout: bench/ helpers import no benchmark, micro-benchmarks no end-to-end one", async () => {
  const files = await sources();
  const wrong: string[] = [];
  const partOf = (path: string) => {
    const rest = path.slice("bench/".length);
    return rest.includes("/") ? rest.slice(0, rest.indexOf("/")) : ".";
  };
  for (const [path, text] of files) {
    if (!path.startsWith("bench/")) continue;
    const from = partOf(path);
    const allowed = BENCH_MAY_IMPORT[from];
    if (!allowed) {
      wrong.push(`${path}: bench/${from}/ has no rule in BENCH_MAY_IMPORT`);
      continue;
    }
    for (const target of importsOf(path, text)) {
      if (!target.startsWith("bench/")) continue;
      const to = partOf(target);
      if (to !== from && !allowed.includes(to)) wrong.push(`${path} imports ${target}`);
    }
  }
  assert(wrong.length === 0, `imports against bench/'s layout:\n${wrong.join("\n")}`);
});

// A `_`-prefixed member declared in a class or interface body: `_name(`, `get _name()`, `_name:` …
const UNDERSCORE_MEMBER =
  /^\s+(?:(?:readonly|static|async|get|set|private|protected|public|override)\s+)*(_[A-Za-z]\w*)\s*[(<:=?!;]/gm;

// The part a path is in: its top folder, or inside server/ the step of the
// data path (its folder there); "." for a file at the root.
function folderOf(path: string): string {
  const parts = path.split("/");
  if (parts.length === 1) return ".";
  return parts[0] === "server" && parts.length > 2 ? `server/${parts[1]}` : parts[0];
}

Deno.test("layout: no source file reaches another part's `_`-prefixed member", async () => {
  const files = await sources();
  const code = [...files].filter(([path]) => !/^(tests|bench)\//.test(path));
  // Where each `_` member is declared: the folders of the files declaring it.
  const declared = new Map<string, Set<string>>();
  for (const [path, text] of code) {
    for (const m of text.matchAll(UNDERSCORE_MEMBER)) {
      const folders = declared.get(m[1]) ?? new Set<string>();
      folders.add(folderOf(path));
      declared.set(m[1], folders);
    }
  }
  const wrong: string[] = [];
  for (const [path, text] of code) {
    const body = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
    for (const m of body.matchAll(/\.(_[A-Za-z]\w*)\b/g)) {
      const folders = declared.get(m[1]);
      if (folders && !folders.has(folderOf(path))) {
        wrong.push(`${path} reaches ${m[1]} (declared in ${[...folders].join(", ")})`);
      }
    }
  }
  assert(wrong.length === 0, `reaches into another part:\n${[...new Set(wrong)].join("\n")}`);
});

// client/mod.ts runs in browsers too; the cursor in a file uses Deno.*, so only the root adds it.
const ROOT_DEEP_EXPORTS: readonly string[] = ["client/file_cursor.ts"];

Deno.test("layout: the package's entry points are folders' mod.ts files, which the root mod.ts re-exports", async () => {
  const files = await sources();
  const config = JSON.parse(await Deno.readTextFile(`${REPO}/deno.json`));
  const wrong: string[] = [];
  for (const [name, path] of Object.entries(config.exports as Record<string, string>)) {
    if (name !== "." && !/^\.\/[a-z]+\/mod\.ts$/.test(path)) {
      wrong.push(`deno.json exports ${name} from ${path}, not a folder's mod.ts`);
    }
  }
  for (const target of importsOf("mod.ts", files.get("mod.ts")!)) {
    if (!/^[a-z]+\/mod\.ts$/.test(target) && !ROOT_DEEP_EXPORTS.includes(target)) {
      wrong.push(`mod.ts imports ${target}, not a folder's mod.ts`);
    }
  }
  assert(wrong.length === 0, `entry points:\n${wrong.join("\n")}`);
});
