// `cli.ts serve` under a descriptor limit: a real server process started
// under `prlimit`, real sockets from this process.
import { join } from "node:path";
import { assert, assertEquals } from "../harness/assert.ts";
import { freePort, rmrf, tempDir, until } from "../harness/util.ts";
import { RawWs } from "../harness/raw_ws.ts";
import { CLI, type ServeProc, startListening, startServe } from "../harness/serve.ts";
import { openFilesLimit, raiseOpenFilesLimit } from "../../server/open_files.ts";

const SCHEMA = {
  type: "object",
  properties: { v: { type: "integer" } },
  required: ["v"],
  additionalProperties: false,
};

/** Subscribers the test opens at once (the rest wait their turn), as clients arrive over time. */
const WAVE = 50;

/** A temp dir holding `schema.json`; removed by `rm()`. */
async function workspace(): Promise<{ root: string; schema: string; rm(): Promise<void> }> {
  const dir = await tempDir("streamcast-fds-");
  const schema = join(dir, "schema.json");
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  return { root: join(dir, "data"), schema, rm: () => rmrf(dir) };
}

/** Starts `serve` with one published stream `t`, under `prlimit --nofile=LIMITS`. */
async function serveUnder(
  limits: string,
  w: { root: string; schema: string },
): Promise<ServeProc> {
  const args = ["--root", w.root, "--stream", `t=${w.schema}`, "--publish", "t"];
  return await startServe([...args, "--port", String(freePort())], {
    under: ["prlimit", `--nofile=${limits}`, "--"],
  });
}

/** The HTTP status a refused upgrade got (`handshake refused: HTTP/1.1 503 …`), or 0 if cut. */
function refusedStatus(err: unknown): number {
  const m = /handshake refused: HTTP\/1\.1 (\d{3})/.exec(String(err));
  return m ? Number(m[1]) : 0;
}

/** Opens a live subscriber of `t`: its socket past the greeting, or the status it was refused with. */
async function subscribe(port: number): Promise<RawWs | number> {
  let ws: RawWs;
  try {
    ws = await RawWs.connect(port, "/t");
  } catch (err) {
    return refusedStatus(err);
  }
  const greeting = await ws.readText();
  assert(greeting !== null, "an accepted subscriber is greeted");
  assertEquals(typeof JSON.parse(greeting).stream_id, "string");
  return ws;
}

/** Opens `n` subscribers, `WAVE` at a time: the accepted ones, and each refusal's status. */
async function subscribeMany(
  port: number,
  n: number,
): Promise<{ open: RawWs[]; refused: number[] }> {
  const open: RawWs[] = [];
  const refused: number[] = [];
  for (let i = 0; i < n; i += WAVE) {
    const wave = await Promise.all(
      Array.from({ length: Math.min(WAVE, n - i) }, () => subscribe(port)),
    );
    for (const r of wave) typeof r === "number" ? refused.push(r) : open.push(r);
  }
  return { open, refused };
}

async function healthStatus(url: string): Promise<number> {
  try {
    const res = await fetch(`${url}/_/health`);
    await res.body?.cancel();
    return res.status;
  } catch {
    // Cut while the server listens again: no answer this time.
    return 0;
  }
}

