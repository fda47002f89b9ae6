// compress=zstd-stream in a browser: the client's decoder
// (client/_zstd_stream.ts, fzstd), bundled for the browser as the client's
// bundle is (`deno bundle --platform browser`), decodes in headless Chromium
// message sequences recorded from the server's group context: one row per
// commit across frame ends, batches, tiny commits, multi-byte UTF-8, and a
// joiner's self-contained frames followed by the shared ones. Every message
// must give exactly its commit's text; a continuation with no frame open is
// refused in the page as in Deno.
import { assert, assertEquals } from "../../harness/assert.ts";
import { launchChromium } from "../../harness/browser.ts";
import { REPO } from "../../harness/demo.ts";
import { groupOf, type Received, tradeCommits } from "../../harness/zstd_sequence.ts";

async function bundleDecoder(): Promise<string> {
  const out = await Deno.makeTempFile({ prefix: "streamcast-zstd-stream-", suffix: ".js" });
  try {
    const res = await new Deno.Command(Deno.execPath(), {
      args: [
        "bundle",
        "--platform",
        "browser",
        "tests/system/browser/_zstd_stream_entry.ts",
        "-o",
        out,
      ],
      cwd: REPO,
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    assert(res.success, `deno bundle failed:\n${new TextDecoder().decode(res.stderr)}`);
    return await Deno.readTextFile(out);
  } finally {
    await Deno.remove(out).catch(() => {});
  }
}

Deno.test("zstd stream: Chromium decodes recorded message sequences with the bundled decoder", async () => {
  const code = await bundleDecoder();
  assert(!code.includes("Deno."), "the browser decoder uses no Deno API");
  // client/_zstd.ts names node:zlib only in a specifier the bundler cannot follow.
  assert(
    !/from\s*["']node:|import\s*["']node:/.test(code),
    "the browser decoder imports no node: module",
  );

  const oneRow = groupOf(tradeCommits(3_000, () => 1), { frameBytes: 64 * 1024 });
  const mixed = tradeCommits(4_000, (c) => [1, 2, 7, 40, 1, 900][c % 6]);
  mixed.splice(3, 0, "[1,{}]", '[2,{"s":"é€😀"}]');
  const tiny = groupOf(["[1,{}]", "[2,{}]", "[3,{}]", ...tradeCommits(50, () => 1, 4)]);
  const joined = groupOf(mixed, { frameBytes: 16 * 1024, joinAt: 101 });
  assert(oneRow.frames > 3, `${oneRow.frames} frames`);
  const sequences: [string, Received][] = [
    ["one row per commit", oneRow.member],
    ["tiny first commits", tiny.member],
    ["member of a mixed group", joined.member],
    ["joiner of a mixed group", joined.joiner],
  ];

  const browser = await launchChromium();
  try {
    const page = await browser.context.newPage();
    await page.addScriptTag({ content: code, type: "module" });
    await page.waitForFunction(() => "ZstdStreamDecoder" in globalThis);
    for (const [label, seq] of sequences) {
      const texts = await page.evaluate((messages: number[][]) => {
        const g = globalThis as unknown as {
          ZstdStreamDecoder: new () => { decode(b: Uint8Array): string };
        };
        const d = new g.ZstdStreamDecoder();
        return messages.map((m) => d.decode(new Uint8Array(m)));
      }, seq.messages.map((m) => Array.from(m)));
      assertEquals(texts.length, seq.texts.length, label);
      texts.forEach((t, i) => assertEquals(t, seq.texts[i], `${label}: message ${i}`));
    }
    const refusal = await page.evaluate((m: number[]) => {
      const g = globalThis as unknown as {
        ZstdStreamDecoder: new () => { decode(b: Uint8Array): string };
      };
      try {
        new g.ZstdStreamDecoder().decode(new Uint8Array(m));
        return "decoded";
      } catch (err) {
        return (err as Error).message;
      }
    }, Array.from(oneRow.member.messages[1]));
    assert(refusal.includes("none is open"), refusal);
  } finally {
    await browser.close();
  }
});
