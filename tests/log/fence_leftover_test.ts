// An empty, unsealed segment that is not the last one is what a fence leaves
// behind when the process dies between making the fenced segment and removing
// the old one: recovery removes it. A sealed segment cut down to its header
// looks the same on disk; it used to be removed silently too (its rows lost
// without a word). log.json now records the fences' leftovers.
import { assertEquals, assertRejects } from "../harness/assert.ts";
import { Log, LogCorruptError } from "../../log/mod.ts";
import { rmrf, tempDir, utf8 } from "../harness/util.ts";

const HEADER_BYTES = 128;

Deno.test("recovery removes a fence's leftover segment, and refuses a sealed segment cut to its header", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    await log.appendMany([1, 2, 3].map((i) => utf8(`{"i":${i}}`)));
    await log.roll(); // sealed 1..3; the active (empty) segment starts at 4
    const empty = log.segments().at(-1)!;
    assertEquals(empty.firstOffset, 4);
    const header = await Deno.readFile(empty.path);
    assertEquals(header.length, HEADER_BYTES);
    await log.fence(1000);
    await log.append(utf8('{"i":1000}'));
    await log.close();
    // A crash between making the fenced segment and removing the old one.
    await Deno.writeFile(empty.path, header);
    const again = await Log.open(dir, { timers: false });
    assertEquals(again.segments().map((s) => s.firstOffset), [1, 1000]);
    assertEquals(again.rowsBetween(1, again.endOffset), 4);
    const sealed = again.segments()[0].path;
    await again.close();

    // Now the sealed segment of 1..3 loses everything after its header.
    await Deno.truncate(sealed, HEADER_BYTES);
    const err = await assertRejects(() => Log.open(dir, { timers: false }), LogCorruptError);
    assertEquals(err.path, sealed);
  } finally {
    await rmrf(dir);
  }
});
