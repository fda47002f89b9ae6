import { assertEquals, assertThrows } from "./_assert.ts";
import handler from "../examples/binance_trades.ts";
import { compileSchema } from "../schema/compile.ts";

Deno.test("examples: the Binance handler makes rows the example schema accepts", async () => {
  const schema = compileSchema(
    JSON.parse(await Deno.readTextFile(new URL("../examples/trades.json", import.meta.url))),
  );
  const row = handler(
    '{"e":"trade","E":1672515782136,"s":"BTCUSDT","t":12345,"p":"85565.01","q":"0.015","T":1672515782136,"m":true,"M":true}',
  );
  assertEquals(row, {
    event_ts: 1672515782136000,
    symbol: "BTCUSDT",
    price: 85565.01,
    amount: 0.015,
    side: 0,
    trade_id: 12345,
  });
  assertEquals(schema.validate(row), null);
  assertEquals(handler('{"result":null,"id":1}'), null);
  assertThrows(() => handler("not json"), SyntaxError);
});
