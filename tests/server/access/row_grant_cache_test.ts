// Compiled row-level grant filters are shared (server/access/where_cache.ts),
// yet never across schemas: on a real `serve` process, the same filter in
// one token fits one stream and is refused on another whose column has
// another type, in either order; a grant naming a column a stream lacks is
// refused until the stream's schema grows that column, then applies. The
// cache itself: least recently used goes first, a schema that is not frozen
// is never cached.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { serveCli, type Served } from "../../harness/security.ts";
import { secretText, sign } from "../../harness/jwt.ts";
import { WhereCache } from "../../../server/access/where_cache.ts";
import { OUTSIDE_GRANT_DETAIL } from "../../../server/access/row_grant.ts";

async function put(s: Served, token: string, name: string, schema: unknown): Promise<number> {
  const res = await fetch(`${s.url}/_/streams/${name}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ schema, publish: true }),
  });
  await res.body?.cancel();
  return res.status;
}

async function post(
  s: Served,
  token: string,
  name: string,
  rows: unknown[],
): Promise<{ status: number; detail: string | undefined }> {
  const res = await fetch(`${s.url}/${name}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/x-ndjson" },
    body: rows.map((x) => JSON.stringify(x)).join("\n") + "\n",
  });
  const body = await res.json();
  return { status: res.status, detail: body.detail };
}

const schemaOf = (props: Record<string, unknown>) => ({
  type: "object",
  properties: props,
  required: Object.keys(props),
});

Deno.test("row-level grant cache: one filter compiled per schema, never across streams, afresh after a schema grows", async () => {
  const dir = await tempDir();
  const secretFile = join(dir, "secret");
  const text = secretText();
  await Deno.writeTextFile(secretFile, text);
  const secret = new TextEncoder().encode(text);
  const s = await serveCli([
    ...["--root", join(dir, "data"), "--port", "0", "--jwt-secret-file", secretFile],
  ]);
  try {
    const admin = await sign(secret, { sub: "ops", streamcast: { admin: true } });
    const num = schemaOf({ px: { type: "integer" } });
    const str = schemaOf({ px: { type: "string" } });
    for (const [name, schema] of [["n1", num], ["s1", str], ["s2", str], ["n2", num]] as const) {
      assertEquals(await put(s, admin, name, schema), 201, name);
    }
    // The same filter text for four streams; the integer streams first in one
    // pair, the string streams first in the other.
    const where = { px: 5 };
    const holder = await sign(secret, {
      sub: "desk",
      streamcast: {
        read: ["*"],
        publish: ["*"],
        where: { n1: where, s1: where, s2: where, n2: where },
      },
    });
    assertEquals(await post(s, holder, "n1", [{ px: 5 }]), { status: 200, detail: undefined });
    const s1 = await post(s, holder, "s1", [{ px: "5" }]);
    assertEquals(s1.status, 403);
    assert(s1.detail?.startsWith("row-level grant: where: "), JSON.stringify(s1));
    assert(s1.detail !== OUTSIDE_GRANT_DETAIL, JSON.stringify(s1));
    assertEquals(await post(s, holder, "s2", [{ px: "5" }]), s1);
    assertEquals(await post(s, holder, "n2", [{ px: 5 }]), { status: 200, detail: undefined });
    assertEquals((await post(s, holder, "n2", [{ px: 6 }])).detail, OUTSIDE_GRANT_DETAIL);

    // A grant on a column the stream does not have yet, then has.
    assertEquals(await put(s, admin, "g", num), 201);
    const noted = await sign(secret, {
      sub: "notes",
      streamcast: { read: ["g"], publish: ["g"], where: { g: { note: "x" } } },
    });
    const before = await post(s, noted, "g", [{ px: 1 }]);
    assertEquals(before, { status: 403, detail: "row-level grant: where: unknown column note" });
    const grown = {
      type: "object",
      properties: { px: { type: "integer" }, note: { type: ["string", "null"] } },
      required: ["px", "note"],
    };
    assertEquals(await put(s, admin, "g", grown), 200);
    assertEquals(await post(s, noted, "g", [{ px: 1, note: "x" }]), {
      status: 200,
      detail: undefined,
    });
    assertEquals((await post(s, noted, "g", [{ px: 1, note: "y" }])).detail, OUTSIDE_GRANT_DETAIL);
  } finally {
    await s.stop();
    await rmrf(dir);
  }
});

Deno.test("where cache: the least recently used entry goes first; unfrozen schemas are not kept", () => {
  const cache = new WhereCache<string>(2);
  const schema = Object.freeze({ type: "object" });
  const made: string[] = [];
  const get = (w: Record<string, unknown>, s: Record<string, unknown> = schema) =>
    cache.get(s, w, () => {
      const text = JSON.stringify(w);
      made.push(text);
      return text;
    });
  get({ a: 1 });
  get({ b: 1 });
  get({ a: 1 }); // a is now the most recent
  get({ c: 1 }); // evicts b
  assertEquals(cache.size, 2);
  get({ a: 1 });
  get({ b: 1 });
  assertEquals(made, ['{"a":1}', '{"b":1}', '{"c":1}', '{"b":1}']);
  // Key order does not matter; an equal but distinct schema object does.
  const two = new WhereCache<number>(8);
  let n = 0;
  two.get(schema, { x: 1, y: { lt: 2, gt: 0 } }, () => ++n);
  two.get(schema, { y: { gt: 0, lt: 2 }, x: 1 }, () => ++n);
  assertEquals(n, 1);
  two.get(Object.freeze({ type: "object" }), { x: 1, y: { lt: 2, gt: 0 } }, () => ++n);
  assertEquals(n, 2);
  const loose = { type: "object" };
  two.get(loose, { x: 1 }, () => ++n);
  two.get(loose, { x: 1 }, () => ++n);
  assertEquals(n, 4);
});
