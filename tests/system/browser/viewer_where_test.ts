/// <reference lib="dom" />
// The viewer's filter box in a real browser: its JSON goes into the
// subscribe, the table switches to the filtered rows together with the line
// that says so, and the server's refusal detail is shown when it is refused.
import { assert, assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { launchChromium } from "../../harness/browser.ts";

const SCHEMA = {
  type: "object",
  properties: { symbol: { type: "string" }, price: { type: "number" } },
  required: ["symbol", "price"],
};

Deno.test({
  name: "viewer filter box subscribes with where, and shows the server's refusal",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const root = await tempDir();
    const stream = await Stream.open("t", { schema: SCHEMA, root });
    const server = serve([stream], { port: 0, onListen: () => {} });
    let i = 0;
    const timer = setInterval(() => {
      const rows = Array.from({ length: 3 }, () => {
        i++;
        return { symbol: ["BTC-USD", "ETH-USD", "SOL-USD"][i % 3], price: 100 + i };
      });
      stream.sendMany(rows).catch(() => {});
    }, 20);
    const browser = await launchChromium();
    try {
      const page = browser.context.pages()[0] ?? await browser.context.newPage();
      page.setDefaultTimeout(15_000);
      const problems: string[] = [];
      page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
      await page.goto(`${server.url}/t`);
      await page.waitForFunction(() =>
        document.querySelectorAll("#rows tbody tr[data-offset]").length >= 10
      );
      // From the moment the page says it shows only matching rows, the table
      // never holds another row: checked at every change of the info line or
      // the table (a MutationObserver runs before the page can paint).
      await page.evaluate(() => {
        const seen: string[] = [];
        (globalThis as unknown as { mixed: string[] }).mixed = seen;
        const check = () => {
          if (!document.getElementById("filter-info")!.textContent!.includes("Only rows where")) {
            return;
          }
          const heads = [...document.querySelectorAll("#rows thead th")].map((th) =>
            th.textContent
          );
          const col = heads.indexOf("symbol");
          for (const tr of document.querySelectorAll("#rows tbody tr[data-offset]")) {
            const symbol = tr.children[col]?.textContent;
            if (symbol !== "ETH-USD") seen.push(`${tr.getAttribute("data-offset")}: ${symbol}`);
          }
        };
        const watch = new MutationObserver(check);
        watch.observe(document.getElementById("filter-info")!, { childList: true, subtree: true });
        watch.observe(document.querySelector("#rows tbody")!, { childList: true });
      });
      // A filter: the table then holds only matching rows.
      await page.fill("#filter-where", '{"symbol":"ETH-USD"}');
      await page.click('#filter button[type="submit"]');
      await page.waitForFunction(() =>
        document.getElementById("filter-info")!.textContent!.includes("Only rows where")
      );
      await page.waitForFunction(() =>
        document.querySelectorAll("#rows tbody tr[data-offset]").length >= 10
      );
      const symbols = await page.$$eval("#rows tbody tr[data-offset]", (trs) => {
        const heads = [...document.querySelectorAll("#rows thead th")].map((th) => th.textContent);
        const col = heads.indexOf("symbol");
        return trs.map((tr) => tr.children[col]?.textContent);
      });
      assert(symbols.length >= 10, JSON.stringify(symbols));
      assertEquals([...new Set(symbols)], ["ETH-USD"]);
      assertEquals(
        await page.evaluate(() => (globalThis as unknown as { mixed: string[] }).mixed),
        [],
      );
      // A filter the columns refuse: the server's detail, beside the box; the rows go on.
      await page.fill("#filter-where", '{"sym":"x"}');
      await page.click('#filter button[type="submit"]');
      await page.waitForFunction(() =>
        document.getElementById("filter-error")!.textContent!.includes("where: unknown column sym")
      );
      // Not a JSON object: said at once, nothing is sent.
      await page.fill("#filter-where", "[1]");
      await page.click('#filter button[type="submit"]');
      await page.waitForFunction(() =>
        document.getElementById("filter-error")!.textContent!.includes("JSON object")
      );
      // All rows again.
      await page.click("#filter-clear");
      await page.waitForFunction(() =>
        document.getElementById("filter-info")!.textContent === "All rows."
      );
      assertEquals(problems, []);
    } finally {
      clearInterval(timer);
      await browser.close();
      await server.shutdown();
      await rmrf(root);
    }
  },
});