Deno.test(
  "serve under a 1024-descriptor limit serves what the limit leaves room for, refuses the rest with 503 and outlives EMFILE",
  async () => {
    // 1,500 subscribers and the idle connections below need more than 1024 here too.
    const mine = await openFilesLimit();
    if (mine !== null && mine.soft < 4096) await raiseOpenFilesLimit();
    const w = await workspace();
    const server = await serveUnder("1024:1024", w);
    const port = Number(new URL(server.url).port);
    const subs: RawWs[] = [];
    const idle: Deno.Conn[] = [];
    try {
      // The start says how many connections the limit leaves room for, and the flag's number.
      const line =
        /open-files limit 1024 \(hard 1024\) leaves room for (\d+) connections \((\d+) descriptors kept.*fewer than --max-connections 10000/
          .exec(server.stderr());
      assert(line !== null, `the bound's line at start:\n${server.stderr()}`);
      const bound = Number(line[1]);
      assertEquals(bound + Number(line[2]), 1024);
      assert(bound > 500 && bound < 1024, `bound ${bound}`);

      // The first `bound` subscribers are served; every later one is refused with 503.
      const { open, refused } = await subscribeMany(port, 1500);
      subs.push(...open);
      assertEquals(open.length, bound);
      assertEquals(refused.length, 1500 - bound);
      assertEquals(refused.filter((s) => s !== 503), [], "every refusal is a 503");
      assertEquals(await healthStatus(server.url), 200);

      // A published row reaches every subscriber served.
      const res = await fetch(`${server.url}/t`, { method: "POST", body: '{"v":7}\n' });
      assertEquals(res.status, 200, await res.text());
      const rows = await Promise.all(subs.map((s) => s.readText()));
      assertEquals(rows.filter((r) => r !== '[1,{"v":7}]'), [], "each got the row");

      // Connections that never send a request take the last descriptors: accepts fail
      // with EMFILE, logged, and the server keeps running.
      for (let i = 0; i < 1024 - bound + 64; i++) {
        try {
          idle.push(await Deno.connect({ hostname: "127.0.0.1", port }));
        } catch {
          // Refused while the server listens again: it is out of descriptors already.
        }
      }
      await server.waitStderr(
        /cannot accept \(.*Too many open files \(os error 24\)\): out of descriptors; listening again/,
      );
      for (const c of idle.splice(0)) c.close();
      await until(async () => (await healthStatus(server.url)) === 200, 10_000, "health 200");

      // Subscribers that leave make room for new ones.
      for (const s of subs.splice(0, 10)) s.close();
      const again: RawWs[] = [];
      await until(
        async () => {
          const r = await subscribe(port);
          if (typeof r !== "number") again.push(r);
          return again.length === 10;
        },
        10_000,
        "10 new subscribers accepted",
      );
      subs.push(...again);
      assertEquals(await subscribe(port), 503, "and no more than the bound");
      // Every subscriber still open still gets rows.
      const res2 = await fetch(`${server.url}/t`, { method: "POST", body: '{"v":8}\n' });
      assertEquals(res2.status, 200, await res2.text());
      const rows2 = await Promise.all(subs.map((s) => s.readText()));
      assertEquals(rows2.filter((r) => r !== '[2,{"v":8}]'), []);
      assertEquals(await healthStatus(server.url), 200);
      // And it stops as it always does, listening sockets of every generation and all.
      const status = await server.signal("SIGTERM", 20_000);
      assertEquals(status.code, 0, server.stderr());
    } finally {
      for (const c of idle) c.close();
      for (const s of subs) s.close();
      await server.stop();
      await w.rm();
    }
  },
);

// What an operator sees of the process. Deno's executable raises the limit too as it starts, so
// this alone cannot tell whose raise it was: tests/server/open_files_test.ts lowers a limit and
// raises it with serve's own call.
Deno.test("serve raises its soft open-files limit to the hard limit", async () => {
  const w = await workspace();
  const server = await serveUnder("512:4096", w);
  try {
    const limits = await Deno.readTextFile(`/proc/${server.proc.pid}/limits`);
    const m = /^Max open files\s+(\d+)\s+(\d+)/m.exec(limits);
    assert(m !== null, limits);
    assertEquals([Number(m[1]), Number(m[2])], [4096, 4096]);
  } finally {
    await server.stop();
    await w.rm();
  }
});

Deno.test("serve without FFI says it cannot raise the limit, and serves", async () => {
  const w = await workspace();
  const args = ["serve", "--root", w.root, "--stream", `t=${w.schema}`];
  const server = await startListening(
    ["--deny-ffi", CLI, ...args, "--port", String(freePort())],
  );
  try {
    assert(
      server.stderr().includes(
        "streamcast serve: cannot raise the open-files limit: no permission to call libc " +
          "(--allow-ffi); serving within the limit in force",
      ),
      server.stderr(),
    );
    assertEquals(await healthStatus(server.url), 200);
    const sub = await subscribe(Number(new URL(server.url).port));
    assert(typeof sub !== "number", `subscribe refused: ${sub}`);
    sub.close();
  } finally {
    await server.stop();
    await w.rm();
  }
});

/** The `streamcast_connections` gauge the server reports now. */
async function connections(url: string): Promise<number> {
  const text = await (await fetch(`${url}/_/metrics`)).text();
  const m = /^streamcast_connections (\d+)$/m.exec(text);
  assert(m !== null, "streamcast_connections is reported");
  return Number(m[1]);
}

Deno.test("serve: streams created at runtime take their descriptors out of the connection bound, and give them back when deleted", async () => {
  const w = await workspace();
  const server = await serveUnder("512:512", w);
  const port = Number(new URL(server.url).port);
  const subs: RawWs[] = [];
  try {
    const line = /leaves room for (\d+) connections/.exec(server.stderr());
    assert(line !== null, `the bound's line at start:\n${server.stderr()}`);
    const bound = Number(line[1]);
    const { open, refused } = await subscribeMany(port, bound);
    subs.push(...open);
    assertEquals([open.length, refused], [bound, []]);
    assertEquals(await subscribe(port), 503, "the bound is full");

    // Five streams created: 5 × 8 descriptors set aside from the bound.
    const names = ["c1", "c2", "c3", "c4", "c5"];
    for (const name of names) {
      const res = await fetch(`${server.url}/_/streams/${name}`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ schema: SCHEMA }),
      });
      assertEquals(res.status, 201, await res.text());
    }
    for (const s of subs.splice(0, 30)) s.close();
    await until(async () => (await connections(server.url)) === bound - 30, 10_000, "30 gone");
    assertEquals(await subscribe(port), 503, "30 free slots are fewer than the 40 set aside");
    for (const s of subs.splice(0, 15)) s.close();
    await until(async () => (await connections(server.url)) === bound - 45, 10_000, "45 gone");
    const { open: five } = await subscribeMany(port, 5);
    subs.push(...five);
    assertEquals(five.length, 5, "bound - 40 connections fit, no more");
    assertEquals(await subscribe(port), 503);

    // Deleted again: the descriptors come back to the bound.
    for (const name of names) {
      const res = await fetch(`${server.url}/_/streams/${name}`, { method: "DELETE" });
      assertEquals(res.status, 204, await res.text());
    }
    const { open: back } = await subscribeMany(port, 40);
    subs.push(...back);
    assertEquals(back.length, 40, "the bound is back where it started");
    assertEquals(await subscribe(port), 503);
    assertEquals((await server.signal("SIGTERM", 20_000)).code, 0, server.stderr());
  } finally {
    for (const s of subs) s.close();
    await server.stop();
    await w.rm();
  }
});
