// A publisher whose server is gone (SIGKILLed, refused, or taking the
// connection without answering) settles in bounded time: close() resolves,
// outstanding sends reject with an error saying why, start fails clearly.
import { assert, assertEquals, assertRejects } from "../../harness/assert.ts";
import { freePort, until } from "../../harness/util.ts";
import { withTimeout } from "../../harness/serve.ts";
import { type Published, publisher, PublishError } from "../../../client/mod.ts";
import { startPublishServer } from "../../harness/publish_child.ts";

Deno.test("publisher close() settles when the server was SIGKILLed: outstanding sends reject naming why", async () => {
  const s = await startPublishServer();
  try {
    const pub = await publisher(`${s.ws}/t`, {
      producer: "close-1",
      backoff: { minMs: 50, maxMs: 200 },
      closeTimeoutMs: 1500,
    });
    assertEquals((await pub.send({ sym: "a", px: 1 })) !== null, true);
    await s.proc.stop(); // SIGKILL
    const outcomes: Promise<Published | Error>[] = [];
    for (let i = 0; i < 20; i++) {
      outcomes.push(pub.publish([{ sym: "b", px: i }]).catch((e: Error) => e));
    }
    const t0 = Date.now();
    await withTimeout(pub.close(), 6_000, "close() with the server gone");
    const tookMs = Date.now() - t0;
    assert(tookMs < 5_000, `close took ${tookMs} ms`);
    const settled = await withTimeout(Promise.all(outcomes), 1_000, "every send settled");
    const errors = settled.filter((o) => o instanceof Error);
    assertEquals(errors.length, 20, "no server answered these");
    for (const e of errors) {
      assert(e instanceof PublishError, String(e));
      assertEquals(e.error, "closed");
      assert(
        /close\(\) gave up after 1500 ms with 20 frame\(s\) unanswered/.test(e.message),
        e.message,
      );
      assert(e.message.includes(`127.0.0.1:${s.port}`), e.message);
      assert(/connection .* is down/.test(e.message), e.message);
    }
    await assertRejects(() => pub.send({ sym: "c", px: 0 }), PublishError);
  } finally {
    await s.stop();
  }
});

Deno.test("publisher close() with nothing outstanding returns at once while reconnects fail", async () => {
  const s = await startPublishServer();
  try {
    const pub = await publisher(`${s.ws}/t`, {
      producer: "close-2",
      backoff: { minMs: 50, maxMs: 100 },
    });
    await pub.send({ sym: "a", px: 1 });
    await s.proc.stop();
    await until(() => pub.greeting === null, 5_000, "the drop seen");
    await withTimeout(pub.close(), 2_500, "close() with the server gone, nothing pending");
  } finally {
    await s.stop();
  }
});

Deno.test("publisher() at start: a refused connection and a silent host reject promptly and clearly", async () => {
  const port = freePort();
  const refused = await withTimeout(
    publisher(`ws://127.0.0.1:${port}/t`).catch((e: Error) => e),
    5_000,
    "refused start",
  );
  assert(refused instanceof PublishError, String(refused));
  assertEquals(refused.error, "closed");
  assert(
    refused.message.includes(`cannot connect to ws://127.0.0.1:${port}/t/publish`),
    refused.message,
  );

  // A host that takes the TCP connection and never answers the upgrade.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of listener) held.push(c);
  })();
  try {
    const t0 = Date.now();
    const silent = await withTimeout(
      publisher(`ws://127.0.0.1:${listener.addr.port}/t`, { connectTimeoutMs: 400 })
        .catch((e: Error) => e),
      5_000,
      "silent start",
    );
    assert(silent instanceof PublishError, String(silent));
    assert(/no greeting within 400 ms/.test(silent.message), silent.message);
    assert(Date.now() - t0 < 3_000);
  } finally {
    listener.close();
    await accepting.catch(() => {});
    for (const c of held) {
      try {
        c.close();
      } catch {
        // closed by the client already
      }
    }
  }
});
