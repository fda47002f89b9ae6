import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import {
  connect,
  ConnectionClosed,
  NotReplayable,
  type ReconnectEvent,
  TooSlow,
} from "../../client/mod.ts";
import { until } from "../harness/util.ts";
import { fixture, type TradeRow } from "../harness/client_server.ts";

Deno.test("reconnect keeps a contiguous sequence across a server restart", async () => {
  const f = await fixture({ maxReplay: null });
  try {
    await f.send(1, 100);
    const events: ReconnectEvent[] = [];
    const sub = await connect<TradeRow>(f.url, {
      offset: 1,
      reconnect: true,
      backoff: { minMs: 20, maxMs: 200 },
      onReconnect: (e) => events.push(e),
    });
    const streamId = sub.streamId;
    const received: number[] = [];
    const consumer = (async () => {
      for await (const [offset, msg] of sub) {
        assertEquals(msg.event_ts, offset, "the row at each offset is the one sent there");
        received.push(offset!);
      }
    })();
    // Publish one row at a time while the server goes down and comes back.
    let stop = false;
    let next = 101;
    const publish = async () => {
      while (!stop) {
        try {
          await f.stream.send({ event_ts: next, symbol: "BTC-USD", price: 1, side: 1 });
        } catch {
          return; // the stream closed under us: this row was not stored
        }
        next++;
      }
    };
    let publisher = publish();
    await until(() => received.length >= 150, 10_000, "rows before the restart");
    await f.server.shutdown();
    await publisher;
    // Down for a while: attempts fail with 1006 and back off.
    await new Promise((r) => setTimeout(r, 300));
    await f.restart();
    next = f.stream.endOffset!;
    const restartedAt = next;
    publisher = publish();
    await until(() => received.length >= restartedAt + 100, 10_000, "rows after the restart");
    stop = true;
    await publisher;
    const end = f.stream.endOffset!;
    await until(() => received.at(-1) === end - 1, 10_000, `rows up to ${end - 1}`);
    await sub.close();
    await consumer;
    assertEquals(received, Array.from({ length: end - 1 }, (_, k) => k + 1));
    assertEquals(sub.streamId, streamId);
    assertEquals(sub.reconnects, 1);
    assert(events.length >= 2, `${events.length} attempts while the server was down`);
    // 1001 is what the server means to send; under load its shutdown often drops
    // the socket before the close frame is out (1006). Either way: reconnect.
    const first = events[0].error;
    assert(first instanceof ConnectionClosed && [1001, 1006].includes(first.code!), first.message);
    assertEquals(events.map((e) => e.attempt), events.map((_, i) => i + 1));
    for (const e of events) {
      assertEquals(e.lost, false);
      assertEquals(e.resumeAt, events[0].resumeAt, "every attempt resumes at the same offset");
      assert(e.delayMs <= 200, `delay ${e.delayMs}`);
    }
    assert(events.slice(1).every((e) => e.error.code === 1006), "later attempts were refused");
  } finally {
    await f.stop();
  }
});

Deno.test("reconnect never crosses a stream_id change: the loop ends with NotReplayable other_stream", async () => {
  const f = await fixture();
  try {
    await f.send(1, 10);
    const events: ReconnectEvent[] = [];
    const sub = await connect(f.url, {
      offset: 1,
      reconnect: true,
      backoff: { minMs: 10, maxMs: 50 },
      onReconnect: (e) => events.push(e),
    });
    const oldId = sub.streamId!;
    for (let i = 0; i < 5; i++) await sub.next();
    await f.restart({ wipe: true });
    await f.send(1, 10);
    const err = await assertRejects(async () => {
      while (!(await sub.next()).done) {
        // Rows 6..10 of the old log were already received; then the reconnect is refused.
      }
    }, NotReplayable);
    assertEquals(err.why, "other_stream");
    assert(err.message.includes(oldId), err.message);
    assertEquals(sub.lastOffset, 10);
    assertEquals(events.at(-1)!.resumeAt, 11);
    assertEquals(f.stream.subscribers, 0);
  } finally {
    await f.stop();
  }
});

Deno.test("close() during reconnect backoff ends the loop", async () => {
  const f = await fixture();
  try {
    const sub = await connect(f.url, { reconnect: true, backoff: { minMs: 50, maxMs: 100 } });
    await f.server.shutdown();
    const pending = sub.next();
    await new Promise((r) => setTimeout(r, 200));
    await sub.close();
    assertEquals((await pending).done, true);
  } finally {
    await f.stop();
  }
});

/** Starts tests/client/_server.ts: an ephemeral stream with a tiny maxBacklog, published to flat out. */
async function slowServer(maxBacklog: number) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("./_server.ts", import.meta.url).pathname, String(maxBacklog)],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the server process exited before listening");
    text += value;
  }
  const { port } = JSON.parse(text.split("\n")[0]);
  return {
    url: `ws://127.0.0.1:${port}/trades`,
    async stop() {
      await child.stdin.close();
      await reader.cancel();
      const status = await child.status;
      assertEquals(status.code, 0);
    },
  };
}

/** Blocks the event loop, so the socket is not read and the server's buffers fill. */
function busy(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // Deliberately synchronous: a consumer too slow to read its socket.
  }
}

Deno.test("reconnect after 4429 on an ephemeral stream goes live again and reports the loss", async () => {
  const server = await slowServer(4);
  try {
    const events: ReconnectEvent[] = [];
    // Text frames: zstd's would take far longer to fill the socket's buffers.
    const sub = await connect<TradeRow>(server.url, {
      reconnect: true,
      backoff: { minMs: 10, maxMs: 50 },
      onReconnect: (e) => events.push(e),
      compress: false,
    });
    const seq: number[] = [];
    let blocks = 0;
    let after = 0;
    for await (const [offset, msg] of sub) {
      assertEquals(offset, null);
      seq.push(msg.event_ts);
      if (events.length === 0 && sub.buffered === 0) {
        if (++blocks > 10) throw new Error("the server never dropped this slow subscriber");
        busy(1000);
      }
      if (sub.reconnects > 0 && ++after >= 200) break;
    }
    assertEquals(events.length, 1);
    const e = events[0];
    assert(e.error instanceof TooSlow, String(e.error));
    assertEquals(e.error.resume, null);
    assertEquals([e.resumeAt, e.lost, e.attempt], [null, true, 1]);
    assert(e.error.message.includes("ephemeral"), e.error.message);
    // The rows published while disconnected never arrived: there is a gap.
    const gaps = seq.filter((v, i) => i > 0 && v !== seq[i - 1] + 1);
    assertEquals(gaps.length, 1, "one gap, at the reconnect");
  } finally {
    await server.stop();
  }
});

Deno.test("without reconnect a 4429 ends the loop with TooSlow", async () => {
  const server = await slowServer(4);
  try {
    const sub = await connect(server.url, { compress: false }); // text: fills buffers sooner
    let blocks = 0;
    const err = await assertRejects(async () => {
      for await (const _ of sub) {
        if (sub.buffered === 0) {
          // A bound against hanging only: on a busy machine the publishing
          // process is starved too, and fills the socket later.
          if (++blocks > 60) throw new Error("the server never dropped this slow subscriber");
          busy(1000);
        }
      }
    }, TooSlow);
    assertEquals([err.code, err.resume], [4429, null]);
  } finally {
    await server.stop();
  }
});
