// A mirror adopting a big chunk (a merged chunk can be hundreds of MB)
// streams it to a file as it arrives, hashing on the way, and checks its rows
// from that file: its memory does not grow by the chunk's size. The first
// version held each fetched chunk whole (and a copy of it) while checking it;
// in a 30-minute soak both mirrors jumped from ~210 to ~470 MiB when the
// primary's first merged chunks were adopted, and adopting 60 MB of chunks
// in one process peaked at 536 MiB (against 111 MiB streamed). Here: a
// 140 MiB chunk took the peak up by 656 MiB before, by 45 MiB streamed.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { compress, sha256Hex } from "../../../log/chunk/chunk.ts";

const CHILD = new URL("./_adopt_child.ts", import.meta.url).pathname;

Deno.test("mirrors: adopting a 140 MB chunk over HTTP grows the mirror's peak memory by far less than the chunk", async () => {
  const dir = await tempDir("streamcast-adopt-mem-");
  // 600,000 rows of random text: ~200 MB of lines, ~140 MB compressed.
  const rows = 600_000;
  const parts: string[] = [];
  const rnd = new Uint8Array(240);
  for (let o = 1; o <= rows; o++) {
    crypto.getRandomValues(rnd);
    parts.push(`[${o},{"pad":"${btoa(String.fromCharCode(...rnd))}"}]\n`);
  }
  const bytes = compress(new TextEncoder().encode(parts.join("")));
  parts.length = 0;
  const sha = sha256Hex(bytes);
  const entry = {
    first: 1,
    last: rows,
    rows,
    bytes: bytes.length,
    sha256: sha,
    first_ts: 1,
    last_ts: 1,
  };
  const file = join(dir, "chunk.zst");
  await Deno.writeFile(file, bytes);
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const path = new URL(req.url).pathname;
    if (path === `/trades/chunks/${sha}`) return new Response((await Deno.open(file)).readable);
    if (path === "/ping") return new Response("pong");
    return new Response("not found", { status: 404 });
  });
  try {
    const base = `http://127.0.0.1:${server.addr.port}/trades`;
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CHILD, base, JSON.stringify(entry), join(dir, "replica")],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assertEquals(out.code, 0, `the child failed:\n${new TextDecoder().decode(out.stderr)}`);
    const { before, after } = JSON.parse(text);
    const grew = after.hwm - before.hwm;
    const mib = bytes.length / 2 ** 20;
    console.log(
      `adopting a ${mib.toFixed(1)} MiB chunk: peak ${before.hwm.toFixed(0)} -> ` +
        `${after.hwm.toFixed(0)} MiB (+${grew.toFixed(1)}), RSS after ${after.rss.toFixed(0)} MiB`,
    );
    assert(
      grew < mib / 2,
      `the peak grew by ${grew.toFixed(1)} MiB for a ${mib.toFixed(1)} MiB chunk`,
    );
    const kept = await Deno.readFile(join(dir, "replica", "chunks", `${sha}.ndjson.zst`));
    assertEquals(sha256Hex(kept), sha, "the adopted chunk is the primary's, byte for byte");
  } finally {
    await server.shutdown();
    await rmrf(dir);
  }
});
