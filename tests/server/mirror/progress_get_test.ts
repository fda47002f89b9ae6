// progressGet against a real server on 127.0.0.1: silence fails a request
// (before the headers, or between two pieces of the body); a body that keeps
// moving is read whole however long it takes in all; readBounded stops at
// its bound.
import { assertEquals, assertRejects } from "../../harness/assert.ts";
import { progressGet, readBounded } from "../../../server/mirror/_progress_get.ts";

async function withServer(
  handler: (path: string) => Response | Promise<Response>,
  fn: (base: string) => Promise<void>,
): Promise<void> {
  const ac = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    (req) => handler(new URL(req.url).pathname),
  );
  try {
    await fn(`http://127.0.0.1:${server.addr.port}`);
  } finally {
    ac.abort();
    await server.finished;
  }
}

/** A body of `pieces` pieces of `size` bytes, one every `everyMs`; then, with `stall`, silence. */
function trickle(pieces: number, size: number, everyMs: number, stall = false): Response {
  let sent = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stalled = Promise.withResolvers<void>();
  return new Response(
    new ReadableStream<Uint8Array>({
      async pull(c) {
        if (sent === pieces) {
          if (!stall) return c.close();
          return await stalled.promise;
        }
        await new Promise((r) => timer = setTimeout(r, everyMs));
        sent++;
        c.enqueue(new Uint8Array(size).fill(sent));
      },
      cancel() {
        clearTimeout(timer);
        stalled.resolve();
      },
    }),
  );
}

Deno.test("progressGet reads a moving body whole, however long it takes in all", async () => {
  // 30 pieces 20 ms apart: some 600 ms in all, twice the 300 ms of silence allowed.
  await withServer(() => trickle(30, 100, 20), async (base) => {
    const res = await progressGet(`${base}/x`, {
      headers: {},
      fetch,
      signal: new AbortController().signal,
      idleMs: 300,
    });
    const bytes = await res.bytes();
    assertEquals(bytes.length, 3000);
    assertEquals([bytes[0], bytes[2999]], [1, 30]);
  });
});

Deno.test("progressGet fails a body that goes silent, naming the request and the wait", async () => {
  await withServer(() => trickle(2, 10, 10, true), async (base) => {
    const res = await progressGet(`${base}/x`, {
      headers: {},
      fetch,
      signal: new AbortController().signal,
      idleMs: 200,
    });
    const reader = res.body!.getReader();
    assertEquals((await reader.read()).value?.length, 10);
    assertEquals((await reader.read()).value?.length, 10);
    await assertRejects(() => reader.read(), Error, `GET ${base}/x: no bytes for 200 ms`);
  });
});

Deno.test("progressGet fails a request whose answer does not come", async () => {
  const release = Promise.withResolvers<void>();
  await withServer(async () => {
    await release.promise;
    return new Response("late");
  }, async (base) => {
    await assertRejects(
      () =>
        progressGet(`${base}/x`, {
          headers: {},
          fetch,
          signal: new AbortController().signal,
          idleMs: 200,
        }),
      Error,
      `GET ${base}/x: no answer for 200 ms`,
    );
    release.resolve();
  });
});

Deno.test("progressGet: the caller's signal aborts it whatever its progress", async () => {
  await withServer(() => trickle(1000, 10, 10), async (base) => {
    const ac = new AbortController();
    const res = await progressGet(`${base}/x`, {
      headers: {},
      fetch,
      signal: ac.signal,
      idleMs: 5000,
    });
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort(new Error("closing"));
    await assertRejects(() => reader.read(), Error, "closing");
  });
});

Deno.test("readBounded stops at its bound and names it", async () => {
  await withServer(() => trickle(1000, 1000, 1), async (base) => {
    const res = await fetch(`${base}/x`);
    await assertRejects(
      () => readBounded(res.body, 4096, "the manifest"),
      RangeError,
      "the manifest is over 4096 bytes",
    );
  });
  assertEquals(
    await readBounded(new Response("abc").body, 3, "x"),
    new TextEncoder().encode("abc"),
  );
  assertEquals(await readBounded(null, 3, "x"), new Uint8Array(0));
});
