// `cli.ts publish`: --acks lines, the exit codes, a refused line named.
import { assert, assertEquals } from "../../harness/assert.ts";
import { CLI } from "../../harness/serve.ts";
import { endOffset, startPublishServer } from "../../harness/publish_child.ts";

async function publish(
  args: string[],
  input: string,
): Promise<{ code: number; out: string; err: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "publish", ...args],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(input));
  await w.close();
  const o = await child.output();
  const dec = new TextDecoder();
  return { code: o.code, out: dec.decode(o.stdout), err: dec.decode(o.stderr) };
}

const line = (i: number) => JSON.stringify({ sym: `c${i}`, px: i });

Deno.test("cli publish: --acks prints each ack; a refused line exits 1 naming it; usage and refusals", async () => {
  const s = await startPublishServer();
  try {
    const ok = await publish(
      [`${s.ws}/t`, "--acks", "--batch", "2"],
      [1, 2, 3].map(line).join("\n") + "\n",
    );
    assertEquals(ok.code, 0, ok.err);
    const acks = ok.out.trim().split("\n").map((l) => JSON.parse(l));
    assertEquals(acks, [{ seq: 2, first: 1, last: 2 }, { seq: 3, first: 3, last: 3 }]);
    const bad = await publish([`${s.http}/t`, "--batch", "1"], `${line(4)}\n{"sym":"x"}\n`);
    assertEquals(bad.code, 1);
    assert(bad.err.includes("refused at line 2"), bad.err);
    const notJson = await publish([`${s.ws}/t`], `${line(5)}\n{oops\n`);
    assertEquals(notJson.code, 1);
    assert(notJson.err.includes("line 2: not JSON"), notJson.err);
    const nope = await publish([`${s.ws}/nope`], line(1));
    assertEquals(nope.code, 1);
    assert(nope.err.startsWith("streamcast publish:"), nope.err);
    assertEquals((await publish([], "")).code, 2);
    assertEquals((await publish([`${s.ws}/t`, "--batch", "0"], "")).code, 2);
    assertEquals((await publish([`${s.ws}/t`, "--producer", "a b"], "")).code, 2);
    const badWait = await publish([`${s.ws}/t`, "--disk-full-timeout-ms", "soon"], "");
    assertEquals(badWait.code, 2);
    assert(badWait.err.includes("--disk-full-timeout-ms must be an integer"), badWait.err);
    // Lines 4 and 5 were stored before their refusals; nothing of the refused ones.
    assertEquals(await endOffset(s.http), 6);
  } finally {
    await s.stop();
  }
});
