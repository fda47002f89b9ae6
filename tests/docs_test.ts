import { assertEquals } from "./harness/assert.ts";
import { regenerate } from "../docs/gen_api.ts";

Deno.test("docs API.md lists every export of every entry point (deno task docs)", async () => {
  const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
  const { before, after } = await regenerate(root);
  assertEquals(before, after, "docs/API.md is stale: run `deno task docs`");
});
