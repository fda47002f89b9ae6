// One test per defect class of issue 14: verify and open agree on damaged
// records, and damage to the metadata files is named as such.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { join } from "node:path";
import { Log, LogCorruptError, MANIFEST_FILE, verifyLog } from "../../log/mod.ts";
import { META_FILE } from "../../log/log_meta.ts";
import {
  encodeCheckedJson,
  readCheckedText,
  SIDECAR_SUFFIX,
  writeCheckedText,
} from "../../log/disk/meta_file.ts";
import { Stream } from "../../mod.ts";
import { recordSpans } from "../harness/mutate.ts";
import { rmrf, tempDir, utf8 } from "../harness/util.ts";

const row = (i: number): Uint8Array => utf8(`{"i":${i},"pad":"${"x".repeat(40)}"}`);

async function writeLog(dir: string, rows: number, options = {}): Promise<void> {
  const log = await Log.open(dir, { timers: false, ...options });
  for (let i = 1; i <= rows; i++) await log.append(row(i));
  await log.close();
}

async function readAllRows(log: Log): Promise<number> {
  const r = log.reader(1);
  let n = 0;
  while (true) {
    const b = await r.read();
    if (b.count === 0) break;
    n += b.count;
  }
  r.close();
  return n;
}

/** Swaps bytes `a` and `b` of a file. */
async function swapBytes(path: string, a: number, b: number): Promise<void> {
  const bytes = await Deno.readFile(path);
  [bytes[a], bytes[b]] = [bytes[b], bytes[a]];
  await Deno.writeFile(path, bytes);
}

for (const length of [2037938552, 0x0100_0001]) {
  Deno.test(`log and verify both refuse a record length of ${length} with valid records after it`, async () => {
    const dir = await tempDir();
    try {
      await writeLog(dir, 20);
      const seg = join(dir, "00000000000000000001.seg");
      const bytes = await Deno.readFile(seg);
      const spans = recordSpans(bytes, 1 << 20);
      const at = spans[5].start;
      new DataView(bytes.buffer).setUint32(at + 16, length);
      await Deno.writeFile(seg, bytes);
      const report = await verifyLog(dir);
      assert(report.error instanceof LogCorruptError, "verify passed the damaged segment");
      assertEquals(report.error.path, seg);
      assertEquals(report.error.position, at);
      assert(report.error.message.includes("valid records follow"), report.error.message);
      const err = await assertRejects(() => Log.open(dir, { timers: false }), LogCorruptError);
      assertEquals(err.path, seg);
      assertEquals(err.position, at);
      assert(err.message.includes("valid records follow"), err.message);
    } finally {
      await rmrf(dir);
    }
  });
}

