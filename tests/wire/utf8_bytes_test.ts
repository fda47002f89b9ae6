// utf8Bytes counts what TextEncoder makes of a string, for random strings of
// every kind of unit (ASCII, two- and three-byte, pairs, lone surrogates).
// Seeded: a fresh seed each run, printed, beside a fixed one.
import { assertEquals } from "../harness/assert.ts";
import { utf8Bytes } from "../../wire/utf8_bytes.ts";
import { rng } from "../harness/util.ts";

const encoder = new TextEncoder();
const UNITS = [
  0x41,
  0x7f,
  0x80,
  0xe9,
  0x7ff,
  0x800,
  0x20ac,
  0xfffd,
  0xffff,
  0xd83d,
  0xde00,
  0xdbff,
];

for (const seed of [20261206, Date.now() % 2 ** 31]) {
  Deno.test(`utf8Bytes is TextEncoder's length (seed ${seed})`, () => {
    console.log(`seed ${seed}`);
    const random = rng(seed);
    for (let k = 0; k < 2000; k++) {
      const units = Array.from(
        { length: Math.floor(random() * 12) },
        () => UNITS[Math.floor(random() * UNITS.length)],
      );
      const s = String.fromCharCode(...units);
      assertEquals(utf8Bytes(s), encoder.encode(s).length, JSON.stringify(units));
    }
    assertEquals(utf8Bytes(""), 0);
    assertEquals(utf8Bytes("😀".repeat(1000)), 4000);
  });
}
