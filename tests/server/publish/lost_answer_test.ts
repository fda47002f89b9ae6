// A frame whose answer is lost with the connection is reported as what the
// server answers when it is sent again — never taken for stored because the
// greeting's last_seq passed it. And a producer commits without holes: a
// frame sent after one that failed to be stored is refused, so last_seq
// never passes a seq that was not stored.
import { assert, assertEquals, assertRejects } from "../../harness/assert.ts";
import { until } from "../../harness/util.ts";
import { publisher, PublishError } from "../../../client/mod.ts";
import { REAL_IO } from "../../../log/disk/io.ts";
import type { LogIo } from "../../../log/mod.ts";
import { startFixture } from "../../harness/publish_in_process.ts";

// A TCP proxy whose answers (server → client) can be held back, then cut
// with every connection: what a dropped network does to answers in flight.
class Proxy {
  readonly port: number;
  hold = false;
  readonly #listener: Deno.Listener;
  readonly #conns = new Set<Deno.Conn>();
  readonly #done: Promise<void>;

  constructor(target: number) {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.#listener = listener;
    this.port = (listener.addr as Deno.NetAddr).port;
    this.#done = (async () => {
      for await (const client of listener) {
        const server = await Deno.connect({ hostname: "127.0.0.1", port: target });
        this.#conns.add(client).add(server);
        void this.#pipe(client, server, false);
        void this.#pipe(server, client, true);
      }
    })().catch(() => {});
  }

  async #pipe(from: Deno.Conn, to: Deno.Conn, answers: boolean): Promise<void> {
    const buf = new Uint8Array(64 * 1024);
    try {
      while (true) {
        const n = await from.read(buf);
        if (n === null) break;
        if (answers && this.hold) continue; // held back, then lost with the cut
        let done = 0;
        while (done < n) done += await to.write(buf.subarray(done, n));
      }
    } catch {
      // cut
    }
    this.#drop(from);
    this.#drop(to);
  }

  #drop(c: Deno.Conn): void {
    if (!this.#conns.delete(c)) return;
    try {
      c.close();
    } catch {
      // already closed
    }
  }

  /** Closes every connection (the answers held back are lost) and lets answers through again. */
  cut(): void {
    for (const c of [...this.#conns]) this.#drop(c);
    this.hold = false;
  }

  async close(): Promise<void> {
    this.cut();
    this.#listener.close();
    await this.#done;
  }
}

// The publish server of an older version: it stored seq 6 after seq 5
// failed, and the answers of both were lost. A resent 5 is answered
// stale_seq (last_seq 6), a resent 6 as a duplicate.
Deno.test("publisher: a frame whose answer was lost and that the server calls stale is reported answer_lost, never stored", async () => {
  let connections = 0;
  const frames: number[][] = [[], []];
  const ac = new AbortController();
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", signal: ac.signal, onListen: () => {} },
    (req) => {
      const { socket, response } = Deno.upgradeWebSocket(req);
      const n = connections++;
      socket.onopen = () =>
        socket.send(JSON.stringify({
          streamcast: 2,
          stream: "t",
          stream_id: "0".repeat(32),
          publish: true,
          producer: "p",
          last_seq: n === 0 ? 4 : 6,
          max_in_flight: 64,
        }));
      socket.onmessage = (e) => {
        const { seq } = JSON.parse(e.data);
        frames[n].push(seq);
        if (n === 0 && frames[0].length === 2) socket.close(1011, "gone"); // no answers
        if (n === 1 && seq === 5) {
          socket.send(JSON.stringify({ seq, error: "stale_seq", last_seq: 6 }));
        }
        if (n === 1 && seq === 6) {
          socket.send(JSON.stringify({ seq, first: 20, last: 20, duplicate: true }));
        }
      };
      return response;
    },
  );
  try {
    const pub = await publisher(`ws://127.0.0.1:${server.addr.port}/t`, {
      producer: "p",
      backoff: { minMs: 10, maxMs: 50 },
    });
    assertEquals(pub.nextSeq, 5);
    const five = pub.publish([{ v: 5 }]);
    const six = pub.publish([{ v: 6 }]);
    const err = await assertRejects(() => five, PublishError);
    assertEquals([err.error, err.seq, err.lastSeq], ["answer_lost", 5, 6]);
    assert(err.message.includes("stored unless the server refused it"), err.message);
    assertEquals(await six, { seq: 6, first: 20, last: 20, duplicate: true });
    // Both were sent again after the reconnect, and answered.
    assertEquals(frames, [[5, 6], [5, 6]]);
    await pub.close();
  } finally {
    ac.abort();
    await server.finished;
  }
});

