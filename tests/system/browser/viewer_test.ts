/// <reference lib="dom" />
// The web viewer in a real browser: `demo` as a child process, the page in
// headless Chromium (playwright-core driving Debian's /usr/bin/chromium).
import type { Page } from "playwright-core";
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { launchChromium } from "../../harness/browser.ts";
import { type DemoProc, REPO, startDemo } from "../../harness/demo.ts";

const SCREENSHOT = `${REPO}/tmp/artifacts/viewer.png`;
const WAIT_MS = 15_000;

/** The offsets of the table's rows, top (newest) first, with their replay mark. */
function tableRows(page: Page): Promise<{ offset: number; replayed: boolean }[]> {
  return page.$$eval("#rows tbody tr[data-offset]", (trs) =>
    trs.map((tr) => ({
      offset: Number((tr as HTMLElement).dataset.offset),
      replayed: tr.classList.contains("replayed"),
    })));
}

/** Pixels of the chart close to an RGB colour. */
function chartPixels(page: Page, rgb: [number, number, number]): Promise<number> {
  return page.$eval("#chart", (el, rgb) => {
    const c = el as HTMLCanvasElement;
    const data = c.getContext("2d")!.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < data.length; i += 4) {
      const d = Math.abs(data[i] - rgb[0]) + Math.abs(data[i + 1] - rgb[1]) +
        Math.abs(data[i + 2] - rgb[2]);
      if (data[i + 3] > 128 && d < 60) n++;
    }
    return n;
  }, rgb);
}

/** What the page says about itself, for a failure message. */
async function pageState(page: Page): Promise<string> {
  return await page.evaluate(() =>
    ["conn", "reconnects", "notice", "replay-info"]
      .map((id) => `${id}: ${document.getElementById(id)?.textContent}`)
      .join("; ") +
    `; seen: ${JSON.stringify((globalThis as unknown as { seen?: unknown }).seen ?? null)}`
  ).catch((err) => `(page state unavailable: ${err.message})`);
}

/** page.waitForFunction, failing with what the page showed. */
async function waitFor<A>(
  page: Page,
  what: string,
  fn: (arg: A) => boolean,
  arg: A,
  ms = WAIT_MS,
): Promise<void> {
  try {
    await page.waitForFunction(fn as Parameters<Page["waitForFunction"]>[0], arg, {
      timeout: ms,
    });
  } catch (err) {
    const shot = SCREENSHOT.replace(/\.png$/, "-failed.png");
    await page.screenshot({ path: shot }).catch(() => {});
    throw new Error(
      `waiting for ${what}: ${(err as Error).message.split("\n")[0]}\n${await pageState(page)}` +
        `\n(screenshot: ${shot})`,
    );
  }
}

/** The rows the table showed: offset, replay mark, and which subscription they were from. */
type Seen = { offset: number; replayed: boolean; view: string }[];
/** The marker rows (where a replay turned live) the table showed. */
type Markers = { view: string; text: string }[];

// Run in the page (by waitFor): the newest offset in the table, and the connection state.
declare function newest(): number;
declare function state(): string;
const PAGE_HELPERS = `
  globalThis.newest = () =>
    Number(document.querySelector("#rows tbody tr[data-offset]")?.dataset.offset ?? 0);
  globalThis.state = () => document.getElementById("conn").dataset.state;
`;

const LIVE_RGB: [number, number, number] = [0x0b, 0x5c, 0xad];
const REPLAY_RGB: [number, number, number] = [0x8a, 0x4b, 0x00];

