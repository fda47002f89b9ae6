// `/head` and `/_/streams` say whether a stream takes rows over the publish
// routes: `publish` true for a stream opened with --publish, false otherwise.
import { assertEquals } from "../../harness/assert.ts";
import { publisher } from "../../../client/mod.ts";
import { fetchHead } from "../../../client/mod.ts";
import { startPublishServer } from "../../harness/publish_child.ts";
import { SCHEMA } from "../../harness/publish_in_process.ts";

Deno.test("head says publish: true for a stream opened for publishing, false for another", async () => {
  const s = await startPublishServer([], false, async (root) => {
    await Deno.writeTextFile(`${root}/u.schema.json`, JSON.stringify(SCHEMA));
    return ["--stream", `u=${root}/u.schema.json`];
  });
  try {
    const t = await fetchHead(`${s.ws}/t`);
    const u = await fetchHead(`${s.ws}/u`);
    assertEquals([t.stream, t.durable, t.publish], ["t", true, true]);
    assertEquals([u.stream, u.durable, u.publish], ["u", true, false]);
    const all = await (await fetch(`${s.http}/_/streams`)).json() as {
      stream: string;
      publish: boolean;
    }[];
    assertEquals(
      all.map((h) => [h.stream, h.publish]).sort(),
      [["t", true], ["u", false]],
    );
    // What the field says is what the publish routes do.
    const pub = await publisher(`${s.ws}/t`);
    await pub.send({ sym: "a", px: 1 });
    await pub.close();
    const refused = await fetch(`${s.http}/u`, { method: "POST", body: '{"sym":"a","px":1}\n' });
    assertEquals([refused.status, (await refused.json()).error], [405, "not_publishable"]);
  } finally {
    await s.stop();
  }
});
