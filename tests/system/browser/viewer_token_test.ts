/// <reference lib="dom" />
// The web viewer behind a tokens file, in a real browser: opened with
// ?access_token=…, its links, its subscription and its polls all carry the
// token on, and nothing it does is refused.
import { join } from "node:path";
import type { Page } from "playwright-core";
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { pageToken, streamHref } from "../../../server/viewer/app.js";
import { row, SCHEMA, serveCli, type Served } from "../../harness/security.ts";
import { launchChromium } from "../../harness/browser.ts";

const TOKEN = "viewer-0123456789abcdef01234567";
const WAIT_MS = 15_000;

Deno.test("viewer links carry the page's access token on", () => {
  assertEquals(streamHref("trades", TOKEN), `/trades?access_token=${TOKEN}`);
  assertEquals(streamHref("", TOKEN), `/?access_token=${TOKEN}`);
  assertEquals(streamHref("a b", undefined), "/a%20b");
  assertEquals(streamHref("trades", undefined), "/trades");
  assertEquals(pageToken(`?x=1&access_token=${TOKEN}`), TOKEN);
  assertEquals(pageToken("?access_token="), undefined);
  assertEquals(pageToken(""), undefined);
});

/** What the page says about itself, for a failure message. */
async function pageState(page: Page): Promise<string> {
  return await page.evaluate(() =>
    ["conn", "notice", "streams-note"]
      .map((id) => `${id}: ${document.getElementById(id)?.textContent}`)
      .join("; ")
  ).catch((err) => `(page state unavailable: ${err.message})`);
}

async function waitFor(page: Page, what: string, fn: () => boolean): Promise<void> {
  try {
    await page.waitForFunction(fn, null, { timeout: WAIT_MS });
  } catch (err) {
    throw new Error(
      `waiting for ${what}: ${(err as Error).message.split("\n")[0]}\n${await pageState(page)}`,
    );
  }
}

Deno.test({
  name: "viewer opened with an access token subscribes, polls and follows links with it",
  // playwright keeps its own pipes and timers to the browser process until close().
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dir = await tempDir();
    let s: Served | null = null;
    let browser: Awaited<ReturnType<typeof launchChromium>> | null = null;
    try {
      const schema = join(dir, "schema.json");
      const tokens = join(dir, "tokens.json");
      await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
      await Deno.writeTextFile(
        tokens,
        JSON.stringify({ tokens: [{ name: "viewer", token: TOKEN, streams: ["*"] }] }),
      );
      s = await serveCli(
        [
          ...["--root", join(dir, "data"), "--port", "0", "--tokens", tokens],
          ...["--stream", `trades=${schema}`, "--stream", `book=${schema}`, "--stdin", "trades"],
          ...["--log-level", "debug"],
        ],
        { stdin: true },
      );
      await s.write(
        Array.from({ length: 30 }, (_, i) => JSON.stringify(row(i + 1))).join("\n") + "\n",
      );
      const origin = s.url;

      browser = await launchChromium();
      const page = browser.context.pages()[0] ?? await browser.context.newPage();
      page.setDefaultTimeout(WAIT_MS);
      const problems: string[] = [];
      const refused: string[] = [];
      const referers: string[] = [];
      page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(`console error: ${m.text()}`);
      });
      page.on("response", (r) => {
        if (r.status() >= 400) refused.push(`${r.status()} ${new URL(r.url()).pathname}`);
      });
      page.on("request", (r) => {
        const referer = r.headers()["referer"];
        if (referer) referers.push(referer);
      });

      // `/` opens the first stream, and keeps the token in the address.
      await page.goto(`${origin}/?access_token=${TOKEN}`, { timeout: WAIT_MS });
      await waitFor(
        page,
        "30 rows of trades",
        () => document.querySelectorAll("#rows tbody tr[data-offset]").length >= 30,
      );
      const first = new URL(page.url());
      assertEquals(first.pathname, "/trades");
      assertEquals(first.searchParams.get("access_token"), TOKEN);
      // The poll of /_/streams got through: both streams listed with their heads.
      await waitFor(
        page,
        "both streams listed",
        () => document.querySelectorAll("#streams tbody tr[data-stream]").length === 2,
      );
      const links = await page.$$eval(
        "#streams tbody th a",
        (as) => as.map((a) => (a as HTMLAnchorElement).getAttribute("href")),
      );
      assertEquals(links.sort(), [
        `/book?access_token=${TOKEN}`,
        `/trades?access_token=${TOKEN}`,
      ]);

      // Following a link: the page loads (not a 401) and subscribes to book.
      await page.click('#streams tr[data-stream="book"] th a');
      await page.waitForURL((u) => u.pathname === "/book", { timeout: WAIT_MS });
      await waitFor(page, "book live", () => {
        const conn = document.getElementById("conn")!;
        return conn.dataset.state === "live";
      });
      assertEquals(new URL(page.url()).searchParams.get("access_token"), TOKEN);
      assertEquals(await page.textContent("#stream-name"), "· book");
      // Give a poll or two the time to fail, if it would.
      await page.waitForTimeout(1500);
      assertEquals(await page.textContent("#streams-note"), "");

      assertEquals(refused, [], "requests the server refused");
      assertEquals(problems, []);
      assertEquals(referers, [], "the page must not send its address (and token) as Referer");
      // Both subscriptions were accepted with the token, and no log line holds it.
      await s.waitStderr(/subscribe stream=book .*token_name=viewer/);
      assert(/subscribe stream=trades .*token_name=viewer/.test(s.stderr()), s.stderr());
      assert(!s.stderr().includes(TOKEN), "stderr holds the token");
      assert(!/denied/.test(s.stderr()), s.stderr());
    } finally {
      await browser?.close();
      await s?.stop();
      await rmrf(dir);
    }
  },
});