Deno.test({
  name: "viewer shows live rows, draws the chart, replays from an offset and resumes",
  // playwright keeps its own pipes and timers to the browser process until close().
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const root = await tempDir();
    let demo: DemoProc | null = null;
    let browser: Awaited<ReturnType<typeof launchChromium>> | null = null;
    try {
      demo = await startDemo(["--port", "0", "--root", root, "--rate", "60"]);
      const origin = demo.url;
      browser = await launchChromium();
      const page = browser.context.pages()[0] ?? await browser.context.newPage();
      page.setDefaultTimeout(WAIT_MS);
      const problems: string[] = [];
      const requests: string[] = [];
      page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(`console error: ${m.text()}`);
      });
      page.on("request", (r) => requests.push(r.url()));
      await page.addInitScript(PAGE_HELPERS);

      // `/` opens the only stream.
      await page.goto(`${origin}/`, { timeout: WAIT_MS });
      await waitFor(
        page,
        "20 rows in the table",
        () => document.querySelectorAll("#rows tbody tr[data-offset]").length >= 20,
        null,
      );
      assertEquals(new URL(page.url()).pathname, "/trades");

      // Rows with their offsets, newest first, consecutive.
      const first = await tableRows(page);
      for (let i = 1; i < first.length; i++) {
        assertEquals(first[i].offset, first[i - 1].offset - 1, `offsets ${JSON.stringify(first)}`);
      }
      // Live: newer offsets keep arriving.
      await waitFor(page, "newer rows", (top) => newest() > top + 10, first[0].offset);
      await waitFor(page, "the live state", () => state() === "live", null);

      // The streams list: end offset, a rate from successive polls, subscribers.
      await waitFor(page, "the streams list", () => {
        const cells = [...document.querySelectorAll('#streams tr[data-stream="trades"] td')]
          .map((td) => td.textContent!.replace(/,/g, ""));
        return cells.length === 3 && Number(cells[0]) > 0 && Number(cells[1]) > 0 &&
          Number(cells[2]) >= 1;
      }, null);

      // The chart is drawn: the live line's blue, and the history it opened with.
      assert((await chartPixels(page, LIVE_RGB)) > 100, "the chart shows no live line");
      assert((await chartPixels(page, REPLAY_RGB)) > 50, "the chart shows no replayed line");

      // Record every row the table shows from now on.
      await page.evaluate(() => {
        const seen: Seen = [];
        const markers: Markers = [];
        Object.assign(globalThis, { seen, markers });
        const body = document.querySelector<HTMLElement>("#rows tbody")!;
        new MutationObserver((records) => {
          for (const r of records) {
            for (const n of r.addedNodes) {
              const tr = n as HTMLElement;
              if (tr.classList?.contains("switch")) {
                markers.push({ view: body.dataset.view!, text: tr.textContent! });
              } else if (tr.dataset?.offset) {
                seen.push({
                  offset: Number(tr.dataset.offset),
                  replayed: tr.classList.contains("replayed"),
                  view: body.dataset.view!,
                });
              }
            }
          }
        }).observe(body, { childList: true });
      });

      // Replay from 30 rows back: those rows come back marked, then live rows
      // continue past the newest offset seen before. (After some history, so
      // that the screenshot shows a chart worth looking at.)
      await waitFor(page, "150 rows of history", () => newest() >= 150, null);
      const before = (await tableRows(page))[0].offset;
      const oldView = await page.getAttribute("#rows tbody", "data-view");
      const from = before - 30;
      await page.fill("#replay-from", String(from));
      await page.click("#replay button[type=submit]");
      await waitFor(
        page,
        `rows replayed from ${from}, then live past ${before}`,
        ([before, oldView]) => {
          const seen = (globalThis as unknown as { seen: Seen }).seen
            .filter((r) => r.view !== oldView);
          return seen.some((r) => r.replayed) && seen.some((r) =>
            !r.replayed && r.offset > before
          ) &&
            document.getElementById("replay-info")!.textContent!.includes("then live");
        },
        [before, oldView] as const,
      );
      await page.screenshot({ path: SCREENSHOT });
      // The page counted every replayed row: all of [from, liveFrom), then live.
      const info = (await page.textContent("#replay-info"))!;
      const m = /^([\d,]+) rows replayed from offset ([\d,]+), then live from ([\d,]+)/.exec(info);
      assert(m, `replay info: ${info}`);
      const [count, replayFrom, liveFrom] = m.slice(1).map((v) => Number(v.replace(/,/g, "")));
      assertEquals(replayFrom, from, info);
      assert(liveFrom > before, info);
      assertEquals(count, liveFrom - from, info);
      // What the table showed: replayed rows marked, below every live one.
      const recorded = await page.evaluate(() => {
        const g = globalThis as unknown as { seen: Seen; markers: Markers };
        return { seen: g.seen, markers: g.markers };
      });
      const seen = recorded.seen.filter((r) => r.view !== oldView);
      const replayed = seen.filter((r) => r.replayed).map((r) => r.offset);
      const live = seen.filter((r) => !r.replayed).map((r) => r.offset);
      assert(replayed.every((o) => o >= from && o < liveFrom), `replayed ${replayed}`);
      assert(live.every((o) => o >= liveFrom), `live ${live}, live from ${liveFrom}`);
      // A marker row where the replay turned live.
      const markers = recorded.markers.filter((m) => m.view !== oldView).map((m) => m.text);
      assert(
        markers.some((t) => t.includes(`live from offset ${liveFrom.toLocaleString("en-US")}`)),
        `markers ${JSON.stringify(markers)}, live from ${liveFrom}`,
      );
      assertEquals(await page.getAttribute("#conn", "data-state"), "live");
      assert((await chartPixels(page, REPLAY_RGB)) > 50, "the chart shows no replayed line");

      assertEquals(problems, []);

      // The server restarts: the page says so, resumes by itself, and rows
      // continue after the last one it had.
      const port = demo.port;
      assertEquals((await demo.signal("SIGINT")).code, 0);
      const last = (await tableRows(page))[0].offset;
      await waitFor(page, "the reconnecting state", () => state() === "reconnecting", null);
      demo = await startDemo(["--port", String(port), "--root", root, "--rate", "60"]);
      await waitFor(
        page,
        "a reconnect and rows past the last one",
        (last) =>
          document.getElementById("reconnects")!.textContent!.startsWith("reconnects: 1") &&
          newest() > last + 5,
        last,
        20_000,
      );
      const after = await tableRows(page);
      for (let i = 1; i < after.length; i++) {
        assertEquals(after[i].offset, after[i - 1].offset - 1, "a gap across the reconnect");
      }

      // The browser logs each refused reconnect attempt; nothing else may go wrong.
      assertEquals(problems.filter((p) => !p.includes("net::ERR_CONNECTION_REFUSED")), []);
      const foreign = requests.filter((u) => !u.startsWith(origin) && !u.startsWith("data:"));
      assertEquals(foreign, [], "the page must load nothing from elsewhere");
    } finally {
      await browser?.close();
      await demo?.stop();
      await rmrf(root);
    }
  },
});
