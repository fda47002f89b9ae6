import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { connect, type Cursor, MemoryCursor, NotReplayable } from "../../client/mod.ts";
import { FileCursor } from "../../client/file_cursor.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import { fixture } from "../harness/client_server.ts";

/** Offsets a fresh subscription with `cursor` yields first (then closes it without handling them). */
async function firstOffsets(url: string, cursor: MemoryCursor, n: number): Promise<number[]> {
  const sub = await connect(url, { offset: 1, cursor });
  const out: number[] = [];
  while (out.length < n) out.push((await sub.next()).value![0]!);
  await sub.close();
  return out;
}

Deno.test("cursor: break saves the row the loop was on, which is re-delivered on resume", async () => {
  const f = await fixture();
  try {
    await f.send(1, 20);
    const cursor = new MemoryCursor();
    const sub = await connect(f.url, { offset: 1, cursor });
    // With no saved cursor, the start position is saved at connect.
    assertEquals(cursor.value, { offset: 1, streamId: f.stream.streamId });
    for await (const [offset] of sub) {
      if (offset === 7) break;
    }
    assertEquals(cursor.value, { offset: 7, streamId: f.stream.streamId });
    assertEquals(f.stream.subscribers, 0, "break closed the subscription");
    // The saved cursor wins over offset: 1.
    assertEquals(await firstOffsets(f.url, cursor, 3), [7, 8, 9]);
    // Asking for 8 and 9 handled 7 and 8; 9 was current when closed.
    assertEquals(cursor.value?.offset, 9);
  } finally {
    await f.stop();
  }
});

Deno.test("cursor: an exception in the loop re-delivers the current row", async () => {
  const f = await fixture();
  try {
    await f.send(1, 20);
    const cursor = new MemoryCursor();
    const sub = await connect(f.url, { offset: 1, cursor });
    const seen: number[] = [];
    await assertRejects(
      async () => {
        for await (const [offset] of sub) {
          if (offset === 12) throw new Error("handler failed on 12");
          seen.push(offset!);
        }
      },
      Error,
      "handler failed on 12",
    );
    assertEquals(seen.at(-1), 11);
    assertEquals(cursor.value?.offset, 12, "row 12 was not handled");
    assertEquals(await firstOffsets(f.url, cursor, 1), [12]);
  } finally {
    await f.stop();
  }
});

Deno.test("cursor: commit() marks the current row handled and saves at once", async () => {
  const f = await fixture();
  try {
    await f.send(1, 10);
    const cursor = new MemoryCursor();
    const sub = await connect(f.url, { offset: 1, cursor, saveEveryMs: 60_000 });
    const saves = cursor.saves;
    for await (const [offset] of sub) {
      if (offset === 5) {
        await sub.commit();
        assertEquals(cursor.value?.offset, 6);
        assertEquals(cursor.saves, saves + 1);
        break;
      }
    }
    // The break found nothing new to save.
    assertEquals(cursor.saves, saves + 1);
    assertEquals(await firstOffsets(f.url, cursor, 1), [6]);
  } finally {
    await f.stop();
  }
});

Deno.test("cursor: saves every saveEveryRows handled rows while the loop runs", async () => {
  const f = await fixture();
  try {
    await f.send(1, 40);
    const cursor = new MemoryCursor();
    const sub = await connect(f.url, { offset: 1, cursor, saveEveryRows: 10, saveEveryMs: 60_000 });
    const seen: (number | undefined)[] = [];
    for (let i = 1; i <= 36; i++) {
      const r = await sub.next();
      assertEquals(r.value?.[0], i);
      seen.push(cursor.value?.offset);
    }
    // Row k is handled when row k+1 is asked for; a save every 10 handled rows.
    assertEquals(seen[10], 11);
    assertEquals(seen[19], 11);
    assertEquals(seen[20], 21);
    assertEquals(seen[30], 31);
    assertEquals(seen[35], 31);
    await sub.close();
    // close() saves what was handled: rows 1..35 (36 is the current row).
    assertEquals(cursor.value?.offset, 36);
  } finally {
    await f.stop();
  }
});

Deno.test("cursor: saves within saveEveryMs while the loop waits on a quiet stream", async () => {
  const f = await fixture();
  try {
    await f.send(1, 3);
    const cursor = new MemoryCursor();
    const sub = await connect(f.url, { offset: 1, cursor, saveEveryMs: 50 });
    for (let i = 0; i < 3; i++) await sub.next();
    const waiting = sub.next(); // row 3 is handled now; nothing more comes for a while
    await until(() => cursor.value?.offset === 4, 2000, "a timed save");
    await f.send(4, 4);
    assertEquals((await waiting).value?.[0], 4);
    await sub.close();
  } finally {
    await f.stop();
  }
});

