// Mirrors under SIGKILL, for real: a mirror killed mid-catch-up and
// mid-live and restarted resumes from its own log, byte-identical to the
// primary; a primary killed and restarted is followed again; a primary wiped
// and recreated (a new stream_id) is never mixed in; a mirror killed between
// adopting chunks and deleting the segments they cover recovers.
import { assert, assertEquals } from "../../harness/assert.ts";
import { freePort, rmrf, tempDir, until } from "../../harness/util.ts";
import { getJson, type ServeProc } from "../../harness/serve.ts";
import { verifyLog } from "../../../log/mod.ts";
import {
  chunkNames,
  head,
  readAll,
  rows,
  startMirror,
  startPrimary,
  untilEnd,
} from "../../harness/mirror_tree.ts";

Deno.test("mirrors: SIGKILL mid-catch-up and mid-live, restart, nothing lost or doubled", async () => {
  const dir = await tempDir();
  const procs = new Set<ServeProc>();
  try {
    // History in segments only (no sealing): the mirror catches up over its tail.
    const p = await startPrimary(`${dir}/p`, freePort(), ["--seal-every", "0"]);
    procs.add(p);
    const N = 150_000;
    for (let k = 0; k < N; k += 25_000) await p.write(rows(k + 1, k + 25_000));
    await untilEnd(p, N + 1);
    const port = freePort();
    let f = await startMirror(`${dir}/f`, p.ws, port);
    procs.add(f);
    // Killed as soon as it holds some but not all of the history.
    await until(
      async () => {
        const e = (await head(f).catch(() => ({ end_offset: 0 }))).end_offset as number;
        return e > 1;
      },
      30_000,
      "the mirror started catching up",
    );
    const before = (await head(f)).end_offset as number;
    await f.signal("SIGKILL");
    procs.delete(f);
    assert(before < N + 1, `killed mid-catch-up (at ${before})`);
    f = await startMirror(`${dir}/f`, p.ws, port);
    procs.add(f);
    await untilEnd(f, N + 1);

    // Mid-live: rows keep coming while the mirror is killed and restarted.
    let next = N + 1;
    let writing = true;
    const writer = (async () => {
      while (writing) {
        await p.write(rows(next, next + 49));
        next += 50;
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    await until(async () => ((await head(f)).end_offset as number) > N + 500, 20_000, "live rows");
    await f.signal("SIGKILL");
    procs.delete(f);
    await new Promise((r) => setTimeout(r, 200));
    f = await startMirror(`${dir}/f`, p.ws, port);
    procs.add(f);
    await until(
      async () => ((await head(f)).end_offset as number) > next - 200,
      20_000,
      "caught up",
    );
    writing = false;
    await writer;
    await untilEnd(p, next);
    await untilEnd(f, next);
    const want = await readAll(p, N - 999, next);
    assertEquals(await readAll(f, N - 999, next), want);
    const first = (await readAll(f, 1, 1001)).slice(0, 1000);
    assertEquals(first, (await readAll(p, 1, 1001)).slice(0, 1000));
    assertEquals((await head(f)).state, "live");
  } finally {
    for (const s of procs) await s.stop();
    await rmrf(dir);
  }
});

Deno.test("mirrors: the primary SIGKILLed and restarted is followed again; wiped and recreated, it is not mixed in", async () => {
  const dir = await tempDir();
  const procs = new Set<ServeProc>();
  try {
    const pport = freePort();
    let p = await startPrimary(`${dir}/p`, pport);
    procs.add(p);
    await p.write(rows(1, 500));
    await untilEnd(p, 501);
    const f = await startMirror(`${dir}/f`, p.ws);
    procs.add(f);
    await untilEnd(f, 501);
    const id = (await head(p)).stream_id;

    await p.signal("SIGKILL");
    procs.delete(p);
    await until(async () => (await head(f)).state === "reconnecting", 10_000, "reconnecting");
    // The mirror keeps serving what it has.
    assertEquals((await readAll(f, 1, 501)).length, 500);
    p = await startPrimary(`${dir}/p`, pport);
    procs.add(p);
    await p.write(rows(501, 800));
    await untilEnd(f, 801);
    assertEquals(await readAll(f, 1, 801), await readAll(p, 1, 801));
    await until(async () => (await head(f)).state === "live", 10_000, "live again");

    // Wiped and recreated: a new stream_id at the same URL.
    await p.signal("SIGKILL");
    procs.delete(p);
    await rmrf(`${dir}/p`);
    p = await startPrimary(`${dir}/p`, pport);
    procs.add(p);
    await p.write(rows(1, 900));
    await untilEnd(p, 901);
    assert((await head(p)).stream_id !== id);
    await until(async () => (await head(f)).state === "stopped", 15_000, "stopped");
    const h = await head(f);
    assertEquals(h.stream_id, id);
    assertEquals(h.end_offset, 801);
    await f.waitStderr(/"event":"follow_stopped"[^\n]*"why":"stream_id_changed"/);
    // Still serving its own rows, never the new primary's.
    const kept = await readAll(f, 1, 801);
    assertEquals(kept.length, 800);
    assertEquals(kept[600], (await readAll(f, 601, 602))[0]);
    await new Promise((r) => setTimeout(r, 500));
    assertEquals((await head(f)).end_offset, 801);
  } finally {
    for (const s of procs) await s.stop();
    await rmrf(dir);
  }
});

Deno.test("mirrors: killed right after adopting chunks, before deleting the segments they cover", async () => {
  const dir = await tempDir();
  const procs = new Set<ServeProc>();
  try {
    // Rows reach the mirror over its tail first: they are written once it is
    // live, and the primary seals them 2 s later, long after the mirror has.
    const p = await startPrimary(`${dir}/p`, freePort(), ["--seal-every", "2"]);
    procs.add(p);
    const port = freePort();
    let f = await startMirror(`${dir}/f`, p.ws, port, [], {
      STREAMCAST_CRASH_AT: "adopt-manifest-written",
    });
    procs.add(f);
    await until(async () => (await head(f)).state === "live", 20_000, "live");
    await p.write(rows(1, 500));
    const status = await f.exit(30_000);
    procs.delete(f);
    assertEquals(status.signal, "SIGKILL");
    const segs = async () => {
      const out: number[] = [];
      for await (const e of Deno.readDir(`${dir}/f/trades`)) {
        if (e.name.endsWith(".seg")) out.push(Number(e.name.slice(0, -4)));
      }
      return out.sort((a, b) => a - b);
    };
    assert(
      (await segs()).length > 1,
      `covered segments were left by the crash: ${await segs()}\n${f.stderr()}`,
    );
    f = await startMirror(`${dir}/f`, p.ws, port);
    procs.add(f);
    await untilEnd(f, 501);
    await until(
      async () => (await chunkNames(f)).join() === (await chunkNames(p)).join(),
      20_000,
      "chunks",
    );
    assertEquals(await readAll(f, 1, 501), await readAll(p, 1, 501));
    // The segments the adopted chunks cover are gone; what is left starts past them.
    const through = (await getJson(`${f.url}/trades/manifest`)).through as number;
    await until(
      async () => (await segs()).every((s) => s > through),
      10_000,
      "covered segments deleted",
    );
    await f.signal("SIGTERM");
    procs.delete(f);
    assertEquals((await verifyLog(`${dir}/f/trades`)).error, null);
  } finally {
    for (const s of procs) await s.stop();
    await rmrf(dir);
  }
});
