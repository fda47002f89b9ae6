// compress=zstd (docs/SPEC.md §2.6): binary zstd frames that the `zstd` command
// decodes to exactly the batched text, live and replayed; compressed once per
// commit whatever the number of subscribers; refused without frames=batch.
import { assert, assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { zstdCli } from "../../harness/zstd_cli.ts";
import { RawWs } from "../../harness/raw_ws.ts";
import { zstdDecompressSync } from "node:zlib";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, s: { type: "string" } },
  required: ["i", "s"],
};
const row = (i: number) => ({ i, s: `row ${i} ` + "é".repeat(i % 5) });
const line = (i: number) => `[${i},${JSON.stringify(row(i))}]`;

/** A subscriber that keeps every message as it came (text or bytes). */
class ZSub {
  readonly ws: WebSocket;
  greeting: Record<string, unknown> | null = null;
  readonly frames: (string | Uint8Array)[] = [];
  closed: { code: number; reason: string } | null = null;
  constructor(url: string) {
    this.ws = new WebSocket(url);
    this.ws.binaryType = "arraybuffer";
    this.ws.onerror = () => {};
    this.ws.onclose = (e) => (this.closed = { code: e.code, reason: e.reason });
    this.ws.onmessage = (e) => {
      if (this.greeting === null) {
        assert(typeof e.data === "string", "the greeting is a text frame");
        this.greeting = JSON.parse(e.data);
      } else {
        this.frames.push(typeof e.data === "string" ? e.data : new Uint8Array(e.data));
      }
    };
  }
  static async open(url: string): Promise<ZSub> {
    const s = new ZSub(url);
    await until(() => s.greeting !== null || s.closed !== null, 10_000, `greeting ${url}`);
    return s;
  }
  /** Every data frame decoded by the zstd command, split into lines. */
  async lines(): Promise<string[]> {
    const out: string[] = [];
    for (const f of this.frames) {
      assert(f instanceof Uint8Array, "a compressed subscription's data frames are binary");
      out.push(...(await zstdCli(f)).split("\n"));
    }
    return out;
  }
  async close(): Promise<void> {
    if (this.closed) return;
    this.ws.close();
    await until(() => this.closed !== null, 5_000, "close");
  }
}

