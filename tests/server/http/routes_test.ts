// The route table is the one declaration of what a server answers: its doc
// table (server/http/routes.ts) and docs/SPEC.md §3.5 list every route, so
// neither can drift from it. And the router answers 404 and 405 for all.
import { assert, assertEquals } from "../../harness/assert.ts";
import { REPO } from "../../harness/demo.ts";
import { ROUTES } from "../../../server/http/routes.ts";
import { matchRoute } from "../../../server/http/router.ts";

function shown(r: (typeof ROUTES)[number]): string {
  return r.upgrade ? `WebSocket \`${r.pattern}\`` : `\`${r.method} ${r.pattern}\``;
}

Deno.test("routes: every route is in the route table's doc and in SPEC §3.5, and nothing else is", async () => {
  const code = await Deno.readTextFile(`${REPO}/server/http/routes.ts`);
  const spec = await Deno.readTextFile(`${REPO}/docs/SPEC.md`);
  const section = spec.slice(spec.indexOf("### 3.5 HTTP routes"), spec.indexOf("### 3.6"));
  const docRows = (text: string) =>
    text.split("\n").map((l) => l.replace(/^ \* /, "")).filter((l) =>
      /^\| (`(GET|POST|PUT|DELETE) \/|WebSocket `)/.test(l)
    ).map((l) => l.split(" | ")[0].slice(2).trim());
  const want = ROUTES.map(shown).sort();
  assertEquals(docRows(code).sort(), want, "server/http/routes.ts's doc table");
  assertEquals(docRows(section).sort(), want, "docs/SPEC.md §3.5");
});

Deno.test("routes: 404 and 405 come from the table, for every path and method", () => {
  const head = matchRoute(ROUTES, "GET", false, "/trades/head");
  assert(head.kind === "route" && head.route.name === "head" && head.params.name === "trades");
  const unnamed = matchRoute(ROUTES, "HEAD", false, "/_/head");
  assert(unnamed.kind === "route" && unnamed.params.name === "");
  assertEquals(matchRoute(ROUTES, "DELETE", false, "/trades/head"), {
    kind: "bad_method",
    allow: "GET, HEAD",
  });
  assertEquals(matchRoute(ROUTES, "PUT", false, "/trades"), {
    kind: "bad_method",
    allow: "POST, GET, HEAD",
  });
  assertEquals(matchRoute(ROUTES, "GET", false, "/trades/nope"), {
    kind: "no_route",
    name: "trades",
  });
  const sub = matchRoute(ROUTES, "GET", true, "/trades");
  assert(sub.kind === "route" && sub.route.upgrade && sub.route.access === "read");
  const pub = matchRoute(ROUTES, "GET", true, "/_/publish");
  assert(pub.kind === "route" && pub.route.access === "publish" && pub.params.name === "");
  assertEquals(matchRoute(ROUTES, "GET", true, "/trades/head").kind, "no_route");
  assertEquals(matchRoute(ROUTES, "GET", false, "/%zz").kind, "bad_path");
});