// The real server: seq 5 fails to be stored (an I/O error), seq 6 comes
// after that failure; the answers of both are lost with the connection.
// Seq 6 was refused, so last_seq stays 4: both are sent again and stored.
Deno.test("publisher: seq 5 failed, seq 6 sent after it, answers lost: both are sent again, stored once, with offsets", async () => {
  let failNext = false;
  let failed = 0;
  const io: LogIo = {
    ...REAL_IO,
    write: (file, bytes) => {
      // Only a commit's rows (past the 128-byte header) hold the marker.
      if (failNext && new TextDecoder().decode(bytes).includes('"sym":"p5"')) {
        failNext = false;
        failed++;
        return Promise.reject(
          // An I/O error: the write failed (a full disk is answered disk_full instead).
          Object.assign(new Error("Input/output error (os error 5)"), { code: "EIO" }),
        );
      }
      return REAL_IO.write(file, bytes);
    },
  };
  const f = await startFixture({ logOptions: { io } });
  const proxy = new Proxy(Number(new URL(f.http).port));
  const refusals = async () => {
    const text = await (await fetch(`${f.http}/_/metrics`)).text();
    const m = /streamcast_publish_refusals_total\{[^}]*reason="write_failed"[^}]*\} (\d+)/.exec(
      text,
    );
    return Number(m?.[1] ?? 0);
  };
  try {
    const pub = await publisher(`ws://127.0.0.1:${proxy.port}/t`, {
      producer: "p",
      backoff: { minMs: 10, maxMs: 50 },
    });
    const row = (k: number) => ({ sym: `p${k}`, px: k });
    for (let k = 1; k <= 4; k++) assertEquals((await pub.publish([row(k)])).first, k);
    proxy.hold = true;
    failNext = true;
    const five = pub.publish([row(5)]);
    await until(async () => (await refusals()) === 1, 10_000, "seq 5 refused");
    assertEquals(failed, 1);
    const six = pub.publish([row(6)]);
    await until(async () => (await refusals()) === 2, 10_000, "seq 6 refused");
    assertEquals(f.stream.log!.producers.state("p")?.seq, 4);
    proxy.cut();
    const [a5, a6] = await Promise.all([five, six]);
    assertEquals([a5.seq, a5.first, a5.last], [5, 5, 5]);
    assertEquals([a6.seq, a6.first, a6.last], [6, 6, 6]);
    assertEquals(f.stream.log!.endOffset, 7);
    assertEquals(f.stream.log!.producers.state("p")?.seq, 6);
    await pub.close();
  } finally {
    await proxy.close();
    await f.close();
  }
});

