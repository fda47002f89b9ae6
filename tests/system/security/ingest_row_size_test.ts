// A row over the log's size limit, fed through the library's ingest into a
// real stream: that row alone is a reject (logged, counted, recorded), and
// every row around it, pipelined into the same commits, is stored.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { Log } from "../../../log/mod.ts";
import { ingestLines, ingestUpstream, rejectFile } from "../../../server/ingest/mod.ts";
import { Stream } from "../../../server/stream/stream.ts";
import { rmrf, tempDir, text, until } from "../../harness/util.ts";

const SCHEMA = {
  type: "object",
  properties: { seq: { type: "integer" }, note: { type: "string" } },
  required: ["seq", "note"],
};
const MAX_ROW_BYTES = 200;

const small = (seq: number) => JSON.stringify({ seq, note: "ok" });
const big = (seq: number) => JSON.stringify({ seq, note: "x".repeat(500) });

/** Every row of the log in `dir`: [offset, payload]. */
async function logRows(dir: string): Promise<[number, string][]> {
  const log = await Log.open(dir, { create: false });
  const out: [number, string][] = [];
  const r = log.reader(log.firstOffset);
  try {
    while (true) {
      const b = await r.read(64 * 1024);
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) {
        out.push([b.offsets[i], text(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]))]);
      }
    }
  } finally {
    r.close();
    await log.close();
  }
  return out;
}

Deno.test("ingest lines rejects only an oversized row and stores every row around it", async () => {
  const root = await tempDir();
  try {
    const stream = await Stream.open("trades", {
      schema: SCHEMA,
      root,
      logOptions: { maxPayloadBytes: MAX_ROW_BYTES, fsync: false },
    });
    // 60 lines in one chunk: rows pipeline into shared commits with the big ones.
    const bigLines = new Set([7, 8, 31, 60]);
    const input = Array.from({ length: 60 }, (_, i) =>
      bigLines.has(i + 1) ? big(i + 1) : small(i + 1))
      .join("\n") + "\n" + "not json\n";
    const rejectsPath = join(root, "trades", "rejects.ndjson");
    const rejects = await rejectFile(rejectsPath);
    const messages: string[] = [];
    let stats;
    try {
      stats = await ingestLines(new Blob([input]).stream(), stream, {
        onReject: rejects,
        log: (m) => messages.push(m),
      });
    } finally {
      await rejects.close();
      await stream.close();
    }
    assertEquals(stats, { lines: 61, accepted: 56, rejected: 5 });
    // The four oversized rows reached the stream; the line that is not JSON did not.
    assertEquals(stream.stats.rowsRejected, 4, "streamcast_rows_rejected_total counts them");
    // Logged like any bad row, in line order, and the input went on to its end.
    const rejected = messages.filter((m) => /stdin line \d+ for stream "trades"/.test(m));
    assertEquals(rejected.map((m) => Number(/line (\d+)/.exec(m)![1])), [7, 8, 31, 60, 61]);
    assert(
      /^streamcast: stdin line 7 for stream "trades": row too big: payload is \d+ bytes; the limit is 200$/
        .test(rejected[0]),
      rejected[0],
    );
    assert(messages.at(-1)!.includes("(56 rows accepted, 5 rejected)"), messages.at(-1));
    // Recorded in the rejects file with its line number and raw input.
    const recorded = (await Deno.readTextFile(rejectsPath)).trim().split("\n").map((l) =>
      JSON.parse(l)
    );
    assertEquals(recorded.map((r) => r.line), [7, 8, 31, 60, 61]);
    assertEquals(recorded[0].input, big(7));
    assert(recorded[0].error.startsWith("row too big: "), recorded[0].error);
    // Every accepted row is in the log, in order, at consecutive offsets.
    const rows = await logRows(join(root, "trades"));
    const want = Array.from({ length: 60 }, (_, i) => i + 1).filter((s) => !bigLines.has(s));
    assertEquals(rows.map(([o]) => o), want.map((_, i) => i + 1));
    assertEquals(rows.map(([, p]) => JSON.parse(p).seq), want);
  } finally {
    await rmrf(root);
  }
});

Deno.test("ingest upstream rejects only an oversized frame and keeps its connection", async () => {
  const root = await tempDir();
  const ac = new AbortController();
  const feed = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const { socket, response } = Deno.upgradeWebSocket(req);
    socket.onopen = () => {
      for (let seq = 1; seq <= 20; seq++) socket.send(seq % 5 === 0 ? big(seq) : small(seq));
    };
    return response;
  });
  try {
    const stream = await Stream.open("trades", {
      schema: SCHEMA,
      root,
      logOptions: { maxPayloadBytes: MAX_ROW_BYTES, fsync: false },
    });
    const messages: string[] = [];
    let opens = 0;
    let stats;
    try {
      const done = ingestUpstream(`ws://127.0.0.1:${feed.addr.port}/`, stream, {
        log: (m) => messages.push(m),
        signal: ac.signal,
        onOpen: () => opens++,
      });
      await until(() => stream.endOffset === 17, 10_000, "16 rows stored");
      await until(() => messages.filter((m) => m.includes("row too big")).length === 4);
      ac.abort();
      stats = await done;
    } finally {
      await stream.close();
    }
    assertEquals(stats, { lines: 20, accepted: 16, rejected: 4 });
    assertEquals(opens, 1, "an oversized frame must not cost the connection");
    assert(!messages.some((m) => m.includes("disconnected")), messages.join("\n"));
    const rows = await logRows(join(root, "trades"));
    assertEquals(
      rows.map(([, p]) => JSON.parse(p).seq),
      Array.from({ length: 20 }, (_, i) => i + 1).filter((s) => s % 5 !== 0),
    );
  } finally {
    ac.abort();
    await feed.shutdown();
    await rmrf(root);
  }
});
