import { assert, assertEquals } from "../harness/assert.ts";
import { Log, verifyLog } from "../../log/mod.ts";
import { rmrf, rng, tempDir, text } from "../harness/util.ts";
import { crashPayload } from "./_crash_payload.ts";

const child = new URL("./_append_child.ts", import.meta.url).pathname;

Deno.test("log keeps every acknowledged append when its writer is SIGKILLed", async () => {
  const dir = await tempDir();
  const rand = rng(7);
  try {
    let continued = 0;
    for (let round = 0; round < 3; round++) {
      const proc = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", child, dir],
        stdout: "piped",
        stderr: "inherit",
      }).spawn();
      let acked = 0;
      const reader = (async () => {
        let buf = "";
        for await (const chunk of proc.stdout.pipeThrough(new TextDecoderStream())) {
          buf += chunk;
          const lines = buf.split("\n");
          buf = lines.pop()!;
          for (const l of lines) if (l.startsWith("ack ")) acked = Number(l.slice(4));
        }
      })();
      // Kill at a random moment once the child is appending.
      const start = Date.now();
      while (acked === 0 && Date.now() - start < 20_000) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, 100 + rand() * 400));
      proc.kill("SIGKILL");
      await proc.status;
      await reader;
      assert(acked > continued, `round ${round}: the child acknowledged nothing new`);

      const log = await Log.open(dir, { timers: false });
      assert(log.endOffset > acked, `end ${log.endOffset} must be past acknowledged ${acked}`);
      const r = log.reader(1);
      let expect = 1;
      while (true) {
        const b = await r.read();
        if (b.count === 0) break;
        for (let i = 0; i < b.count; i++) {
          assertEquals(b.offsets[i], expect);
          const got = b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]);
          assertEquals(text(got), text(crashPayload(expect)));
          expect++;
        }
      }
      r.close();
      assertEquals(expect, log.endOffset);
      // Appends continue at the next offset.
      const next = log.endOffset;
      assertEquals(await log.append(crashPayload(next)), next);
      continued = next;
      await log.close();
      assertEquals((await verifyLog(dir)).error, null);
    }
  } finally {
    await rmrf(dir);
  }
});
