import { assertEquals, assertThrows } from "../../harness/assert.ts";
import { TokenTable } from "../../../server/auth.ts";

const t = (entry: Record<string, unknown>) =>
  TokenTable.parse({ tokens: [{ token: "k".repeat(20), ...entry }] });

Deno.test("grants: publish is granted by name or *, apart from reading; a bad list is refused", () => {
  const g = t({ streams: ["a"], publish: ["b"] }).lookup("k".repeat(20))!;
  assertEquals([g.mayRead("a"), g.mayPublish("a"), g.mayRead("b"), g.mayPublish("b")], [
    true,
    false,
    false,
    true,
  ]);
  const all = t({ publish: ["*"] }).lookup("k".repeat(20))!;
  assertEquals([all.mayRead("x"), all.mayPublish("x"), all.all], [false, true, false]);
  const readAll = t({ streams: ["*"] }).lookup("k".repeat(20))!;
  assertEquals(readAll.mayPublish("x"), false);
  assertThrows(() => t({}), TypeError, "streams must be a non-empty array");
  assertThrows(() => t({ publish: [] }), TypeError, "publish must be a non-empty array");
  assertThrows(() => t({ publish: ["_x"] }), TypeError, "is not a stream name");
  assertThrows(() => t({ streams: ["a"], publish: "b" }), TypeError, "publish must be");
});
