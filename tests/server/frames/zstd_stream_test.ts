// compress=zstd-stream's two ends without a socket: the server's group
// context (server/frames/zstd_stream.ts, libzstd through FFI) and the client's
// decoder (client/_zstd_stream.ts, fzstd, node:zlib for whole frames), on
// trade rows; the `zstd` command decodes each frame's messages as an
// independent decoder.
import { assert, assertEquals, assertThrows } from "../../harness/assert.ts";
import {
  checkFrameBytes,
  COMPRESS_FRAME_BYTES,
  selfContainedFrame,
  ZSTD_STREAM_WINDOW_LOG,
  ZstdStream,
} from "../../../server/frames/zstd_stream.ts";
import { ZSTD_STREAM_MAX_WINDOW, ZstdStreamDecoder } from "../../../client/_zstd_stream.ts";
import { loadZstd } from "../../../client/_zstd.ts";
import { zstdCli } from "../../harness/zstd_cli.ts";
import {
  concatBytes,
  framesOf,
  groupOf,
  type Received,
  tradeCommits,
} from "../../harness/zstd_sequence.ts";
import { constants, createZstdCompress, zstdCompressSync } from "node:zlib";

const whole = await loadZstd();

/** Decodes a subscriber's messages in order with both decoders; both must give its texts. */
function assertDecodes(r: Received, label: string): void {
  for (const d of [new ZstdStreamDecoder(), new ZstdStreamDecoder({ whole })]) {
    r.messages.forEach((m, i) => {
      assertEquals(d.decode(m), r.texts[i], `${label}: message ${i}`);
    });
  }
}

async function assertCliDecodes(r: Received, label: string): Promise<void> {
  for (const [i, f] of framesOf(r).entries()) {
    assertEquals(await zstdCli(concatBytes(f.messages)), f.texts.join(""), `${label}: frame ${i}`);
  }
}

const isStart = (m: Uint8Array) => m[0] === 0x28 && m[1] === 0xb5 && m[2] === 0x2f && m[3] === 0xfd;

Deno.test("zstd stream: one trade row per commit decodes message by message, and frame by frame with zstd -d", async () => {
  const commits = tradeCommits(500, () => 1);
  const { member, frames } = groupOf(commits, { finishAt: new Set([commits.length - 1]) });
  assertEquals(frames, 1);
  assert(isStart(member.messages[0]));
  assert(
    member.messages.slice(1).every((m) => !isStart(m)),
    "only the first message has the magic",
  );
  assertDecodes(member, "one row per commit");
  await assertCliDecodes(member, "one row per commit");
  // The point of a shared window: a row costs a fraction of its text.
  const bytes = member.messages.reduce((n, m) => n + m.length, 0);
  const text = commits.reduce((n, t) => n + t.length, 0);
  assert(bytes * 2 < text, `${bytes} bytes of messages for ${text} of text`);
});

Deno.test("zstd stream: batches of rows per commit round-trip", async () => {
  const sizes = [1, 3, 10, 100, 4096];
  const commits = tradeCommits(12_000, (c) => sizes[c % sizes.length]);
  const { member } = groupOf(commits, { finishAt: new Set([commits.length - 1]) });
  assertDecodes(member, "batches");
  await assertCliDecodes(member, "batches");
});

Deno.test("zstd stream: a new frame starts after the frame size of text, ending the frame before it", async () => {
  const frameBytes = COMPRESS_FRAME_BYTES.min;
  const commits = tradeCommits(2_000, (c) => 1 + (c % 5));
  const { member, frames } = groupOf(commits, { frameBytes });
  const split = framesOf(member);
  assertEquals(split.length, frames);
  assert(frames > 10, `${frames} frames`);
  for (const [i, f] of split.entries()) {
    const sizes = f.texts.map((t) => new TextEncoder().encode(t).length);
    const total = sizes.reduce((a, b) => a + b, 0);
    if (i < split.length - 1) {
      // Ended by the commit that reached the size: it was below before it.
      assert(total >= frameBytes, `frame ${i}: ${total} bytes`);
      assert(total - sizes[sizes.length - 1] < frameBytes, `frame ${i} ran past its size`);
    }
  }
  assertDecodes(member, "rollover");
  // Every frame but the open last one is whole for zstd -d.
  await assertCliDecodes({
    messages: split.slice(0, -1).flatMap((f) => f.messages),
    texts: split.slice(0, -1).flatMap((f) => f.texts),
  }, "rollover");
});

Deno.test("zstd stream: a joiner mid-frame decodes self-contained frames, then the group's shared messages from its next frame", async () => {
  const commits = tradeCommits(1_500, (c) => 1 + (c % 3));
  const { member, joiner } = groupOf(commits, { frameBytes: 8192, joinAt: 137 });
  const firstShared = joiner.messages.findIndex((m) => member.messages.includes(m));
  assert(firstShared > 0, "the joiner got self-contained frames first");
  assert(isStart(joiner.messages[firstShared]), "it switched at a frame's first message");
  // The same Uint8Array as the member's from there on: nothing made for the joiner.
  const offset = member.messages.indexOf(joiner.messages[firstShared]);
  for (let i = firstShared; i < joiner.messages.length; i++) {
    assert(joiner.messages[i] === member.messages[offset + i - firstShared]);
  }
  // Before the switch, every message is a whole frame.
  for (const m of joiner.messages.slice(0, firstShared)) {
    assertEquals(await zstdCli(m), joiner.texts[joiner.messages.indexOf(m)]);
  }
  assertDecodes(joiner, "joiner");
  assertDecodes(member, "member");
});

