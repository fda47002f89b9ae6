/// <reference lib="dom" />
// The viewer's "since" field in a real browser: `demo` as a child process, the
// page in headless Chromium; the replay starts at the offset /at names.
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { launchChromium } from "../../harness/browser.ts";
import { type DemoProc, getJson, startDemo } from "../../harness/demo.ts";

const WAIT_MS = 15_000;

Deno.test({
  name: "viewer replays since a time: from the first row at or after it, then live",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const root = await tempDir();
    let demo: DemoProc | null = null;
    let browser: Awaited<ReturnType<typeof launchChromium>> | null = null;
    try {
      demo = await startDemo(["--port", "0", "--root", root, "--rate", "60"]);
      browser = await launchChromium();
      const page = browser.context.pages()[0] ?? await browser.context.newPage();
      page.setDefaultTimeout(WAIT_MS);
      const problems: string[] = [];
      page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
      await page.goto(`${demo.url}/trades`, { timeout: WAIT_MS });
      await page.waitForFunction(() =>
        document.querySelectorAll("#rows tbody tr[data-offset]").length >= 20
      );
      // A time a little in the past: the server says which row starts there.
      await new Promise((r) => setTimeout(r, 1500));
      const sinceUs = (Date.now() - 1000) * 1000;
      const at = await getJson(`${demo.url}/trades/at?since=${sinceUs}`);
      const from = at.offset as number;
      assert((at.ts as number) >= sinceUs, JSON.stringify(at));
      const oldView = await page.getAttribute("#rows tbody", "data-view");
      const rfc = new Date(sinceUs / 1000).toISOString();
      await page.fill("#replay-since", rfc);
      await page.click("#since-form button[type=submit]");
      await page.waitForFunction(
        ([oldView]) =>
          document.querySelector<HTMLElement>("#rows tbody")!.dataset.view !== oldView &&
          document.getElementById("replay-info")!.textContent!.includes("then live"),
        [oldView] as const,
      );
      const info = (await page.textContent("#replay-info"))!;
      const m = /rows replayed from offset ([\d,]+)/.exec(info);
      assert(m, info);
      assertEquals(Number(m[1].replace(/,/g, "")), from, info);
      // A bad time is said on the page, not thrown.
      await page.fill("#replay-since", "yesterday");
      await page.click("#since-form button[type=submit]");
      await page.waitForFunction(() =>
        document.getElementById("notice")!.textContent!.includes("since")
      );
      assertEquals(problems, []);
    } finally {
      await browser?.close();
      await demo?.stop();
      await rmrf(root);
    }
  },
});
