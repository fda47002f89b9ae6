/// <reference lib="dom" />
// compress=zstd-stream in a real browser (docs/SPEC.md §2.6.1): the bundled client
// (/_/client.js) asks for it by default and decodes it in Chromium — replayed
// self-contained frames, then the live group's shared stream — to exactly the
// rows sent; the viewer shows the bytes per row on the wire.
import { assert, assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { launchChromium } from "../../harness/browser.ts";

const SCHEMA = {
  type: "object",
  properties: { symbol: { type: "string" }, price: { type: "number" }, qty: { type: "integer" } },
  required: ["symbol", "price", "qty"],
};
const row = (i: number) => ({
  symbol: ["BTC-USD", "ETH-USD", "SOL-USD"][i % 3],
  price: 100 + (i % 41) / 8,
  qty: (i * 7) % 13,
});

Deno.test({
  name:
    "browser client decodes compress=zstd-stream to the rows sent; the viewer shows bytes per row",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const root = await tempDir();
    const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
    const server = serve([stream], { port: 0, onListen: () => {} });
    // The 400 rows the client reads are all in the log before it connects, so
    // they come as replay (batches compressed together) however long the
    // browser takes to start; live rows follow for the viewer.
    await stream.sendMany(Array.from({ length: 400 }, (_, k) => row(k + 1)));
    let next = 401;
    let stop = false;
    // Live rows, one a commit, for the viewer.
    const live = (async () => {
      while (!stop && next <= 2000) {
        await stream.send(row(next++));
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const browser = await launchChromium();
    try {
      const page = browser.context.pages()[0] ?? await browser.context.newPage();
      page.setDefaultTimeout(20_000);
      const problems: string[] = [];
      page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
      await page.goto(`${server.url}/t`);
      // The bundled client in the page: from offset 1 (replay, then live).
      const got = await page.evaluate(async (url) => {
        const { connect } = await import("/_/client.js");
        const sub = await connect(url, { offset: 1 });
        const rows: unknown[] = [];
        for await (const [offset, msg] of sub) {
          rows.push([offset, msg]);
          if (rows.length === 400) break;
        }
        const out = { compress: sub.greeting.compress, rows, wireBytes: sub.wireBytes };
        await sub.close();
        return out;
      }, `${server.url.replace("http", "ws")}/t`);
      assertEquals(got.compress, "zstd-stream");
      assertEquals(got.rows, Array.from({ length: 400 }, (_, k) => [k + 1, row(k + 1)]));
      const text = Array.from({ length: 400 }, (_, k) => `[${k + 1},${JSON.stringify(row(k + 1))}]`)
        .join("\n").length;
      assert(got.wireBytes < text / 2, `${got.wireBytes} bytes on the wire for ${text} of text`);
      // The viewer: live rows, and their bytes per row on the wire.
      await page.waitForFunction(() =>
        document.querySelectorAll("#rows tbody tr[data-offset]").length >= 20 &&
        /zstd-stream, [\d.]+ B\/row/.test(document.getElementById("wire")!.textContent!)
      );
      const wire = await page.$eval("#wire", (e) => e.textContent!);
      const perRow = Number(/([\d.]+) B\/row/.exec(wire)![1]);
      const line = `[1000,${JSON.stringify(row(1000))}]`.length;
      assert(perRow > 0 && perRow < line / 2, `${wire} (a row is ${line} characters as text)`);
      // The table shows the rows sent at their offsets.
      const shown = await page.$$eval("#rows tbody tr[data-offset]", (trs) => {
        const heads = [...document.querySelectorAll("#rows thead th")].map((th) => th.textContent);
        const col = heads.indexOf("price");
        return trs.map((
          tr,
        ) => [Number(tr.getAttribute("data-offset")), tr.children[col].textContent]);
      });
      for (const [offset, price] of shown) {
        assertEquals(Number(price), row(offset as number).price, `row ${offset}`);
      }
      assertEquals(problems, []);
    } finally {
      stop = true;
      await live;
      await browser.close();
      await server.shutdown();
      await rmrf(root);
    }
  },
});
