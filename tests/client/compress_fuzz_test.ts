// Fuzz of compressed frames into the Deno client (docs/SPEC.md §2.6): a
// fake server greets with compress "zstd", sends valid zstd frames, then one
// mutated frame (bit flips, truncation, concatenation, skippable frames, no
// checksum, a wrong or huge declared content size, an RLE decompression
// bomb, a text frame where a binary one is due), then more valid frames.
// The client delivers every row of the valid frames before the bad one, in
// order, then a ProtocolError naming that frame; never hangs, never throws
// uncaught, never delivers a wrong row (a mutation that still decodes to
// the same text may pass: then every row arrives). Seeded (tests/harness/seeds.ts).
import { assert, assertEquals } from "../harness/assert.ts";
import { connect, ProtocolError } from "../../client/mod.ts";
import { zstdFrame } from "../../server/frames/compressed_frames.ts";
import { MAX_ZSTD_FRAME_TEXT } from "../../client/_zstd.ts";
import {
  caseName,
  caseRng,
  type FuzzCase,
  fuzzCases,
  replayHint,
  seedBanner,
} from "../harness/seeds.ts";
import { constants, zstdCompressSync } from "node:zlib";
import { fakeServer, ZSTD_GREETING } from "./_fake_zstd_server.ts";

const SUITE = "client_zstd";
const CASES = 40;

type Mutation =
  | "flip"
  | "truncate"
  | "concat"
  | "skippable_before"
  | "skippable_after"
  | "no_checksum"
  | "wrong_size"
  | "huge_size"
  | "rle_bomb"
  | "text"
  | "empty"
  | "garbage";
const MUTATIONS: Mutation[] = [
  "flip",
  "truncate",
  "concat",
  "skippable_before",
  "skippable_after",
  "no_checksum",
  "wrong_size",
  "huge_size",
  "rle_bomb",
  "text",
  "empty",
  "garbage",
];

function skippable(r: () => number): Uint8Array {
  const n = Math.floor(r() * 16);
  const out = new Uint8Array(8 + n);
  const magic = 0x184d2a50 + Math.floor(r() * 16);
  new DataView(out.buffer).setUint32(0, magic, true);
  new DataView(out.buffer).setUint32(4, n, true);
  return out;
}

// A frame with an 8-byte declared content size and `blocks` RLE blocks of
// 128 KiB each (4 bytes a block): tiny on the wire, huge decompressed.
function rleFrame(declared: number | null, blocks: number): Uint8Array {
  const hdr = declared === null ? [0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x70] : (() => {
    const h = [0x28, 0xb5, 0x2f, 0xfd, 0xc4, 0x70]; // FCS 8 bytes, checksum, window
    let d = declared;
    for (let k = 0; k < 8; k++) {
      h.push(d % 256);
      d = Math.floor(d / 256);
    }
    return h;
  })();
  const out = new Uint8Array(hdr.length + blocks * 4 + 4);
  out.set(hdr);
  let p = hdr.length;
  for (let i = 0; i < blocks; i++) {
    const h = (i === blocks - 1 ? 1 : 0) | (1 << 1) | ((128 * 1024) << 3);
    out[p++] = h & 255;
    out[p++] = (h >> 8) & 255;
    out[p++] = (h >> 16) & 255;
    out[p++] = 0x20;
  }
  return out; // the 4 checksum bytes are zeros: wrong, but never reached
}

interface Plan {
  frames: { data: Uint8Array | string; rows: unknown[] | null }[];
  bad: number; // index (0-based) of the mutated frame
  mutation: Mutation;
}

