// `serve --stdin` reads its real stdin pipe into one reused buffer: rows
// written in pieces that split lines, multi-byte characters and a row wider
// than one read all arrive whole and in order at a subscriber; a SIGTERM
// while stdin is open and idle ends the read and the server. Seeded: a fresh
// seed each run, printed.
import { assert, assertEquals } from "../harness/assert.ts";
import { join } from "node:path";
import { freePort, rmrf, rng, tempDir } from "../harness/util.ts";
import { TestSub } from "../harness/subscriber.ts";
import { startServe } from "../harness/serve.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, s: { type: "string" } },
  required: ["i", "s"],
};

Deno.test("serve --stdin: rows written in pieces through a real pipe arrive whole; SIGTERM with stdin idle exits", async () => {
  const seed = Date.now() % 2 ** 31;
  console.log(`seed ${seed}`);
  const random = rng(seed);
  const dir = await tempDir("streamcast-cli-");
  const schema = join(dir, "t.json");
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  const rows = Array.from({ length: 200 }, (_, i) => ({
    i,
    // One row wider than a read of stdin (64 KiB) and than a pipe's buffer.
    s: i === 77 ? "w€".repeat(50_000) : "é€😀".repeat(Math.floor(random() * 30)),
  }));
  const text = rows.map((r) => JSON.stringify(r)).join("\n") + "\n";
  const bytes = new TextEncoder().encode(text);
  try {
    const s = await startServe(
      [
        "--root",
        join(dir, "data"),
        "--stream",
        `t=${schema}`,
        "--stdin",
        "t",
        "--port",
        String(freePort()),
      ],
      { stdin: true },
    );
    try {
      const sub = await TestSub.open(`${s.ws}/t?offset=1&frames=batch`);
      // Pieces of 1 to 5000 bytes, cut anywhere (inside a character too), a pause now and then.
      for (let at = 0; at < bytes.length;) {
        const n = Math.min(bytes.length - at, 1 + Math.floor(random() * 5000));
        await s.writeBytes(bytes.subarray(at, at + n));
        at += n;
        if (random() < 0.1) await new Promise((r) => setTimeout(r, 2));
      }
      await sub.waitLines(rows.length, 20_000);
      assertEquals(sub.lines.length, rows.length);
      for (let i = 0; i < rows.length; i++) {
        assertEquals(JSON.parse(sub.lines[i]), [i + 1, rows[i]]);
      }
      await sub.close();
      // stdin still open and idle: the signal ends the pending read.
      const status = await s.signal("SIGTERM", 10_000);
      assertEquals(status.code, 0);
      assert(!/end of stdin/.test(s.stderr()), s.stderr());
    } finally {
      await s.stop();
    }
  } finally {
    await rmrf(dir);
  }
});