Deno.test("zstd stream: finishFrame makes the next commit end the frame and the one after start one", () => {
  const commits = tradeCommits(40, () => 1);
  const { member, frames } = groupOf(commits, { finishAt: new Set([10, 25]) });
  assertEquals(frames, 3);
  assertEquals(member.messages.map((m, i) => isStart(m) ? i : -1).filter((i) => i >= 0), [
    0,
    11,
    26,
  ]);
  assertDecodes(member, "finishFrame");
});

Deno.test("zstd stream: frames declare a 64 KiB window, within what the decoder accepts; a context holds under 1 MB", () => {
  const group = ZstdStream.create()!;
  try {
    const m = group.compressCommit(tradeCommits(1, () => 1)[0]);
    // Frame header: magic, descriptor (no single segment, no size, no dictionary), window byte.
    assertEquals(m[4] & 0b1110_0011, 0);
    const wd = m[5];
    const window = 2 ** (10 + (wd >> 3)) * (1 + (wd & 7) / 8);
    assertEquals(window, 2 ** ZSTD_STREAM_WINDOW_LOG);
    assert(window <= ZSTD_STREAM_MAX_WINDOW);
    const mem = group.memoryBytes;
    console.log(`zstd stream context: ${mem} bytes (ZSTD_sizeof_CCtx)`);
    assert(mem > 64 * 1024 && mem < 1024 * 1024, `${mem} bytes`);
  } finally {
    group.close();
  }
  // A self-contained frame larger than the window declares the window, not its size.
  const big = tradeCommits(3_000, () => 3_000)[0];
  const z = selfContainedFrame(big);
  assertEquals((z[4] >> 5) & 1, 0, "not single-segment");
  assertEquals(new ZstdStreamDecoder({ whole }).decode(z), big);
});

Deno.test("zstd stream: tiny commits (a frame's first bytes under 18) and multi-byte UTF-8 round-trip", async () => {
  const commits = ["[1,{}]", "[2,{}]", "[3,{}]", '[4,{"s":"é€😀"}]', "[5,1]", "[6,{}]\n[7,{}]"];
  const { member } = groupOf(commits, { finishAt: new Set([commits.length - 1]) });
  assert(member.messages[0].length < 18, `first message ${member.messages[0].length} bytes`);
  assertDecodes(member, "tiny");
  await assertCliDecodes(member, "tiny");
  // A frame of tiny commits only, ended while still under 18 bytes.
  const two = groupOf(["[1,{}]", "[2,1]"], { finishAt: new Set([1]) });
  assertDecodes(two.member, "two tiny");
});

Deno.test("zstd stream: the frame size is checked against its bounds", () => {
  assertEquals(checkFrameBytes(COMPRESS_FRAME_BYTES.min), COMPRESS_FRAME_BYTES.min);
  assertEquals(checkFrameBytes(COMPRESS_FRAME_BYTES.max), COMPRESS_FRAME_BYTES.max);
  for (const bad of [COMPRESS_FRAME_BYTES.min - 1, COMPRESS_FRAME_BYTES.max + 1, 5000.5, NaN]) {
    assertThrows(() => ZstdStream.create({ frameBytes: bad }), RangeError, `got ${bad}`);
  }
  const group = ZstdStream.create()!;
  assertThrows(() => group.compressCommit(""), TypeError, "empty");
  group.close();
  assertThrows(() => group.compressCommit("[1,{}]"), Error, "closed");
});

Deno.test("zstd stream decoder refuses what a zstd-stream server never sends, naming it", async () => {
  const commits = tradeCommits(20, () => 1);
  const { member } = groupOf(commits);
  const refuse = (messages: Uint8Array[], includes: string) => {
    const d = new ZstdStreamDecoder({ whole });
    assertThrows(() => messages.forEach((m) => d.decode(m)), Error, includes);
    assertEquals(d.inFrame, false, "no frame stays open after a refusal");
  };
  refuse([member.messages[1]], "none is open");
  refuse(
    [member.messages[0], member.messages[2].subarray(0, member.messages[2].length - 1)],
    "ends inside a block",
  );
  refuse([member.messages[0].subarray(0, 5)], "too short");
  // A window over 1 MiB: a streaming frame of 2 MiB windows.
  const big = createZstdCompress({ params: { [constants.ZSTD_c_windowLog]: 21 } });
  const out: Uint8Array[] = [];
  big.on("data", (b: Uint8Array) => out.push(b));
  big.write(new TextEncoder().encode(commits[0]));
  await new Promise<void>((done) => big.flush(constants.ZSTD_e_flush, () => done()));
  big.close();
  refuse([out[0]], "window of 2097152 bytes, over the limit of 1048576");
  // A frame header naming a dictionary (id 1, one byte).
  const dict = zstdCompressSync(new TextEncoder().encode(commits[0]));
  const named = new Uint8Array(dict.length + 1);
  named.set(dict.subarray(0, 5));
  named[4] |= 1;
  named[5] = 1;
  named.set(dict.subarray(5), 6);
  refuse([named], "names a dictionary");
  // A whole frame followed by more bytes.
  const z = selfContainedFrame(commits[0]);
  refuse([concatBytes([z, z])], "bytes follow the end of the zstd frame");
  // After the frame's end, a continuation has no frame to continue.
  refuse([z, member.messages[1]], "none is open");
});