// A frame that fails to be stored: the frames after it already sent are
// refused by the server, those not sent yet by the publisher, and the next
// publish takes the failed seq again.
Deno.test("publisher: after a write_failed answer, later frames are refused and the next publish reuses the seq", async () => {
  let failNext = false;
  const io: LogIo = {
    ...REAL_IO,
    write: (file, bytes) => {
      if (failNext && new TextDecoder().decode(bytes).includes('"sym":"p2"')) {
        failNext = false;
        return Promise.reject(
          // An I/O error: the write failed (a full disk is answered disk_full instead).
          Object.assign(new Error("Input/output error (os error 5)"), { code: "EIO" }),
        );
      }
      return REAL_IO.write(file, bytes);
    },
  };
  const f = await startFixture({ logOptions: { io } });
  try {
    const pub = await publisher(`${f.ws}/t`, { producer: "q", maxInFlight: 2 });
    const row = (k: number) => ({ sym: `p${k}`, px: k });
    assertEquals((await pub.publish([row(1)])).first, 1);
    failNext = true;
    const sent = [2, 3, 4, 5].map((k) => pub.publish([row(k)]));
    const errors = await Promise.all(sent.map((p) => p.then(() => null, (e) => e)));
    for (const e of errors) {
      assert(e instanceof PublishError && e.error === "write_failed", String(e));
    }
    assertEquals(errors.map((e) => e.seq), [2, 3, 4, 5]);
    assertEquals(pub.nextSeq, 2);
    const again = await pub.publish([row(2)]);
    assertEquals([again.seq, again.first], [2, 2]);
    assertEquals((await pub.publish([row(3)])).first, 3);
    assertEquals(f.stream.log!.producers.state("q")?.seq, 3);
    await pub.close();
  } finally {
    await f.close();
  }
});

// Over HTTP the same rule: a body of the producer after one that failed to
// be stored is refused (503) until the failed seq is sent again.
Deno.test("publish over HTTP: after seq 5 failed, seq 6 is refused until seq 5 is sent again", async () => {
  let failNext = true;
  const io: LogIo = {
    ...REAL_IO,
    write: (file, bytes) => {
      if (failNext && new TextDecoder().decode(bytes).includes('"sym":"p5"')) {
        failNext = false;
        return Promise.reject(
          // An I/O error: the write failed (a full disk is answered disk_full instead).
          Object.assign(new Error("Input/output error (os error 5)"), { code: "EIO" }),
        );
      }
      return REAL_IO.write(file, bytes);
    },
  };
  const f = await startFixture({ logOptions: { io } });
  try {
    const post = async (seq: number) => {
      const res = await fetch(`${f.http}/t`, {
        method: "POST",
        body: JSON.stringify({ sym: `p${seq}`, px: seq }),
        headers: { "streamcast-producer": "h", "streamcast-seq": String(seq) },
      });
      return { status: res.status, body: await res.json() };
    };
    assertEquals((await post(4)).status, 200);
    const five = await post(5);
    assertEquals([five.status, five.body.error], [503, "write_failed"]);
    const six = await post(6);
    assertEquals([six.status, six.body.error], [503, "write_failed"]);
    assert(
      six.body.detail.includes("seq 5 of producer h failed to be stored before it") &&
        six.body.detail.includes("send again from seq 5"),
      six.body.detail,
    );
    assertEquals(f.stream.log!.endOffset, 2);
    assertEquals((await post(5)).body, { first: 2, last: 2, count: 1 });
    assertEquals((await post(6)).body, { first: 3, last: 3, count: 1 });
  } finally {
    await f.close();
  }
});