async function metric(port: number, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/_/metrics`)).text();
  const m = text.split("\n").find((l) => l.startsWith(`${name}{`) && l.includes(labels));
  return m ? Number(m.split(" ").at(-1)) : 0;
}

Deno.test("compress=zstd live frames decode with the zstd command to the batched text, compressed once per commit", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const port = server.addr.port;
  const url = `ws://127.0.0.1:${port}/t`;
  try {
    await stream.sendMany([1, 2, 3].map(row));
    const plain = await TestSub.open(`${url}?frames=batch`);
    const zsubs = await Promise.all(
      Array.from({ length: 5 }, () => ZSub.open(`${url}?frames=batch&compress=zstd`)),
    );
    assertEquals(zsubs[0].greeting!.compress, "zstd");
    assertEquals(plain.greeting!.compress, undefined, "no compress field without compress=");
    // Commits of one row and of many (one frame each).
    await stream.send(row(4));
    await stream.sendMany([5, 6, 7, 8, 9].map(row));
    await stream.send(row(10));
    const want = [4, 5, 6, 7, 8, 9, 10].map(line);
    await plain.waitLines(want.length);
    for (const z of zsubs) await until(() => z.frames.length >= 3, 10_000, "3 frames");
    for (const z of zsubs) {
      assertEquals(z.frames.length, 3, "one binary frame per commit");
      assertEquals(await z.lines(), want);
    }
    // The frame text is the plain batched frame's, byte for byte.
    assertEquals(await zstdCli(zsubs[0].frames[1] as Uint8Array), plain.frames[2]);
    // Compressed once per commit for 5 subscribers (3 commits fanned out).
    assertEquals(await metric(port, "streamcast_zstd_frames_total", 'path="live"'), 3);
    // And still once per commit with one compressed subscriber.
    for (const z of zsubs.slice(1)) await z.close();
    await stream.sendMany([11, 12].map(row));
    await until(() => zsubs[0].frames.length >= 4, 10_000, "4th frame");
    assertEquals(await metric(port, "streamcast_zstd_frames_total", 'path="live"'), 4);
    const bytes = await metric(port, "streamcast_zstd_bytes_total", 'path="live",side="zstd"');
    assert(bytes > 0, "compressed bytes counted");
    await Promise.all([plain.close(), zsubs[0].close()]);
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("compress=zstd replay from segments and chunks decodes with the zstd command to the rows", async () => {
  const root = await tempDir();
  // Small segments, sealed at once: the replay reads chunks, then the active segment.
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root,
    maxReplay: null,
    logOptions: { segmentBytes: 16 * 1024 },
  });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const port = server.addr.port;
  const url = `ws://127.0.0.1:${port}/t`;
  try {
    const n = 3000;
    for (let i = 1; i <= n; i += 100) {
      await stream.sendMany(Array.from({ length: 100 }, (_, k) => row(i + k)));
    }
    await until(() => (stream.log!.chunks.through ?? 0) > 0, 20_000, "a chunk");
    const z = await ZSub.open(`${url}?offset=1&frames=batch&compress=zstd`);
    assertEquals(z.greeting!.replay, [1, n + 1]);
    await until(
      async () => {
        const got = await metric(port, "streamcast_replay_rows_total", 'stream="t"');
        return got >= n;
      },
      20_000,
      "replay of every row",
    );
    const lines = await z.lines();
    assertEquals(lines.length, n);
    for (let i = 0; i < n; i++) if (lines[i] !== line(i + 1)) assertEquals(lines[i], line(i + 1));
    assert(await metric(port, "streamcast_zstd_frames_total", 'path="replay"') >= 1);
    await z.close();
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("compress= is refused with 4400 without frames=batch and for an unknown value", async () => {
  const stream = await Stream.open("e", { schema: SCHEMA });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const url = `ws://127.0.0.1:${server.addr.port}/e`;
  try {
    for (
      const [query, detail] of [
        ["compress=zstd", "compress=zstd needs frames=batch, got frames=single"],
        ["compress=zstd&frames=arrow", "compress=zstd needs frames=batch, got frames=arrow"],
        ["compress=gzip&frames=batch", "compress must be zstd, zstd-dict or zstd-stream, got gzip"],
        ["compress=&frames=batch", "compress must be zstd, zstd-dict or zstd-stream, got "],
      ]
    ) {
      const s = await ZSub.open(`${url}?${query}`);
      await until(() => s.closed !== null, 5_000, "close");
      assertEquals(s.greeting, null, `${query}: no greeting`);
      assertEquals(s.closed!.code, 4400, query);
      assertEquals(JSON.parse(s.closed!.reason), { error: "protocol", detail });
    }
    // Ephemeral streams compress too ([null,msg] lines).
    const z = await ZSub.open(`${url}?frames=batch&compress=zstd`);
    await stream.sendMany([row(1), row(2)]);
    await until(() => z.frames.length >= 1, 5_000, "frame");
    assertEquals(await z.lines(), [1, 2].map((i) => `[null,${JSON.stringify(row(i))}]`));
    await z.close();
  } finally {
    await server.shutdown();
    await stream.close();
  }
});

Deno.test("compress=zstd with where=: one compression per commit for each distinct picked set", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const port = server.addr.port;
  const base = `ws://127.0.0.1:${port}/t?frames=batch&compress=zstd`;
  const where = encodeURIComponent(JSON.stringify({ i: { gte: 3 } }));
  try {
    const all = await ZSub.open(base);
    const picked = await Promise.all([1, 2, 3].map(() => ZSub.open(`${base}&where=${where}`)));
    await stream.sendMany([1, 2, 3, 4].map(row)); // the group picks 3, 4
    await stream.sendMany([5, 6].map(row)); // every row matches: the group shares the commit's frame
    await until(() => all.frames.length >= 2, 10_000, "2 frames");
    for (const p of picked) await until(() => p.frames.length >= 2, 10_000, "2 frames");
    assertEquals(await all.lines(), [1, 2, 3, 4, 5, 6].map(line));
    for (const p of picked) assertEquals(await p.lines(), [3, 4, 5, 6].map(line));
    assertEquals(await metric(port, "streamcast_zstd_frames_total", 'path="live"'), 3);
    await Promise.all([all, ...picked].map((s) => s.close()));
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("compress=zstd: a live subscriber whose socket fell behind is sent the commits' shared bytes, not compressed again", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null, maxBacklog: 1e6 });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const port = server.addr.port;
  // Rows that zstd cannot shrink much, so the stalled socket fills quickly.
  let seed = 7;
  const noise = () => {
    let t = "";
    for (let k = 0; k < 6000; k++) {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      t += String.fromCharCode(48 + (seed >>> 26));
    }
    return t;
  };
  const rows = Array.from({ length: 3000 }, (_, k) => ({ i: k + 1, s: noise() }));
  try {
    const raw = await RawWs.connect(port, "/t?frames=batch&compress=zstd");
    const greeting = await raw.readMessage();
    assertEquals(JSON.parse(new TextDecoder().decode(greeting!.data)).compress, "zstd");
    // Not reading: the server's socket fills and its queue grows.
    for (let k = 0; k < rows.length; k += 25) await stream.sendMany(rows.slice(k, k + 25));
    const live = await metric(port, "streamcast_zstd_frames_total", 'path="live"');
    assertEquals(live, rows.length / 25, "one compression per commit");
    const lines: string[] = [];
    while (lines.length < rows.length) {
      const m = await raw.readMessage();
      assert(m !== null && m.opcode === 2, "a binary frame");
      lines.push(...new TextDecoder().decode(zstdDecompressSync(m.data)).split("\n"));
    }
    assertEquals(lines, rows.map((r) => `[${r.i},${JSON.stringify(r)}]`));
    assertEquals(await metric(port, "streamcast_zstd_frames_total", 'path="live"'), live);
    assertEquals(await metric(port, "streamcast_zstd_frames_total", 'path="replay"'), 0);
    const drops = await metric(port, "streamcast_drops_total", 'reason="to_catch_up"');
    assertEquals(drops, 0, "it stayed live");
    raw.close();
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});
