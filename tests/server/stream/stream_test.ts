import { assert, assertEquals, assertRejects } from "../../harness/assert.ts";
import { join } from "node:path";
import { Stream } from "../../../mod.ts";
import { rmrf, tempDir } from "../../harness/util.ts";

const A = { type: "object", properties: { x: { type: "number" } }, required: ["x"] };
const B = { type: "object", properties: { y: { type: "string" } }, required: ["y"] };

Deno.test("stream keeps its schema beside the log and refuses other columns once it has rows", async () => {
  const root = await tempDir();
  try {
    const s = await Stream.open("t", { schema: A, root });
    const kept = JSON.parse(await Deno.readTextFile(join(root, "t", "schema.json")));
    assertEquals(kept, A);
    await s.close();
    // No rows yet: another schema may replace it.
    const s2 = await Stream.open("t", { schema: B, root });
    await s2.send({ y: "a" });
    await s2.close();
    const err = await assertRejects(() => Stream.open("t", { schema: A, root }), TypeError);
    assert(err.message.includes("columns differ"), err.message);
    // The same columns (other annotations) are fine.
    const s3 = await Stream.open("t", {
      schema: { ...B, description: "now documented" },
      root,
    });
    assertEquals(s3.endOffset, 2);
    await s3.close();
  } finally {
    await rmrf(root);
  }
});

Deno.test("stream names and options are checked before anything is written", async () => {
  const root = await tempDir();
  try {
    await assertRejects(() => Stream.open("_hidden", { schema: A, root }), RangeError);
    await assertRejects(() => Stream.open("ok", { schema: { type: "array" }, root }), Error);
    await assertRejects(() => Stream.open("ok", { schema: A, root, maxBacklog: 0 }), RangeError);
    const entries = [];
    for await (const e of Deno.readDir(root)) entries.push(e.name);
    assertEquals(entries, []);
  } finally {
    await rmrf(root);
  }
});