// A server that refuses seq 1 (disk_full) and seq 2 behind it (write_failed),
// and answers seq 2's refusal only once the frame sent again at seq 1 has
// come; from then on it stores each seq once and answers a seq it holds as
// a duplicate, as the real one does. Seq 2's refusal belongs to seq 1's
// failure: the publisher must not take the seqs back to 2 again, or its
// next frame would reuse the seq of a frame already sent since, and be
// answered with that frame's offsets.
Deno.test("publisher: a refusal answered after frames sent since a failure takes no seq back", async () => {
  const got: number[] = [];
  const stored = new Map<number, number>();
  const ac = new AbortController();
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", signal: ac.signal, onListen: () => {} },
    (req) => {
      const { socket, response } = Deno.upgradeWebSocket(req);
      socket.onopen = () =>
        socket.send(JSON.stringify({
          streamcast: 2,
          stream: "t",
          stream_id: "0".repeat(32),
          publish: true,
          producer: "p",
          last_seq: 0,
          max_in_flight: 2,
        }));
      socket.onmessage = (e) => {
        const { seq } = JSON.parse(e.data);
        got.push(seq);
        const send = (a: unknown) => socket.send(JSON.stringify(a));
        if (got.length === 1) return send({ seq, error: "disk_full", detail: "full" });
        if (got.length === 2) return; // answered below
        if (got.length === 3) {
          send({ seq: 2, error: "write_failed", detail: "send again from seq 1" });
        }
        const first = stored.get(seq);
        if (first !== undefined) return send({ seq, first, last: first, duplicate: true });
        stored.set(seq, 10 + seq);
        send({ seq, first: 10 + seq, last: 10 + seq });
      };
      return response;
    },
  );
  try {
    // disk_full rejects at once here (no hold): the refusal is what is tested.
    const pub = await publisher(`ws://127.0.0.1:${server.addr.port}/t`, {
      producer: "p",
      diskFullTimeoutMs: 0,
    });
    const old = [1, 2, 3, 4].map((v) => pub.publish([{ v }]));
    const errors = old.map((p) => p.then(() => null, (e) => e.error));
    assertEquals(await errors[0], "disk_full");
    // Published as soon as seq 1 is refused, before seq 2's refusal is answered.
    assertEquals(pub.nextSeq, 1);
    const sent = [pub.publish([{ v: "a" }]), pub.publish([{ v: "b" }])];
    // 3 and 4 were never sent (the window holds 2): refused here.
    assertEquals(await Promise.all(errors), [
      "disk_full",
      "write_failed",
      "write_failed",
      "write_failed",
    ]);
    const answered = await Promise.all(sent);
    const c = await pub.publish([{ v: "c" }]);
    assertEquals(answered.map((x) => [x.seq, x.duplicate]), [[1, false], [2, false]]);
    assertEquals([c.seq, c.duplicate], [3, false]);
    assertEquals(got, [1, 2, 1, 2, 3]);
    await pub.close();
  } finally {
    ac.abort();
    await server.finished;
  }
});

// The connection drops after seq 1 was refused and sent again, before the
// refusals of seqs 2 and 3 (sent behind it) came. The next node never heard
// of seq 1's failure: 2 and 3 sent there would be stored ahead of seq 1.
// They fail instead; only the frame sent since is sent again.
Deno.test("publisher: frames sent behind a failure are not sent again after a reconnect", async () => {
  let connections = 0;
  const got: number[][] = [[], []];
  const ac = new AbortController();
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", signal: ac.signal, onListen: () => {} },
    (req) => {
      const { socket, response } = Deno.upgradeWebSocket(req);
      const n = connections++;
      socket.onopen = () =>
        socket.send(JSON.stringify({
          streamcast: 2,
          stream: "t",
          stream_id: "0".repeat(32),
          publish: true,
          producer: "p",
          last_seq: 0,
          max_in_flight: 8,
        }));
      socket.onmessage = (e) => {
        const { seq } = JSON.parse(e.data);
        got[n].push(seq);
        const send = (a: unknown) => socket.send(JSON.stringify(a));
        if (n === 0 && got[0].length === 1) send({ seq, error: "disk_full", detail: "full" });
        // Seq 1 sent again: the connection drops before any other answer.
        if (n === 0 && got[0].length === 4) socket.close(1011, "gone");
        if (n === 1) send({ seq, first: 10 + seq, last: 10 + seq });
      };
      return response;
    },
  );
  try {
    const pub = await publisher(`ws://127.0.0.1:${server.addr.port}/t`, {
      producer: "p",
      backoff: { minMs: 10, maxMs: 50 },
      // disk_full rejects at once here (no hold): the refusal is what is tested.
      diskFullTimeoutMs: 0,
    });
    const old = [1, 2, 3].map((v) => pub.publish([{ v }]));
    const errors = old.map((p) => p.then(() => null, (e) => e.error));
    assertEquals(await errors[0], "disk_full");
    const again = pub.publish([{ v: "a" }]);
    assertEquals(await Promise.all(errors), ["disk_full", "write_failed", "write_failed"]);
    assertEquals(await again, { seq: 1, first: 11, last: 11, duplicate: false });
    assertEquals(got, [[1, 2, 3, 1], [1]]);
    await pub.close();
  } finally {
    ac.abort();
    await server.finished;
  }
});
