// The send buffer (`sendBufferBytes`): Deno's `send` copies every frame into
// its socket's own buffer, so what stalled subscribers cost the server is the
// bytes their sockets hold handed to `send` and not yet written. With live
// commits cut into shared pieces of the socket's share, a stalled socket holds
// at most its share of the send buffer (plus a small catch-up read), however
// big the commits; with a send buffer eight times bigger (the control), the
// same sockets hold more than that bound, so the measure sees what they hold.
// Measured in the
// server through /_/metrics (streamcast_send_buffered_bytes, the sum of the
// sockets' bufferedAmount), over real stalled sockets; a stalled subscriber
// that reads again gets every row, no gap, no duplicate.
import { assert, assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { RawWs } from "../../harness/raw_ws.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { MIN_SEND_BUFFER_BYTES } from "../../../server/limits.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, pad: { type: "string" } },
  required: ["i", "pad"],
};
const PAD = "x".repeat(240);
const STALLED = 8;
// ~500 KB commits, ~36 MB in all: more than the kernel's buffers of a stalled
// localhost socket take, so the server's own buffers fill.
const ROWS_PER_COMMIT = 2000;
const COMMITS = 72;
const BUDGET = MIN_SEND_BUFFER_BYTES; // 1 MiB: each of the 8 sockets may hold 128 KiB
const SHARE = BUDGET / STALLED;
// A socket holds at most its share, or what one small catch-up read renders
// (16 KiB of rows) past it: 32 KiB of slack each.
const SLACK = 32 * 1024;
const BOUND = STALLED * (SHARE + SLACK);

async function bufferedBytes(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/_/metrics`)).text();
  const m = /^streamcast_send_buffered_bytes (\d+)$/m.exec(text);
  if (!m) throw new Error("no streamcast_send_buffered_bytes in /_/metrics");
  return Number(m[1]);
}

function rssMiB(text: string): number {
  const m = /^streamcast_process_memory_bytes\{kind="resident"\} (\d+)$/m.exec(text);
  return m ? Number(m[1]) / 2 ** 20 : NaN;
}

/**
 * Publishes COMMITS big commits to STALLED live subscribers that never read,
 * sampling the server's buffered bytes after each; returns the most seen,
 * the sockets (still open) and the offset of the first row.
 */
async function stalledRun(
  sendBufferBytes: number,
): Promise<{ maxBuffered: number; rss: number; check: () => Promise<void> }> {
  const root = await tempDir();
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root,
    maxReplay: null,
    logOptions: { fsync: false },
  });
  const server = serve([stream], { port: 0, onListen: () => {}, sendBufferBytes });
  const port = server.addr.port;
  const socks: RawWs[] = [];
  const cleanup = async () => {
    for (const s of socks) s.close();
    await server.shutdown();
    await rmrf(root);
  };
  try {
    await stream.send({ i: 0, pad: PAD });
    let first = 0;
    for (let k = 0; k < STALLED; k++) {
      const ws = await RawWs.connect(port, "/t?frames=batch");
      first = JSON.parse((await ws.readText())!).end_offset; // then nothing is read
      socks.push(ws);
    }
    await until(() => stream.subscriberStates().live === STALLED, 5000, "every one live");
    let maxBuffered = 0;
    let i = 1;
    for (let c = 0; c < COMMITS; c++) {
      await stream.sendMany(
        Array.from({ length: ROWS_PER_COMMIT }, () => ({ i: i++, pad: PAD })),
      );
      // A turn for the sockets' writes, then what they hold.
      await new Promise((r) => setTimeout(r, 5));
      maxBuffered = Math.max(maxBuffered, await bufferedBytes(port));
    }
    const rss = rssMiB(await (await fetch(`http://127.0.0.1:${port}/_/metrics`)).text());
    const end = stream.endOffset!;
    // One stalled subscriber reads again: every row from its first, once.
    const check = async () => {
      try {
        const ws = socks[0];
        let next = first;
        while (next < end) {
          const text = await ws.readText();
          if (text === null) throw new Error(`closed at ${next}, before ${end}`);
          for (const line of text.split("\n")) {
            const [offset, msg] = JSON.parse(line);
            assertEquals(offset, next, "offsets contiguous: no gap, no duplicate");
            assertEquals(msg.i, next - first + 1);
            next++;
          }
        }
        assertEquals(next, end);
      } finally {
        await cleanup();
      }
    };
    return { maxBuffered, rss, check };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

Deno.test("stalled subscribers hold at most their share of the send buffer, and a resumed one gets every row", async () => {
  const r = await stalledRun(BUDGET);
  try {
    console.log(
      `pieces: ${STALLED} stalled sockets held at most ${(r.maxBuffered / 1024).toFixed(0)} KiB ` +
        `(bound ${(BOUND / 1024).toFixed(0)} KiB) of ${
          (COMMITS * ROWS_PER_COMMIT * 260 / 2 ** 20).toFixed(0)
        } MiB published; RSS of this test process (server and sockets) ${r.rss.toFixed(0)} MiB`,
    );
    assert(r.maxBuffered > 0, "the stalled sockets' buffers filled");
    assert(
      r.maxBuffered <= BOUND,
      `held ${r.maxBuffered} bytes > ${BOUND} (share ${SHARE} + slack, x ${STALLED})`,
    );
  } finally {
    await r.check();
  }
});

Deno.test("control: with a send buffer eight times bigger, the stalled sockets hold more (the bound above fails)", async () => {
  const r = await stalledRun(8 * BUDGET);
  try {
    console.log(
      `8x send buffer: ${STALLED} stalled sockets held at most ${
        (r.maxBuffered / 1024).toFixed(0)
      } KiB (bound ${(BOUND / 1024).toFixed(0)} KiB)`,
    );
    assert(r.maxBuffered > BOUND, `held ${r.maxBuffered} bytes, within ${BOUND}`);
  } finally {
    await r.check();
  }
});