Deno.test("a torn last record is cut by open and reported as an unfinished tail by verify", async () => {
  const dir = await tempDir();
  try {
    await writeLog(dir, 20);
    const seg = join(dir, "00000000000000000001.seg");
    const bytes = await Deno.readFile(seg);
    await Deno.writeFile(seg, bytes.subarray(0, bytes.length - 7));
    const report = await verifyLog(dir);
    assertEquals(report.error, null);
    assertEquals(report.segments[0].rows, 19);
    assert(report.segments[0].tailBytes > 0);
    const log = await Log.open(dir, { timers: false });
    assertEquals(log.endOffset, 20);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

/** A log whose sealed history is in chunks: its manifest lists them. */
async function chunkedLog(dir: string): Promise<void> {
  const log = await Log.open(dir, { timers: false, chunks: { fanIn: 1000 } });
  for (let k = 0; k < 3; k++) {
    for (let i = 0; i < 5; i++) await log.append(row(k * 5 + i + 1));
    await log.roll();
  }
  await log.chunks.settled();
  await log.close();
}

Deno.test("a byte swap inside manifest.json is a LogCorruptError naming it, at open and in verify", async () => {
  const dir = await tempDir();
  try {
    await chunkedLog(dir);
    const path = join(dir, MANIFEST_FILE);
    const text = await Deno.readTextFile(path);
    // Two different hex digits of the first chunk's name: the file still
    // parses and looks like a manifest, and names a chunk that does not exist.
    const at = text.indexOf(`"sha256":"`) + 10;
    let b = at + 1;
    while (text[b] === text[at]) b++;
    await swapBytes(path, at, b);
    const err = await assertRejects(() => Log.open(dir, { timers: false }), LogCorruptError);
    assertEquals(err.path, path);
    assert(err.message.includes("checksum mismatch"), err.message);
    const report = await verifyLog(dir);
    assert(report.error instanceof LogCorruptError);
    assertEquals(report.error.path, path);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("damage to log.json's stream id is blamed on log.json, not on the intact segment", async () => {
  const dir = await tempDir();
  try {
    await writeLog(dir, 5);
    const path = join(dir, META_FILE);
    const text = await Deno.readTextFile(path);
    const meta = JSON.parse(text);
    const id: string = meta.stream_id;
    const flipped = id[3] === "a" ? "b" : "a";
    const damaged = { ...meta, stream_id: id.slice(0, 3) + flipped + id.slice(4) };
    // With its checksum: the checksum names log.json.
    await Deno.writeTextFile(path, text.replace(id, damaged.stream_id));
    let err = await assertRejects(() => Log.open(dir, { timers: false }), LogCorruptError);
    assertEquals(err.path, path);
    let report = await verifyLog(dir);
    assertEquals(report.error?.path, path);
    // An old log.json (no checksum): the segment's header, whose checksum is
    // good, outvotes it.
    delete damaged.crc32;
    await Deno.writeTextFile(path, JSON.stringify(damaged) + "\n");
    err = await assertRejects(() => Log.open(dir, { timers: false }), LogCorruptError);
    assertEquals(err.path, path);
    assert(err.message.includes("believed damaged"), err.message);
    report = await verifyLog(dir);
    assertEquals(report.error?.path, path);
    assert(report.error!.message.includes("believed damaged"), report.error!.message);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("a segment of another log is blamed on the segment when log.json's checksum is good", async () => {
  const dir = await tempDir();
  const other = await tempDir();
  try {
    const mine = await Log.open(dir, { timers: false });
    for (let i = 1; i <= 5; i++) await mine.append(row(i));
    await mine.roll();
    await mine.close();
    // Sealed 1..5, and in place of the empty active segment one of another log.
    await Deno.remove(join(dir, "00000000000000000006.seg"));
    const log = await Log.open(other, { timers: false, firstOffset: 100 });
    await log.append(row(1));
    await log.close();
    await Deno.copyFile(
      join(other, "00000000000000000100.seg"),
      join(dir, "00000000000000000100.seg"),
    );
    const err = await assertRejects(() => Log.open(dir, { timers: false }), LogCorruptError);
    assertEquals(err.path.endsWith(".seg"), true, err.message);
    assert(err.message.includes("another log"), err.message);
  } finally {
    await rmrf(dir);
    await rmrf(other);
  }
});

Deno.test("old log.json and manifest.json without checksums still open, and verify passes them", async () => {
  const dir = await tempDir();
  try {
    await chunkedLog(dir);
    for (const name of [META_FILE, MANIFEST_FILE]) {
      const body = JSON.parse(await Deno.readTextFile(join(dir, name)));
      assert(typeof body.crc32 === "string", `${name} carries a checksum`);
      delete body.crc32;
      await Deno.writeTextFile(join(dir, name), JSON.stringify(body) + "\n");
    }
    assertEquals((await verifyLog(dir)).error, null);
    const log = await Log.open(dir, { timers: false });
    assertEquals(await readAllRows(log), 15);
    await log.close();
    // An unchecked file with a member no old file had is damage (a damaged
    // checksum member's name must not pass for an old file).
    const body = JSON.parse(await Deno.readTextFile(join(dir, MANIFEST_FILE)));
    delete body.crc32;
    await Deno.writeTextFile(
      join(dir, MANIFEST_FILE),
      JSON.stringify({ ...body, crc3z: "00000000" }) + "\n",
    );
    const err = await assertRejects(() => Log.open(dir, { timers: false }), LogCorruptError);
    assertEquals(err.path, join(dir, MANIFEST_FILE));
  } finally {
    await rmrf(dir);
  }
});

Deno.test("checked JSON: the checksum covers the canonical body", () => {
  const text = encodeCheckedJson({ b: 1, a: [1, 2] });
  assert(/^\{"b":1,"a":\[1,2\],"crc32":"[0-9a-f]{8}"\}\n$/.test(text), text);
  assertEquals(encodeCheckedJson(JSON.parse(text)), text, "a read body writes back the same");
});

const SCHEMA = { type: "object", properties: { x: { type: "number" } }, required: ["x"] };

Deno.test("schema.json keeps its checksum beside it; damage is named at open and in verify", async () => {
  const root = await tempDir();
  try {
    const s = await Stream.open("t", { schema: SCHEMA, root });
    await s.send({ x: 1 });
    await s.close();
    const path = join(root, "t", "schema.json");
    assertEquals(JSON.parse(await Deno.readTextFile(path)), SCHEMA, "the file is the bare schema");
    assertEquals((await readCheckedText(path))?.checked, true);
    const text = await Deno.readTextFile(path);
    await Deno.writeTextFile(path, text.replace('"x"', '"y"').replace('"x"', '"y"'));
    const report = await verifyLog(join(root, "t"));
    assertEquals(report.error?.path, path);
    const err = await assertRejects(
      () => Stream.open("t", { schema: SCHEMA, root }),
      LogCorruptError,
    );
    assertEquals(err.path, path);
    // An old schema.json (no sidecar) still opens.
    await Deno.remove(path + SIDECAR_SUFFIX);
    await Deno.writeTextFile(path, text);
    const again = await Stream.open("t", { schema: SCHEMA, root });
    await again.close();
    assertEquals((await readCheckedText(path))?.checked, true, "rewritten with its checksum");
  } finally {
    await rmrf(root);
  }
});

Deno.test("rewriting a sidecar-checked file is crash-safe between its steps", async () => {
  const dir = await tempDir();
  try {
    const path = join(dir, "schema.json");
    await writeCheckedText(path, "old\n");
    // The first step of a rewrite lists both sums; a crash right after it
    // leaves the old text, which still reads as intact.
    const side = await Deno.readTextFile(path + SIDECAR_SUFFIX);
    await writeCheckedText(path, "new\n");
    const newSide = JSON.parse(await Deno.readTextFile(path + SIDECAR_SUFFIX));
    const oldSide = JSON.parse(side);
    await Deno.writeTextFile(
      path + SIDECAR_SUFFIX,
      encodeCheckedJson({ file: "schema.json", sums: [...newSide.sums, ...oldSide.sums] }),
    );
    await Deno.writeTextFile(path, "old\n");
    assertEquals((await readCheckedText(path))?.text, "old\n");
    await Deno.writeTextFile(path, "new\n");
    assertEquals((await readCheckedText(path))?.text, "new\n");
    await Deno.writeTextFile(path, "neu\n");
    await assertRejects(() => readCheckedText(path), LogCorruptError);
  } finally {
    await rmrf(dir);
  }
});
