// Who may create and delete streams, checked on the portable handler with the
// remote address it is given (this machine may have no non-loopback address
// to bind a real server on): without tokens only a loopback client; with
// tokens an "admin": true grant, from any address.
import { assert, assertEquals } from "../../harness/assert.ts";
import { Logger } from "../../../common/logger.ts";
import { HttpHandler } from "../../../server/http/handler.ts";
import { checkServeOptions } from "../../../server/serve_options.ts";
import { TokenTable } from "../../../server/auth.ts";
import { Stream } from "../../../server/stream/stream.ts";
import { LocalStreamAdmin } from "../../../server/admin/local_admin.ts";
import { rmrf, tempDir } from "../../harness/util.ts";

const SCHEMA = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
const ADMIN = "admin-token-0123456789";
const READER = "reader-token-0123456789";

async function withHandler(
  tokens: TokenTable | null,
  f: (h: HttpHandler) => Promise<void>,
): Promise<void> {
  const root = await tempDir("streamcast-admin-");
  const admin = new LocalStreamAdmin({
    root,
    declared: new Map(),
    recorded: new Map(),
    maxStreams: 10,
    open: (name, d) => Promise.resolve(Stream.ephemeral(name, { schema: d.schema })),
    logger: Logger.silent(),
  });
  const handler = new HttpHandler(
    new Map(),
    checkServeOptions({ logger: Logger.silent(), tokens, streamAdmin: admin }),
    {
      upgrade: () => {
        throw new Error("no upgrades here");
      },
    },
  );
  const set = handler.streams;
  admin.attach({
    get size() {
      return set.streams.size;
    },
    get: (n) => set.streams.get(n),
    add: (s, publish) => set.add(s, { publish }),
    remove: (n, code, reason) => set.remove(n, code, reason),
  });
  try {
    await f(handler);
  } finally {
    handler.release();
    await rmrf(root);
  }
}

async function put(
  h: HttpHandler,
  name: string,
  remote: string,
  token?: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await h.handle(
    new Request(`http://h/_/streams/${name}`, {
      method: "PUT",
      headers: token ? { authorization: `Bearer ${token}` } : {},
      body: JSON.stringify({ schema: SCHEMA, ephemeral: true }),
    }),
    remote,
  );
  return { status: res.status, body: await res.json() };
}

Deno.test("streams admin: without tokens, only a client on a loopback address creates streams", async () => {
  await withHandler(null, async (h) => {
    const far = await put(h, "a", "192.0.2.7:5555");
    assertEquals([far.status, far.body.error], [403, "forbidden"]);
    assert(String(far.body.detail).includes("--tokens"), String(far.body.detail));
    assertEquals((await put(h, "a", "[fe80::1]:5555")).status, 403);
    assertEquals(h.streams.streams.size, 0);
    assertEquals((await put(h, "a", "127.0.0.1:5555")).status, 201);
    assertEquals((await put(h, "b", "[::1]:5555")).status, 201);
    assertEquals((await put(h, "c", "[::ffff:127.0.0.1]:5555")).status, 201);
    assertEquals([...h.streams.streams.keys()], ["a", "b", "c"]);
    const del = await h.handle(
      new Request("http://h/_/streams/a", { method: "DELETE" }),
      "192.0.2.7:5555",
    );
    assertEquals(del.status, 403);
    await del.body?.cancel();
  });
});

Deno.test("streams admin: with tokens, an admin grant from any address, and nothing else", async () => {
  const tokens = TokenTable.parse({
    tokens: [
      { name: "ops", token: ADMIN, admin: true },
      { name: "reader", token: READER, streams: ["*"] },
    ],
  });
  await withHandler(tokens, async (h) => {
    assertEquals((await put(h, "a", "127.0.0.1:5555")).status, 401);
    assertEquals((await put(h, "a", "127.0.0.1:5555", READER)).status, 403);
    assertEquals((await put(h, "a", "192.0.2.7:5555", ADMIN)).status, 201);
  });
});

Deno.test("streams admin: a tokens file's admin must be a boolean", () => {
  let message = "";
  try {
    TokenTable.parse({ tokens: [{ token: ADMIN, admin: "yes" }] });
  } catch (err) {
    message = (err as Error).message;
  }
  assertEquals(message, 'tokens[0].admin must be true or false, got "yes"');
  assertEquals(
    TokenTable.parse({ tokens: [{ token: ADMIN, admin: true }] }).lookup(ADMIN)?.admin,
    true,
  );
});
