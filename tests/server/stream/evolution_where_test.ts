// where= on an evolved log: a row stored before a nullable column was added
// lacks the column's key and reads as null in it, as export and Arrow read it —
// on the server's replay from chunks and from segments, live, and in the
// client's catch-up from chunks.
import { assertEquals } from "../../harness/assert.ts";
import { serve, Stream, type StreamOptions } from "../../../mod.ts";
import { connect } from "../../../client/mod.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";

const V1 = {
  type: "object",
  properties: { px: { type: "number" } },
  required: ["px"],
  additionalProperties: false,
};
const V2 = {
  type: "object",
  properties: { px: { type: "number" }, venue: { type: ["string", "null"] } },
  required: ["px", "venue"],
  additionalProperties: false,
};

const old = (i: number) => ({ px: i });
const grown = (i: number, venue: string | null) => ({ px: i, venue });

/** Rows 1–3 (V1) chunked, 4–5 (V1) in a segment, then 6 (v6), 7 (null) under V2. */
async function evolvedLog(root: string): Promise<void> {
  const a = await Stream.open("t", { schema: V1, root, logOptions: { timers: false } });
  await a.sendMany([1, 2, 3].map(old));
  await a.log!.roll();
  await a.log!.chunks.settled();
  await a.sendMany([4, 5].map(old));
  await a.close();
  const b = await Stream.open("t", { schema: V2, root, logOptions: { timers: false } });
  await b.sendMany([grown(6, "v6"), grown(7, null)]);
  await b.close();
}

async function opened(root: string, opts: Partial<StreamOptions> = {}) {
  const stream = await Stream.open("t", {
    schema: V2,
    root,
    logOptions: { timers: false },
    ...opts,
  });
  const server = serve([stream], { port: 0, onListen: () => {} });
  return { stream, server, url: `ws://127.0.0.1:${server.addr.port}/t` };
}

const frame = (i: number) => `[${i},${JSON.stringify(i <= 5 ? old(i) : grown(i, null))}]`;

Deno.test("where {col: null} matches rows stored before the column was added, in replay and live", async () => {
  const root = await tempDir();
  try {
    await evolvedLog(root);
    const { stream, server, url } = await opened(root);
    try {
      assertEquals(stream.log!.chunks.manifest!.chunks.length, 1, "rows 1-3 are read from a chunk");
      const where = (w: unknown) => `where=${encodeURIComponent(JSON.stringify(w))}`;
      const isNull = await TestSub.open(`${url}?offset=1&frames=batch&${where({ venue: null })}`);
      const listed = await TestSub.open(
        `${url}?offset=1&frames=batch&${where({ venue: [null, "v6"] })}`,
      );
      const named = await TestSub.open(`${url}?offset=1&frames=batch&${where({ venue: "v6" })}`);
      const prefixed = await TestSub.open(
        `${url}?offset=1&frames=batch&${where({ venue: { prefix: "" } })}`,
      );
      await isNull.waitLines(6);
      await listed.waitLines(7);
      await named.waitLines(1);
      // Live: a row with the key present and null, then one with a venue.
      await stream.sendMany([grown(8, null), grown(9, "v9")]);
      await isNull.waitLines(7);
      await listed.waitLines(8);
      await prefixed.waitLines(2);
      assertEquals(isNull.lines, [1, 2, 3, 4, 5, 7, 8].map(frame));
      assertEquals(
        listed.lines,
        [1, 2, 3, 4, 5, 6, 7, 8].map((i) => i === 6 ? '[6,{"px":6,"venue":"v6"}]' : frame(i)),
      );
      assertEquals(named.lines, ['[6,{"px":6,"venue":"v6"}]']);
      // A missing key is null, and null starts with no prefix.
      assertEquals(prefixed.lines, ['[6,{"px":6,"venue":"v6"}]', '[9,{"px":9,"venue":"v9"}]']);
      for (const s of [isNull, listed, named, prefixed]) await s.close();
    } finally {
      await server.shutdown();
    }
  } finally {
    await rmrf(root);
  }
});

Deno.test("where {col: null} in the client's catch-up matches chunk rows stored before the column was added", async () => {
  const root = await tempDir();
  try {
    await evolvedLog(root);
    // 7 rows from offset 1 are too many: the client reads the chunk (1-3) over
    // HTTP, filters it itself, then subscribes at 4.
    const { server, url } = await opened(root, { maxReplay: 4 });
    try {
      const sub = await connect(url, { offset: 1, catchUp: true, where: { venue: null } });
      const got: string[] = [];
      for await (const [offset, line] of sub.lines()) {
        got.push(line);
        if (offset === 7) break;
      }
      await sub.close();
      assertEquals(got, [1, 2, 3, 4, 5, 7].map(frame));
    } finally {
      await server.shutdown();
    }
  } finally {
    await rmrf(root);
  }
});
