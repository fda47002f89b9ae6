// Seeded fuzz of compress=zstd-stream's commit sizes (tests/harness/seeds.ts:
// a fresh seed each run, printed, and the regression seeds): per case a
// random frame size, commits from a few bytes to past zstd's 128 KiB block
// and the 64 KiB window, multi-byte UTF-8, early frame ends and a joiner at
// a random commit. Both decoders must give every commit's text from its
// message, for the member and the joiner, and `zstd -d` every frame's
// text from its messages. Then one message of the case is damaged (a byte
// changed, or cut short): decoding up to it either gives text or throws an
// Error; nothing else escapes.
import { assert, assertEquals } from "../../harness/assert.ts";
import { COMPRESS_FRAME_BYTES } from "../../../server/frames/zstd_stream.ts";
import { ZstdStreamDecoder } from "../../../client/_zstd_stream.ts";
import { loadZstd } from "../../../client/_zstd.ts";
import { zstdCli } from "../../harness/zstd_cli.ts";
import { concatBytes, framesOf, groupOf, tradeCommits } from "../../harness/zstd_sequence.ts";
import { caseName, caseRng, fuzzCases, replayHint, seedBanner } from "../../harness/seeds.ts";

const SUITE = "zstd_stream";
const CASES = 40;
const whole = await loadZstd();

function commitsOf(r: () => number): string[] {
  const n = 20 + Math.floor(r() * 200);
  const out: string[] = [];
  let offset = 1;
  for (let c = 0; c < n; c++) {
    const kind = r();
    if (kind < 0.15) {
      out.push(`[${offset++},{}]`); // shorter than a frame header and a block
    } else if (kind < 0.25) {
      const chars = ["a", "é", "€", "😀", "\n", '"', "\\"];
      let s = "";
      for (let k = Math.floor(r() * 300); k > 0; k--) s += chars[Math.floor(r() * chars.length)];
      out.push(`[${offset++},${JSON.stringify(s)}]`);
    } else {
      // Mostly a few rows; now and then past a block (128 KiB) and the window (64 KiB).
      const rows = r() < 0.05 ? 1200 + Math.floor(r() * 2000) : 1 + Math.floor(r() * r() * 60);
      out.push(tradeCommits(rows, () => rows, offset)[0]);
      offset += rows;
    }
  }
  return out;
}

Deno.test("zstd stream fuzz: random commit sizes, frame sizes, frame ends and joiners round-trip", async () => {
  console.log(seedBanner(SUITE));
  const cases = fuzzCases(CASES, SUITE);
  for (const c of cases) {
    const r = caseRng(c);
    const name = caseName(c);
    const commits = commitsOf(r);
    const frameBytes = r() < 0.2
      ? COMPRESS_FRAME_BYTES.default
      : COMPRESS_FRAME_BYTES.min + Math.floor(r() * 60_000);
    const finishAt = new Set<number>([commits.length - 1]);
    for (let k = Math.floor(r() * 4); k > 0; k--) finishAt.add(Math.floor(r() * commits.length));
    const joinAt = Math.floor(r() * commits.length);
    try {
      const { member, joiner } = groupOf(commits, { frameBytes, joinAt, finishAt });
      for (const [who, got] of [["member", member], ["joiner", joiner]] as const) {
        for (const d of [new ZstdStreamDecoder(), new ZstdStreamDecoder({ whole })]) {
          got.messages.forEach((m, i) =>
            assertEquals(d.decode(m), got.texts[i], `${who} message ${i}`)
          );
          assertEquals(d.inFrame, false, `${who}: the last commit ended its frame`);
        }
      }
      const frames = framesOf(member);
      const cli = await zstdCli(concatBytes(member.messages));
      assertEquals(cli, member.texts.join(""), `zstd -d of ${frames.length} frames`);

      // One damaged message, after the ones before it.
      const at = Math.floor(r() * member.messages.length);
      const bad = member.messages[at].slice();
      if (r() < 0.5) bad[Math.floor(r() * bad.length)] ^= 1 + Math.floor(r() * 255);
      const cut = r() < 0.5 ? bad.subarray(0, Math.floor(r() * bad.length)) : bad;
      const d = new ZstdStreamDecoder({ whole: r() < 0.5 ? whole : null });
      for (let i = 0; i < at; i++) d.decode(member.messages[i]);
      try {
        const text = d.decode(cut);
        assert(typeof text === "string");
      } catch (err) {
        assert(err instanceof Error, `a non-Error escaped: ${err}`);
      }
    } catch (err) {
      throw new Error(`${name}: ${(err as Error).message} (${replayHint([c])})`, { cause: err });
    }
  }
});
