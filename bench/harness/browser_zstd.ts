// The cost of decoding compress=zstd frames in a browser with a JS decoder
// (fzstd, pure JS: Chromium's DecompressionStream has no "zstd"), measured in
// headless Chromium against what the client does with a plain frame anyway
// (split the lines, JSON.parse each one). Used by bench/e2e/compress.ts.
import { launchChromium } from "../../tests/harness/browser.ts";
import { zstdFrame } from "../../server/frames/compressed_frames.ts";

/** ns per row of each step, in the page. */
export interface BrowserDecode {
  /** Rows per frame. */
  rows: number;
  /** fzstd.decompress + TextDecoder, per row. */
  decodeNs: number;
  /** split + JSON.parse of the text, per row (what the client does with a plain frame). */
  parseNs: number;
}

/** Measures fzstd against parsing for frames of each size in `rowsPerFrame`. */
export async function browserDecode(
  lines: string[],
  rowsPerFrame: number[],
): Promise<BrowserDecode[]> {
  const fzstd = await Deno.readTextFile(
    new URL("../../node_modules/fzstd/umd/index.js", import.meta.url),
  );
  const b = await launchChromium();
  try {
    const page = await b.context.newPage();
    await page.addScriptTag({ content: fzstd });
    const out: BrowserDecode[] = [];
    for (const rows of rowsPerFrame) {
      const frames: { z: number[]; text: string }[] = [];
      for (let at = 0; at + rows <= lines.length && frames.length < 200; at += rows) {
        const text = lines.slice(at, at + rows).join("\n");
        frames.push({ z: Array.from(zstdFrame(text)), text });
      }
      const r = await page.evaluate((frames) => {
        const z = frames.map((f) => new Uint8Array(f.z));
        const dec = new TextDecoder();
        const g = globalThis as unknown as { fzstd: { decompress(b: Uint8Array): Uint8Array } };
        let rows = 0;
        for (const f of frames) rows += f.text.split("\n").length;
        const time = (fn: () => void) => {
          fn(); // warm-up
          let reps = 0;
          const t0 = performance.now();
          while (performance.now() - t0 < 400 || reps < 3) {
            fn();
            reps++;
          }
          return (performance.now() - t0) * 1e6 / (reps * rows);
        };
        let sink = 0;
        const decodeNs = time(() => {
          for (const b of z) sink += dec.decode(g.fzstd.decompress(b)).length;
        });
        const parseNs = time(() => {
          for (const f of frames) for (const l of f.text.split("\n")) sink += JSON.parse(l)[0];
        });
        return { decodeNs, parseNs, sink };
      }, frames);
      out.push({ rows, decodeNs: r.decodeNs, parseNs: r.parseNs });
    }
    return out;
  } finally {
    await b.close();
  }
}
