// A `POST` body counts in the server's publish budget as its bytes arrive,
// not by the length it declares: uploads that declare 16 MiB and send
// nothing hold nothing. A body that stalls for --publish-body-timeout is cut
// with 408 `body_timeout` and what it held is freed.
import { assert, assertEquals } from "../../harness/assert.ts";
import { until } from "../../harness/util.ts";
import { withTimeout } from "../../harness/serve.ts";
import { SCHEMA } from "../../harness/publish_in_process.ts";
import { startPublishServer } from "../../harness/publish_child.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

// Opens a connection and sends a POST's head, declaring `length` bytes of
// body, and `sent` of them.
async function startUpload(port: number, path: string, length: number, sent: string) {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(enc.encode(
    `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-ndjson\r\n` +
      `content-length: ${length}\r\n\r\n${sent}`,
  ));
  return conn;
}

// Reads one HTTP response (status and body, by its content-length) from `conn`.
async function readResponse(conn: Deno.Conn): Promise<{ status: number; body: string }> {
  let got = new Uint8Array(0);
  const buf = new Uint8Array(16 * 1024);
  while (true) {
    const text = dec.decode(got);
    const end = text.indexOf("\r\n\r\n");
    if (end !== -1) {
      const length = Number(/content-length: *(\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
      if (got.length >= end + 4 + length) {
        return {
          status: Number(text.slice(9, 12)),
          body: text.slice(end + 4, end + 4 + length),
        };
      }
    }
    const n = await conn.read(buf);
    if (n === null) throw new Error(`connection closed after ${JSON.stringify(text)}`);
    const more = new Uint8Array(got.length + n);
    more.set(got);
    more.set(buf.subarray(0, n), got.length);
    got = more;
  }
}

async function metric(http: string, prefix: string): Promise<number | null> {
  const text = await (await fetch(`${http}/_/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(prefix));
  return line === undefined ? null : Number(line.split(" ").at(-1));
}

Deno.test("publish: idle uploads declaring 16 MiB each hold nothing; a POST to another stream is answered", async () => {
  const s = await startPublishServer([], false, async (root) => {
    await Deno.writeTextFile(`${root}/u.schema.json`, JSON.stringify(SCHEMA));
    return ["--stream", `u=${root}/u.schema.json`, "--publish", "u"];
  });
  const idle: Deno.Conn[] = [];
  try {
    // Four uploads declaring the largest body (16 MiB; 64 MiB together, the
    // server's whole publish budget), each sending a few bytes and then nothing.
    for (let i = 0; i < 4; i++) {
      idle.push(await startUpload(s.port, "/t", 16 << 20, '{"sym":"a",'));
    }
    await until(
      async () => (await metric(s.http, "streamcast_publish_held_bytes")) === 4 * 11,
      10_000,
      "the uploads' bytes held",
    );
    // Bounded only to turn a hang into a failure: it is answered at once.
    const res = await withTimeout(
      fetch(`${s.http}/u`, { method: "POST", body: '{"sym":"b","px":1}\n' }),
      10_000,
      "a POST to u while four uploads to t are idle",
    );
    assertEquals([res.status, await res.json()], [200, { first: 1, last: 1, count: 1 }]);
  } finally {
    for (const c of idle) c.close();
    await s.stop();
  }
});

Deno.test("publish: a body that stalls is cut with 408 body_timeout, and what it held is freed", async () => {
  const s = await startPublishServer([
    "--publish-body-timeout",
    "0.5",
    "--max-publish-server-bytes",
    "1000",
  ]);
  let conn: Deno.Conn | null = null;
  try {
    const part = '{"sym":"' + "x".repeat(880) + '",'; // 890 bytes of a 2000-byte body
    conn = await startUpload(s.port, "/t", 2000, part);
    const answer = await withTimeout(readResponse(conn), 20_000, "the stalled body's answer");
    assertEquals(answer.status, 408);
    const body = JSON.parse(answer.body);
    assertEquals(body.error, "body_timeout");
    assert(/no byte of the body arrived for 0\.5 s/.test(body.detail), body.detail);
    assertEquals(await metric(s.http, "streamcast_publish_held_bytes"), 0);
    assertEquals(
      await metric(s.http, 'streamcast_publish_refusals_total{reason="body_timeout",stream="t"}'),
      1,
    );
    // Nothing of it was stored; the next body is read and stored.
    const res = await fetch(`${s.http}/t`, { method: "POST", body: '{"sym":"b","px":1}\n' });
    assertEquals([res.status, await res.json()], [200, { first: 1, last: 1, count: 1 }]);
  } finally {
    conn?.close();
    await s.stop();
  }
});
