// `demo` as a real process: what it prints, what it serves, its shutdown and
// restart; and the README's first command in a fresh clone of the repository.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import {
  type DemoProc,
  endOffset,
  getJson,
  REPO,
  startDemo,
  withTimeout,
} from "../harness/demo.ts";

const SCHEMA_KEYS = ["event_ts", "symbol", "price", "size", "side", "trade_id"];

/** Opens a plain WebSocket (what `wscat` does) and returns its first `n` frames after the greeting. */
async function firstFrames(
  url: string,
  n: number,
): Promise<{ greeting: Record<string, unknown>; rows: [number, Record<string, unknown>][] }> {
  const ws = new WebSocket(url);
  const frames: string[] = [];
  const closed = new Promise<void>((resolve) => {
    ws.onclose = () => resolve();
    ws.onerror = () => {};
  });
  ws.onmessage = (e) => frames.push(e.data as string);
  try {
    await until(() => frames.length >= n + 1, 10_000, `${n} rows from ${url}`);
  } finally {
    ws.close();
    await withTimeout(closed, 5_000, "the socket to close");
  }
  return {
    greeting: JSON.parse(frames[0]),
    rows: frames.slice(1, n + 1).map((f) => JSON.parse(f)),
  };
}

/** Runs `deno run -A ARGS` to its exit (killed after `ms`). */
async function run(
  args: string[],
  ms = 20_000,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", ...args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const timer = setTimeout(() => child.kill("SIGKILL"), ms);
  try {
    const out = await child.output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  } finally {
    clearTimeout(timer);
  }
}

const DEMO = new URL("../harness/demo_main.ts", import.meta.url).pathname;

Deno.test("demo prints its URLs, serves the viewer, grows, exits 0 on SIGINT, and a restart continues", async () => {
  const root = await tempDir();
  let demo: DemoProc | null = null;
  try {
    demo = await startDemo(["--port", "0", "--root", root, "--rate", "100"]);
    const hostPort = `127.0.0.1:${demo.port}`;
    const err = demo.stderr();
    assert(err.includes(`http://${hostPort}/trades`), err);
    assert(
      err.includes(`npx -y deno@2 run -A cli.ts tail ws://${hostPort}/trades --offset earliest`),
      err,
    );
    assert(err.includes(`npx -y wscat -c 'ws://${hostPort}/trades?offset=0'`), err);
    assertEquals(err.trim().split("\n").at(-1), `listening on http://${hostPort}`);

    assertEquals((await getJson(`${demo.url}/_/health`)).ok, true);
    const page = await fetch(`${demo.url}/`);
    assertEquals(page.headers.get("content-type"), "text/html; charset=utf-8");
    assert((await page.text()).includes(`from "/_/client.js"`));
    const client = await fetch(`${demo.url}/_/client.js`);
    assertEquals(client.headers.get("content-type"), "text/javascript; charset=utf-8");
    const bundle = await Deno.readTextFile(`${REPO}/server/viewer/_client_bundle.js`);
    assertEquals(await client.text(), bundle);
    assert((await (await fetch(`${demo.url}/_/viewer.js`)).text()).includes("startViewer"));

    // Rows grow, as trades with every column, trade ids following offsets.
    const a = await endOffset(demo.url);
    await until(async () => (await endOffset(demo!.url)) > a + 20, 10_000, "rows to grow");
    const { greeting, rows } = await firstFrames(`ws://${hostPort}/trades?offset=0`, 3);
    assertEquals(greeting.stream, "trades");
    assertEquals(rows.map(([o]) => o), [1, 2, 3]);
    for (const [offset, msg] of rows) {
      assertEquals(Object.keys(msg), SCHEMA_KEYS);
      assertEquals(msg.trade_id, offset);
    }

    const sig = await demo.signal("SIGINT");
    assertEquals(sig.code, 0, demo.stderr());
    assert(demo.stderr().includes("SIGINT received; shutting down"), demo.stderr());

    // The same root again: the same log, continued.
    demo = await startDemo(["--port", "0", "--root", root, "--rate", "100"]);
    const m = /continuing after offset (\d+)/.exec(demo.stderr());
    assert(m, demo.stderr());
    const last = Number(m[1]);
    assert(last >= a + 20, `continued after ${last}, but ${a + 20} rows were there`);
    await until(async () => (await endOffset(demo!.url)) > last + 3, 10_000, "new rows");
    const more = await firstFrames(`ws://127.0.0.1:${demo.port}/trades?offset=${last}`, 3);
    assertEquals(more.greeting.stream_id, greeting.stream_id);
    assertEquals(more.rows.map(([o]) => o), [last, last + 1, last + 2]);
    assertEquals(more.rows.map(([, msg]) => msg.trade_id), [last, last + 1, last + 2]);
    assertEquals((await demo.signal("SIGTERM")).code, 0, demo.stderr());
  } finally {
    await demo?.stop();
    await rmrf(root);
  }
});

Deno.test("demo --help, a bad flag, and a busy port", async () => {
  const help = await run([DEMO, "--help"]);
  assertEquals(help.code, 0);
  assert(help.stdout.includes("usage: deno run -A cli.ts demo"), help.stdout);

  const bad = await run([DEMO, "--rate", "fast"]);
  assertEquals(bad.code, 2);
  assertEquals(bad.stderr.trim().split("\n").length, 1, bad.stderr);
  assert(bad.stderr.includes("--rate"), bad.stderr);

  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const root = await tempDir();
  try {
    const port = (listener.addr as Deno.NetAddr).port;
    const busy = await run([DEMO, "--port", String(port), "--root", root]);
    assertEquals(busy.code, 1);
    assert(busy.stderr.includes("address is in use"), busy.stderr);
  } finally {
    listener.close();
    await rmrf(root);
  }
});

Deno.test("a fresh clone runs the README's first command: deno run -A cli.ts demo", async () => {
  // The repository this test file belongs to (CI's clone, or a developer's).
  const top = await new Deno.Command("git", {
    args: ["rev-parse", "--show-toplevel"],
    cwd: new URL(".", import.meta.url).pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert(top.success, new TextDecoder().decode(top.stderr));
  const repo = new TextDecoder().decode(top.stdout).trim();
  const dir = await tempDir();
  let demo: DemoProc | null = null;
  try {
    const clone = `${dir}/streamcast`;
    const cloned = await new Deno.Command("git", {
      args: ["clone", "--quiet", "--no-hardlinks", repo, clone],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert(cloned.success, new TextDecoder().decode(cloned.stderr));
    demo = await startDemo(["demo", "--port", "0", "--root", `${dir}/data`], {
      command: ["cli.ts"],
      cwd: clone,
      readyMs: 45_000,
    });
    assertEquals((await getJson(`${demo.url}/_/health`)).ok, true);
    const page = await fetch(`${demo.url}/trades`);
    assertEquals(page.status, 200);
    await page.body?.cancel();
    await until(async () => (await endOffset(demo!.url)) > 1, 10_000, "rows");
    assertEquals((await demo.signal("SIGINT")).code, 0, demo.stderr());
  } finally {
    await demo?.stop();
    await rmrf(dir);
  }
});
