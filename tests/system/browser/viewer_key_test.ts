/// <reference lib="dom" />
// The viewer on a keyed stream, in a real browser: it opens with the
// snapshot and shows one line per key, each the key's latest row, kept
// up to date as rows arrive.
import { assert, assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { launchChromium } from "../../harness/browser.ts";

const SCHEMA = {
  type: "object",
  properties: { symbol: { type: "string" }, price: { type: "number" } },
  required: ["symbol", "price"],
};
const SYMBOLS = ["BTC-USD", "ETH-USD", "SOL-USD", "XRP-USD"];

Deno.test({
  name: "viewer on a keyed stream shows one line per key, its latest row",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const root = await tempDir();
    const stream = await Stream.open("t", { schema: SCHEMA, root, key: ["symbol"] });
    const server = serve([stream], { port: 0, onListen: () => {} });
    let i = 0;
    const send = (n: number) =>
      stream.sendMany(Array.from({ length: n }, () => {
        i++;
        return { symbol: SYMBOLS[(i * 7) % 3], price: 100 + i };
      }));
    await send(300); // three keys in the snapshot
    const browser = await launchChromium();
    try {
      const page = browser.context.pages()[0] ?? await browser.context.newPage();
      page.setDefaultTimeout(15_000);
      const problems: string[] = [];
      page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
      await page.goto(`${server.url}/t`);
      await page.waitForFunction(() =>
        document.querySelectorAll("#rows tbody tr[data-key]").length === 3
      );
      // Live rows, a new key among them.
      await send(30);
      await stream.sendMany([{ symbol: SYMBOLS[3], price: 1 }]);
      const want = (stream.snapshot() as { lines: string[] }).lines
        .map((l) => JSON.parse(l) as [number, { symbol: string }])
        .sort((a, b) => b[0] - a[0]);
      await page.waitForFunction(
        (n) => document.querySelectorAll("#rows tbody tr[data-key]").length === n,
        want.length,
      );
      const shown = await page.$$eval(
        "#rows tbody tr[data-key]",
        (trs) =>
          trs.map((tr) => [Number(tr.getAttribute("data-offset")), tr.getAttribute("data-key")]),
      );
      assertEquals(shown, want.map(([o, row]) => [o, JSON.stringify([row.symbol])]));
      const info = await page.textContent("#replay-info");
      assert(info!.includes("One line per key (symbol): 4 keys"), info!);
      assertEquals(problems, []);
    } finally {
      await browser.close();
      await server.shutdown();
      await stream.close();
      await rmrf(root);
    }
  },
});
