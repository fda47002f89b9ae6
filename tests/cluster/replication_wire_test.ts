// The replication wire: commits round-trip exactly (bytes, times, records),
// and every malformed message is refused with a reason, never taken in part.
import { assert, assertEquals, assertThrows } from "../harness/assert.ts";
import { rng, utf8 } from "../harness/util.ts";
import {
  commitEnd,
  decodeCommit,
  encodeCommit,
  parseControl,
  ReplicationWireError,
  type WireCommit,
} from "../../cluster/replication_wire.ts";

function sample(): WireCommit {
  return {
    term: 7,
    first: 2 ** 40,
    runs: [
      { timeUs: 1_700_000_000_000_001, payloads: [utf8('{"a":1}'), utf8('{"é":"ü"}')] },
      { timeUs: 1_700_000_000_000_002, payloads: [utf8("{}")] },
    ],
    records: [
      { producer: "prod-ü", seq: 2 ** 50, first: 2 ** 40, last: 2 ** 40 + 1 },
      { producer: "p2", seq: 3, first: 2 ** 40 + 2, last: 2 ** 40 + 2 },
    ],
  };
}

Deno.test("replication wire: a commit round-trips byte for byte", () => {
  const c = sample();
  const back = decodeCommit(encodeCommit(c));
  assertEquals(back.term, c.term);
  assertEquals(back.first, c.first);
  assertEquals(back.records, c.records);
  assertEquals(back.runs.map((r) => r.timeUs), c.runs.map((r) => r.timeUs));
  assertEquals(
    back.runs.map((r) => r.payloads.map((p) => [...(p as Uint8Array)])),
    c.runs.map((r) => r.payloads.map((p) => [...(p as Uint8Array)])),
  );
  assertEquals(commitEnd(back), 2 ** 40 + 3);
});

Deno.test("replication wire: every cut of a commit, and every flipped head byte, is refused or read whole", () => {
  const bytes = encodeCommit(sample());
  for (let n = 0; n < bytes.length; n++) {
    assertThrows(() => decodeCommit(bytes.subarray(0, n)), ReplicationWireError);
  }
  const seed = Date.now() >>> 0;
  console.log(`seed ${seed}`);
  const r = rng(seed);
  for (let i = 0; i < 2000; i++) {
    const b = bytes.slice();
    b[Math.floor(r() * b.length)] ^= 1 + Math.floor(r() * 255);
    try {
      const c = decodeCommit(b);
      // Read whole: every record names rows of the commit.
      const end = commitEnd(c);
      for (const rec of c.records) assert(rec.first >= c.first && rec.last < end);
    } catch (err) {
      assert(err instanceof ReplicationWireError, `not a wire error: ${err}`);
    }
  }
});

Deno.test("replication wire: records outside the commit's rows, and trailing bytes, are refused", () => {
  const c = sample();
  c.records[0].last = c.first + 3;
  assertThrows(() => decodeCommit(encodeCommit(c)), ReplicationWireError, "outside the commit");
  const ok = encodeCommit(sample());
  const longer = new Uint8Array(ok.length + 1);
  longer.set(ok);
  assertThrows(() => decodeCommit(longer), ReplicationWireError, "after the last row");
});

Deno.test("replication wire: control messages are checked field by field", () => {
  assertEquals(parseControl('{"type":"durable","end":12}'), { type: "durable", end: 12 });
  assertEquals(parseControl('{"type":"in_sync","nodes":["n1"]}'), {
    type: "in_sync",
    nodes: ["n1"],
  });
  assertEquals(
    parseControl(
      '{"type":"hello","stream_id":"x","term":2,"terms":[{"term":2,"start":1}],"end":5,"commit":3}',
    ),
    {
      type: "hello",
      stream_id: "x",
      term: 2,
      terms: [{ term: 2, start: 1 }],
      end: 5,
      commit: 3,
    },
  );
  for (
    const bad of [
      "nope",
      "null",
      '{"type":"durable","end":1.5}',
      '{"type":"commit"}',
      '{"type":"hello","stream_id":1,"term":1,"terms":[],"end":1,"commit":1}',
      '{"type":"what"}',
      '{"type":"in_sync","nodes":[1]}',
    ]
  ) {
    assertThrows(() => parseControl(bad), ReplicationWireError);
  }
});
