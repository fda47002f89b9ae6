// connect() and `cli.ts tail` given the stream on several nodes: a primary and
// its §15 mirror (same stream_id, same offsets), real `cli.ts serve`
// processes. The first node SIGKILLed mid-stream: the subscription resumes on
// the next with its cursor, no gap, no row twice. Two independent servers
// (different stream_ids): the move is refused, naming the node.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { freePort, tempDir } from "../harness/util.ts";
import { CLI, type ServeProc, withTimeout } from "../harness/serve.ts";
import { rows, startMirror, startPrimary, untilEnd } from "../harness/mirror_tree.ts";
import { connect, NotReplayable, publisher, PublishError } from "../../client/mod.ts";

/** A primary with rows 1..n, and a mirror that holds them all. */
async function primaryAndMirror(n: number) {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  try {
    const primary = await startPrimary(`${dir}/p`);
    procs.push(primary);
    await primary.write(rows(1, n));
    const mirror = await startMirror(`${dir}/f`, primary.ws);
    procs.push(mirror);
    await untilEnd(primary, n + 1);
    await untilEnd(mirror, n + 1);
    return { dir, primary, mirror, procs };
  } catch (err) {
    for (const p of procs) await p.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw err;
  }
}

Deno.test("connect() given [mirror, primary]: the mirror SIGKILLed mid-stream, the subscription resumes on the primary, no gap, no duplicate", async () => {
  const { dir, primary, mirror, procs } = await primaryAndMirror(100);
  try {
    const urls = [`${mirror.ws}/trades`, `${primary.ws}/trades`];
    const moved: string[] = [];
    const sub = await connect<{ i: number }>(urls, {
      offset: 1,
      reconnect: true,
      backoff: { minMs: 20, maxMs: 100 },
      onReconnect: (e) => moved.push(e.url),
    });
    assertEquals(sub.url, urls[0]);
    const seen: number[] = [];
    for await (const [offset, msg] of sub) {
      seen.push(offset!);
      assertEquals(msg.i, offset);
      if (offset === 50) {
        await mirror.stop(); // SIGKILL
        await primary.write(rows(101, 200));
      }
      if (offset === 200) break;
    }
    assertEquals(seen, Array.from({ length: 200 }, (_, i) => i + 1));
    assertEquals(sub.url, urls[1]);
    assert(moved.length >= 1 && moved.includes(urls[1]), JSON.stringify(moved));
  } finally {
    for (const p of procs) await p.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("connect() given a dead node first starts on the next; given none alive it names each", async () => {
  const { dir, primary, procs } = await primaryAndMirror(5);
  try {
    const dead = `ws://127.0.0.1:${freePort()}/trades`;
    const sub = await connect([dead, `${primary.ws}/trades`], { offset: 1 });
    assertEquals(sub.url, `${primary.ws}/trades`);
    for await (const [offset] of sub) if (offset === 5) break;
    const dead2 = `ws://127.0.0.1:${freePort()}/trades`;
    const err = await assertRejects(() => connect(`${dead},${dead2}`, { offset: 1 }));
    assert(err instanceof Error);
    assert(err.message.includes("no node could be reached"), err.message);
    assert(err.message.includes(dead) && err.message.includes(dead2), err.message);
  } finally {
    for (const p of procs) await p.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("two independent servers (other stream_ids): connect() and publisher() refuse the move, naming the node", async () => {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  try {
    const a = await startPrimary(`${dir}/a`);
    procs.push(a);
    const b = await startPrimary(`${dir}/b`, freePort(), ["--publish", "trades"]);
    procs.push(b);
    const c = await startPrimary(`${dir}/c`, freePort(), ["--publish", "trades"]);
    procs.push(c);
    await a.write(rows(1, 10));
    await b.write(rows(1, 10));
    await untilEnd(a, 11);
    await untilEnd(b, 11);
    const sub = await connect([`${a.ws}/trades`, `${b.ws}/trades`], {
      offset: 1,
      reconnect: true,
      backoff: { minMs: 20, maxMs: 100 },
    });
    const err = await assertRejects(async () => {
      for await (const [offset] of sub) if (offset === 10) await a.stop();
    });
    assert(err instanceof NotReplayable, String(err));
    assertEquals(err.why, "other_stream");
    assert(err.message.includes(`${b.ws}/trades`), err.message);

    // The publisher: begun on c, c killed, b serves another stream_id.
    const pub = await publisher([`${c.ws}/trades`, `${b.ws}/trades`], {
      producer: "nodes-1",
      backoff: { minMs: 20, maxMs: 100 },
    });
    await pub.send({ i: 1, sym: "BTC", px: 1 });
    await c.stop();
    const refused = await pub.send({ i: 2, sym: "BTC", px: 2 }).catch((e) => e);
    assert(refused instanceof PublishError, String(refused));
    assertEquals(refused.error, "other_stream");
    assert(refused.message.includes(`${b.ws}/trades/publish`), refused.message);
    await pub.close();
  } finally {
    for (const p of procs) await p.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("cli.ts tail URL,URL: the first node SIGKILLed, tail goes on from the next, every offset once", async () => {
  const { dir, primary, mirror, procs } = await primaryAndMirror(100);
  const tail = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "tail",
      `${mirror.ws}/trades,${primary.ws}/trades`,
      "--offset",
      "1",
      "--no-compress",
    ],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const errText = new Response(tail.stderr).text();
  try {
    const reader = tail.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    const lines = () => text.split("\n").slice(0, -1);
    const readUntil = async (n: number) => {
      while (lines().length < n) {
        const r = await withTimeout(reader.read(), 30_000, `${n} lines from tail`);
        if (r.done) throw new Error(`tail ended early:\n${text}\n${await errText}`);
        text += r.value;
      }
    };
    await readUntil(100);
    await mirror.stop(); // SIGKILL
    await primary.write(rows(101, 150));
    await readUntil(150);
    const offsets = lines().map((l) => JSON.parse(l)[0]);
    assertEquals(offsets, Array.from({ length: 150 }, (_, i) => i + 1));
    tail.kill("SIGTERM");
    assertEquals((await tail.status).code, 0);
    await reader.cancel().catch(() => {});
    const stderr = await errText;
    assert(stderr.includes(`to ${primary.ws}/trades`), stderr);
  } finally {
    try {
      tail.kill("SIGKILL");
    } catch {
      // exited
    }
    await tail.status;
    for (const p of procs) await p.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("publisher() refuses a bad URL list at the call", async () => {
  await assertRejects(() => publisher([]), TypeError, "publisher: no URL given");
  await assertRejects(() => connect(["ws://a:1/t", "nope"]), TypeError, 'not a URL: "nope"');
});