function plan(c: FuzzCase): Plan {
  const r = caseRng(c, 0x2257);
  let next = 1;
  const batch = () => {
    const n = 1 + Math.floor(r() * 6);
    const rows = Array.from({ length: n }, () => ({ i: next++, s: "ab".repeat(next % 9) }));
    return { text: rows.map((m) => JSON.stringify([null, m])).join("\n"), rows };
  };
  const before = Math.floor(r() * 4);
  const frames: Plan["frames"] = [];
  for (let k = 0; k < before; k++) {
    const b = batch();
    frames.push({ data: zstdFrame(b.text), rows: b.rows });
  }
  const mutation = MUTATIONS[(c.index + Math.floor(r() * MUTATIONS.length)) % MUTATIONS.length];
  const b = batch();
  const good = zstdFrame(b.text);
  let data: Uint8Array | string;
  let rows: unknown[] | null = null; // the rows it may pass for, if it still decodes
  switch (mutation) {
    case "flip": {
      data = good.slice();
      const flips = 1 + Math.floor(r() * 3);
      for (let k = 0; k < flips; k++) {
        data[Math.floor(r() * data.length)] ^= 1 << Math.floor(r() * 8);
      }
      rows = b.rows;
      break;
    }
    case "truncate":
      data = good.slice(0, Math.floor(r() * good.length));
      break;
    case "concat": {
      const b2 = batch();
      data = new Uint8Array([...good, ...zstdFrame(b2.text)]);
      break;
    }
    case "skippable_before":
      data = new Uint8Array([...skippable(r), ...good]);
      break;
    case "skippable_after":
      data = new Uint8Array([...good, ...skippable(r)]);
      break;
    case "no_checksum":
      data = new Uint8Array(zstdCompressSync(new TextEncoder().encode(b.text), {
        params: { [constants.ZSTD_c_checksumFlag]: 0 },
      }));
      break;
    case "wrong_size": {
      // The single-segment header's 1-byte content size (texts under 256 bytes)
      // or a 2-byte one: off by a few either way.
      data = good.slice();
      const fhd = data[4];
      const fcs = [(fhd >> 5) & 1 ? 1 : 0, 2, 4, 8][fhd >> 6];
      assert(fcs > 0, "zstdFrame declares its content size");
      const delta = 1 + Math.floor(r() * 3);
      data[5] = (data[5] + (r() < 0.5 ? delta : 256 - delta)) & 255;
      break;
    }
    case "huge_size":
      data = rleFrame(MAX_ZSTD_FRAME_TEXT + 1 + Math.floor(r() * 2 ** 40), 4);
      break;
    case "rle_bomb":
      // ~1 GiB of content in 32 KiB, no size declared.
      data = rleFrame(null, 8192);
      break;
    case "text":
      data = b.text;
      break;
    case "empty":
      data = new Uint8Array(0);
      break;
    case "garbage":
      data = crypto.getRandomValues(new Uint8Array(1 + Math.floor(r() * 64)));
      break;
  }
  const bad = frames.length;
  frames.push({ data, rows });
  const after = Math.floor(r() * 3);
  for (let k = 0; k < after; k++) {
    const b2 = batch();
    frames.push({ data: zstdFrame(b2.text), rows: b2.rows });
  }
  return { frames, bad, mutation };
}

async function runCase(c: FuzzCase): Promise<void> {
  const p = plan(c);
  const name = `${caseName(c)} (${p.mutation})`;
  const fake = fakeServer((ws) => {
    ws.send(JSON.stringify(ZSTD_GREETING));
    for (const f of p.frames) ws.send(f.data as string);
  });
  const want = p.frames.slice(0, p.bad).flatMap((f) => f.rows!);
  const all = p.frames.flatMap((f) => f.rows ?? []);
  const sub = await connect(fake.url, { reconnect: false });
  const got: unknown[] = [];
  let error: unknown = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const t0 = performance.now();
  try {
    await Promise.race([
      (async () => {
        try {
          for await (const [, msg] of sub) {
            got.push(msg);
            // A mutation that decodes to the same text: every row, then stop.
            if (got.length === all.length && p.frames[p.bad].rows) break;
          }
        } catch (err) {
          error = err;
        }
      })(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${name}: the client hung`)), 5_000);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    await sub.close();
    await fake.stop();
  }
  if (error === null) {
    assert(p.frames[p.bad].rows !== null, `${name}: the bad frame was accepted`);
    assertEquals(got, all, `${name}: a mutated frame that decodes passes only as the same rows`);
    return;
  }
  assert(error instanceof ProtocolError, `${name}: ${error}`);
  const msg = (error as ProtocolError).message;
  assert(
    msg.includes(`compressed frame ${p.bad + 1} `),
    `${name}: the error names frame ${p.bad + 1}: ${msg}`,
  );
  assertEquals(got, want, `${name}: the rows of the valid frames before it, in order`);
  if (p.mutation === "huge_size" || p.mutation === "rle_bomb") {
    assert(/limit/.test(msg), `${name}: refused for its size: ${msg}`);
    assert(performance.now() - t0 < 3_000, `${name}: refused without decompressing`);
  }
}

Deno.test("compressed frames fuzz: the client delivers the valid frames' rows, then a ProtocolError naming the bad frame", async () => {
  console.log(seedBanner(SUITE));
  const cases = fuzzCases(CASES, SUITE);
  const failed: string[] = [];
  for (const c of cases) {
    try {
      await runCase(c);
    } catch (err) {
      failed.push(`${caseName(c)}: ${(err as Error).message}`);
    }
  }
  assert(
    failed.length === 0,
    `${failed.length} failed:\n${failed.join("\n")}\n${replayHint(cases)}`,
  );
});

Deno.test("a decompression bomb is refused before decompressing: declared and undeclared", async () => {
  for (
    const [what, frame] of [["declared 2^50", rleFrame(2 ** 50, 2)], [
      "1 GiB of RLE",
      rleFrame(null, 8192),
    ]] as const
  ) {
    const fake = fakeServer((ws) => {
      ws.send(JSON.stringify(ZSTD_GREETING));
      ws.send(zstdFrame('[null,{"i":1}]'));
      ws.send(frame);
    });
    try {
      const sub = await connect(fake.url, { reconnect: false });
      const got: unknown[] = [];
      let err: unknown = null;
      try {
        for await (const [, msg] of sub) got.push(msg);
      } catch (e) {
        err = e;
      }
      assertEquals(got, [{ i: 1 }], what);
      assert(
        err instanceof ProtocolError && /compressed frame 2 .*limit/.test(err.message),
        `${what}: ${err}`,
      );
    } finally {
      await fake.stop();
    }
  }
});
