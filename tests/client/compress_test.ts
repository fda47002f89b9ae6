// The client's side of compress=zstd (docs/SPEC.md §2.6): negotiated by default in
// Deno, rows as with text frames, a corrupt or truncated frame reported as a
// ProtocolError naming it, and a server that does not know compress= asked
// again without it.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { connect, ProtocolError } from "../../client/mod.ts";
import { serve, Stream } from "../../mod.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { zstdFrame } from "../../server/frames/compressed_frames.ts";
import { fixture, line } from "../harness/client_server.ts";
import { fakeServer, ZSTD_GREETING } from "./_fake_zstd_server.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, s: { type: "string" } },
  required: ["i", "s"],
};
const row = (i: number) => ({ i, s: "x".repeat(i % 7) });

async function zstdFramesSent(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/_/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith("streamcast_zstd_frames_total{"))
    .reduce((n, l) => n + Number(l.split(" ").at(-1)), 0);
}

Deno.test("client negotiates compress=zstd-stream by default, compress=zstd when asked, and reads the same rows; compress: false keeps text", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const url = `ws://127.0.0.1:${server.addr.port}/t`;
  try {
    await stream.sendMany(Array.from({ length: 500 }, (_, k) => row(k + 1)));
    const s = await connect<{ i: number }>(url, { offset: 1 });
    assertEquals(s.greeting.compress, "zstd-stream");
    const z = await connect<{ i: number }>(url, { offset: 1, compress: "zstd" });
    assertEquals(z.greeting.compress, "zstd");
    const plain = await connect<{ i: number }>(url, { offset: 1, compress: false });
    assertEquals(plain.greeting.compress, undefined);
    void stream.sendMany([501, 502].map(row));
    for (const sub of [s, z, plain]) {
      let want = 1;
      for await (const [offset, msg] of sub) {
        assertEquals([offset, msg], [want, row(want)]);
        if (++want > 502) break;
      }
      await sub.close();
    }
    assert(await zstdFramesSent(server.addr.port) >= 2, "replay and live frames were compressed");
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("client rejects compress values other than zstd-stream, zstd-dict, zstd and false", async () => {
  await assertRejects(
    () => connect("ws://127.0.0.1:1/t", { compress: "gzip" as "zstd" }),
    TypeError,
    'compress must be "zstd-stream", "zstd-dict", "zstd" or false, got string "gzip"',
  );
});

Deno.test("client reports a corrupt, truncated or padded compressed frame as a ProtocolError after the good ones", async () => {
  const good = zstdFrame('[null,{"i":1}]\n[null,{"i":2}]');
  const flipped = zstdFrame('[null,{"i":3}]'.repeat(20));
  flipped[flipped.length - 6] ^= 0x40;
  const cases: [string, Uint8Array, RegExp][] = [
    ["flipped", flipped, /compressed frame 2 .* is corrupt or truncated: zstd: /],
    ["truncated by 1", good.subarray(0, good.length - 1), /truncated/],
    ["truncated by half", good.subarray(0, good.length >> 1), /truncated/],
    ["padded", new Uint8Array([...good, 0, 0]), /2 bytes follow the zstd frame/],
    ["not zstd", new TextEncoder().encode("[null,{}]"), /not a zstd frame/],
  ];
  for (const [name, bad, message] of cases) {
    const fake = fakeServer((ws) => {
      ws.send(JSON.stringify(ZSTD_GREETING));
      ws.send(good);
      ws.send(bad);
    });
    try {
      const sub = await connect(fake.url);
      const got: unknown[] = [];
      const err = await assertRejects(async () => {
        for await (const [, msg] of sub) got.push(msg);
      }, ProtocolError);
      assertEquals(got, [{ i: 1 }, { i: 2 }], `${name}: the good frame's rows came first`);
      assert(message.test(err.message), `${name}: ${err.message}`);
    } finally {
      await fake.stop();
    }
  }
});

Deno.test("client asks a server that refuses compress= again without it", async () => {
  const urls: string[] = [];
  const fake = fakeServer((ws, url) => {
    urls.push(url.search);
    if (url.searchParams.has("compress")) {
      ws.close(4400, JSON.stringify({ error: "protocol", detail: "unknown parameter compress" }));
      return;
    }
    ws.send(JSON.stringify({ ...ZSTD_GREETING, compress: undefined }));
    ws.send('[null,{"i":1}]');
  });
  try {
    const sub = await connect(fake.url);
    for await (const [, msg] of sub) {
      assertEquals(msg, { i: 1 });
      break;
    }
    await sub.close();
    // compress=zstd-stream first (the default, SPEC §2.6.1).
    assertEquals(urls, ["?frames=batch&compress=zstd-stream", "?frames=batch"]);
    // Asked for explicitly, the refusal stands.
    await assertRejects(() => connect(fake.url, { compress: "zstd" }), ProtocolError, "compress");
  } finally {
    await fake.stop();
  }
});

Deno.test("tail prints the same lines with zstd-stream (default), zstd frames (--compress) and text (--no-compress)", async () => {
  const f = await fixture();
  const cli = new URL("../../cli.ts", import.meta.url).pathname;
  const tail = async (flags: string[]) => {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", cli, "tail", f.url, "--offset", "1", "--no-reconnect", ...flags],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderrText = new Response(child.stderr).text();
    let text = "";
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    while (text.split("\n").length <= 300) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    child.kill("SIGTERM");
    await reader.cancel().catch(() => {});
    await child.status;
    const stderr = await stderrText;
    return { lines: text.split("\n").slice(0, 300), stderr };
  };
  try {
    await f.send(1, 300);
    const want = Array.from({ length: 300 }, (_, k) => line(k + 1));
    for (
      const [flags, kind] of [[[], "(zstd-stream frames)"], [["--compress"], "(zstd frames)"], [
        ["--no-compress"],
        null,
      ]] as const
    ) {
      const r = await tail([...flags]);
      assertEquals(r.lines, want, flags.join(" "));
      const said = /\((zstd[a-z-]*) frames\)/.exec(r.stderr);
      assertEquals(said?.[0] ?? null, kind, `${flags}: ${r.stderr}`);
    }
    const both = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", cli, "tail", f.url, "--compress", "--no-compress"],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    assertEquals(both.code, 2);
    assert(new TextDecoder().decode(both.stderr).includes("contradict"));
  } finally {
    await f.stop();
  }
});