Deno.test("cursor: beforeSave runs before each save, and its failure cancels the save", async () => {
  const f = await fixture();
  try {
    await f.send(1, 10);
    const cursor = new MemoryCursor();
    const order: string[] = [];
    let fail = false;
    const sub = await connect(f.url, {
      offset: 1,
      cursor,
      saveEveryRows: 3,
      saveEveryMs: 60_000,
      beforeSave: () => {
        order.push(`flush@${cursor.saves}`);
        if (fail) throw new Error("stdout is gone");
      },
    });
    for (let i = 0; i < 4; i++) await sub.next();
    assertEquals(order, ["flush@0", "flush@1"]);
    assertEquals(cursor.value?.offset, 4);
    fail = true;
    for (let i = 0; i < 2; i++) await sub.next();
    await assertRejects(() => sub.next(), Error, "stdout is gone");
    assertEquals(cursor.value?.offset, 4, "the failed save did not move the cursor");
    assertEquals(f.stream.subscribers, 0);
  } finally {
    await f.stop();
  }
});

Deno.test("cursor: a cursor on an ephemeral stream is refused at connect", async () => {
  const f = await fixture({ ephemeral: true });
  try {
    const err = await assertRejects(
      () => connect(f.url, { cursor: new MemoryCursor() }),
      NotReplayable,
    );
    assertEquals(err.why, "not_durable");
    assertEquals(f.stream.subscribers, 0);
  } finally {
    await f.stop();
  }
});

Deno.test("cursor: a cursor from a wiped and recreated log is refused as other_stream", async () => {
  const f = await fixture();
  try {
    await f.send(1, 5);
    const cursor = new MemoryCursor();
    const sub = await connect(f.url, { offset: 1, cursor });
    for (let i = 0; i < 4; i++) await sub.next();
    await sub.close();
    const old = cursor.value!;
    assertEquals(old.offset, 4);
    await f.restart({ wipe: true });
    await f.send(1, 5);
    assert(f.stream.streamId !== old.streamId);
    const err = await assertRejects(() => connect(f.url, { cursor }), NotReplayable);
    assertEquals(err.why, "other_stream");
    assert(err.message.includes(old.streamId!), err.message);
    assertEquals(cursor.value, old, "a refusal does not touch the cursor");
  } finally {
    await f.stop();
  }
});

Deno.test("FileCursor saves atomically and loads what it saved", async () => {
  const dir = await tempDir();
  try {
    const path = `${dir}/c.cursor`;
    const fc = new FileCursor(path);
    assertEquals(await fc.load(), null);
    const id = "0123456789abcdef".repeat(2);
    // Concurrent saves land in call order and leave no temp file behind.
    await Promise.all([1, 2, 3, 4, 5].map((o) => fc.save({ offset: o, streamId: id })));
    assertEquals(await fc.load(), { offset: 5, streamId: id });
    const text = await Deno.readTextFile(path);
    assertEquals(JSON.parse(text).offset, 5);
    assert(text.endsWith("}\n"));
    const names = [];
    for await (const e of Deno.readDir(dir)) names.push(e.name);
    assertEquals(names, ["c.cursor"]);
    await Deno.writeTextFile(path, "{not json");
    await assertRejects(() => fc.load(), TypeError, "c.cursor is not JSON");
    await Deno.writeTextFile(path, '{"offset":-3}');
    await assertRejects(() => fc.load(), TypeError, "offset: integer >= 0");
    await assertRejects(() => fc.save({ offset: 1.5 } as Cursor), TypeError);
    await assertRejects(
      () => new FileCursor(`${dir}/no/such/dir/c`).save({ offset: 1, streamId: null }),
      Deno.errors.NotFound,
    );
  } finally {
    await rmrf(dir);
  }
});

Deno.test("FileCursor resumes a subscription where the last one stopped", async () => {
  const f = await fixture();
  const dir = await tempDir();
  try {
    await f.send(1, 30);
    const path = `${dir}/trades.cursor`;
    const sub = await connect(f.url, { offset: 1, cursor: new FileCursor(path) });
    for await (const [offset] of sub) if (offset === 17) break;
    assertEquals(JSON.parse(await Deno.readTextFile(path)).offset, 17);
    assertEquals(JSON.parse(await Deno.readTextFile(path)).stream_id, f.stream.streamId);
    const again = await connect(f.url, { offset: 1, cursor: new FileCursor(path) });
    assertEquals((await again.next()).value?.[0], 17);
    await again.close();
  } finally {
    await rmrf(dir);
    await f.stop();
  }
});
