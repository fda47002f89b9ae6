// The key file's format: written whole or in slices, the same bytes; read
// back equal; any damage, another log's file or another key refused naming
// what is wrong.
import { assertEquals, assertThrows } from "../../harness/assert.ts";
import {
  decodeKeyFile,
  encodeKeyFile,
  encodeKeyFileInSlices,
  KeyFileError,
} from "../../../server/stream/key_file.ts";

const ID = "0123456789abcdef0123456789abcdef";
const BODY = {
  streamId: ID,
  columns: ["sym"],
  end: 40_002,
  entries: Array.from({ length: 40_000 }, (_, i) => ({
    offset: i + 2,
    json: JSON.stringify({ sym: `k${i}`, note: 'a\nb"c' }),
  })),
};

Deno.test("key file: in slices or whole, the same bytes, read back equal", async () => {
  const whole = encodeKeyFile(BODY);
  assertEquals(await encodeKeyFileInSlices(BODY, () => Promise.resolve()), whole);
  assertEquals(decodeKeyFile(whole, ID, ["sym"]), BODY);
});

Deno.test("key file: damage, another log's or another key's file is refused", () => {
  const small = encodeKeyFile({ ...BODY, end: 12, entries: BODY.entries.slice(0, 10) });
  for (let at = 0; at < small.length; at += 7) {
    const bad = small.slice();
    bad[at] ^= 0x20;
    assertThrows(() => decodeKeyFile(bad, ID, ["sym"]), KeyFileError);
  }
  assertThrows(() => decodeKeyFile(small.subarray(0, small.length - 3), ID, ["sym"]), KeyFileError);
  assertThrows(() => decodeKeyFile(small, "f".repeat(32), ["sym"]), KeyFileError, "stream id");
  assertThrows(() => decodeKeyFile(small, ID, ["sym", "venue"]), KeyFileError, "its key is");
  assertThrows(() => decodeKeyFile(new Uint8Array(0), ID, ["sym"]), KeyFileError);
});
