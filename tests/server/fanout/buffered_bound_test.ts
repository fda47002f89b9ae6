// A live batched subscriber knows an upper bound of its socket's
// bufferedAmount (the last value read plus what it handed `send` since), and
// reads the real value only when a frame does not fit under the bound: over a
// real WebSocket, a thousand small commits arrive whole and in order with a
// few reads of bufferedAmount, not one a commit.
import { assert, assertEquals } from "../../harness/assert.ts";
import { Subscriber, type SubscriberHost } from "../../../server/fanout/subscriber.ts";
import { SendBudget } from "../../../server/fanout/send_budget.ts";
import { until } from "../../harness/util.ts";

Deno.test("a live subscriber reads bufferedAmount only when a frame does not fit under its bound", async () => {
  let server!: WebSocket;
  const opened = Promise.withResolvers<void>();
  const http = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, (req) => {
    const { socket, response } = Deno.upgradeWebSocket(req);
    server = socket;
    socket.onopen = () => opened.resolve();
    return response;
  });
  const got: string[] = [];
  const client = new WebSocket(`ws://127.0.0.1:${http.addr.port}/`);
  client.onmessage = (e) => void got.push(...String(e.data).split("\n"));
  await opened.promise;
  let reads = 0;
  const socket = {
    get readyState() {
      return server.readyState;
    },
    get bufferedAmount() {
      reads++;
      return server.bufferedAmount;
    },
    send: (data: string) => server.send(data),
    close: (code?: number, reason?: string) => server.close(code, reason),
  } as unknown as WebSocket;
  const host: SubscriberHost = {
    name: "t",
    durable: true,
    endOffset: () => 1,
    reader: () => {
      throw new Error("no catch-up here");
    },
    joinLive: () => {},
    leaveLive: () => {},
    gone: () => {},
    count: () => {},
    dropped: (why) => {
      throw new Error(`dropped ${why}`);
    },
    failed: (err) => {
      throw err;
    },
    arrowEncoder: () => {
      throw new Error("no arrow");
    },
  };
  // One socket: its share is the most one socket may hold, 1 MiB.
  const sub = new Subscriber(socket, host, 1, {
    frames: "batch",
    maxBacklog: 100_000,
    stallTimeoutMs: 60_000,
    sendBudget: new SendBudget(),
  });
  sub.start();
  assertEquals(sub.state, "live");
  const row = (k: number) => `[${k},{"pad":"${"é".repeat(500)}"}]`;
  for (let k = 1; k <= 1000; k++) {
    // Each commit its own shared frames (the pieces are cached per commit).
    sub.push([row(k)], k + 1, { joined: () => row(k), arrow: () => new Uint8Array() });
    // A turn now and then, as commits come: the runtime writes what was handed.
    if (k % 50 === 0) await new Promise((r) => setTimeout(r, 0));
  }
  await until(() => got.length === 1000, 10_000, "every row at the client");
  assertEquals(got, Array.from({ length: 1000 }, (_, i) => row(i + 1)));
  assertEquals(sub.next, 1001);
  // ~1500 bytes of bound a send against a 1 MiB share: a read every ~700 sends.
  assert(reads >= 1 && reads <= 10, `bufferedAmount read ${reads} times for 1000 commits`);
  sub.close();
  client.close();
  await new Promise((r) => (client.onclose = r));
  await http.shutdown();
});
