// Streams created and deleted while serving, through real `serve` processes
// and real sockets: PUT/DELETE /_/streams/{name}, ROOT/streams.json across a
// restart, a subscriber open when its stream is deleted (4410) beside one of
// another stream (untouched), the answers (409, 400, 413, 404), tokens with
// and without "admin", the start refused for a name declared and recorded
// differently, and the `streams` command.
import { assert, assertEquals } from "../harness/assert.ts";
import { CLI, runServe, startServe } from "../harness/serve.ts";
import { TestSub } from "../harness/subscriber.ts";
import { freePort, rmrf, tempDir } from "../harness/util.ts";

function assertMatch(text: string, pattern: RegExp): void {
  assert(pattern.test(text), `${JSON.stringify(text)} does not match ${pattern}`);
}

const SCHEMA = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
const GROWN = {
  type: "object",
  properties: { v: { type: "number" }, note: { type: ["string", "null"] } },
  required: ["v", "note"],
};

async function put(
  url: string,
  name: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/_/streams/${name}`, {
    method: "PUT",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function del(
  url: string,
  name: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> | null }> {
  const res = await fetch(`${url}/_/streams/${name}`, { method: "DELETE", headers });
  const text = await res.text();
  return { status: res.status, body: text === "" ? null : JSON.parse(text) };
}

async function postRows(url: string, name: string, rows: unknown[]): Promise<number> {
  const res = await fetch(`${url}/${name}`, {
    method: "POST",
    headers: { "content-type": "application/x-ndjson" },
    body: rows.map((r) => JSON.stringify(r)).join("\n") + "\n",
  });
  await res.body?.cancel();
  return res.status;
}

async function getJson(url: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.json() };
}

async function withRoot(f: (root: string, schemaFile: string) => Promise<void>): Promise<void> {
  const root = await tempDir("streamcast-streams-");
  const schemaFile = `${root}/t.json`;
  await Deno.writeTextFile(schemaFile, JSON.stringify(SCHEMA));
  try {
    await f(`${root}/data`, schemaFile);
  } finally {
    await rmrf(root);
  }
}

Deno.test("serve: a created stream is published to, subscribed, served again after a restart, deleted with a subscriber open, and created again", async () => {
  await withRoot(async (root, schemaFile) => {
    const args = ["--stream", `t=${schemaFile}`, "--publish", "t", "--root", root];
    let a = await startServe([...args, "--port", String(freePort())]);
    try {
      const created = await put(a.url, "q", { schema: SCHEMA, publish: true });
      assertEquals(created.status, 201);
      assertEquals(created.body.stream, "q");
      const id = created.body.stream_id as string;
      assertMatch(id, /^[0-9a-f]{32}$/);
      const sub = await TestSub.open(`${a.ws}/q`);
      assertEquals(await postRows(a.url, "q", [{ v: 1 }, { v: 2 }]), 200);
      await sub.waitLines(2);
      assertEquals(sub.offsets(), [1, 2]);
      await sub.close();
      const listed = (await getJson(`${a.url}/_/streams`)).body as Record<string, unknown>[];
      assertEquals(listed.map((h) => [h.stream, h.declared]), [["t", true], ["q", false]]);
      assertEquals((listed[1].definition as Record<string, unknown>).publish, true);
      const file = JSON.parse(await Deno.readTextFile(`${root}/streams.json`));
      assertEquals(Object.keys(file.streams), ["q"]);
      assertEquals((await a.signal("SIGTERM")).code, 0);

      // Served again from streams.json, with its history.
      a = await startServe([...args, "--port", String(freePort())]);
      const head = (await getJson(`${a.url}/q/head`)).body as Record<string, unknown>;
      assertEquals([head.stream_id, head.end_offset, head.publish], [id, 3, true]);
      const again = await put(a.url, "q", { schema: SCHEMA, publish: true });
      assertEquals([again.status, again.body.stream_id], [200, id]);
      // A nullable column added at the end: 200, the new version from the next row.
      const watcher = await TestSub.open(`${a.ws}/q`);
      const grown = await put(a.url, "q", { schema: GROWN, publish: true });
      assertEquals([grown.status, grown.body.stream_id], [200, id]);
      assertEquals((await watcher.done).code, 1001); // reopened: it resumes where it was
      const versions = ((await getJson(`${a.url}/q/head`)).body as Record<string, unknown>)
        .schema_versions as { from: number }[];
      assertEquals(versions.map((v) => v.from), [1, 3]);
      assertEquals(await postRows(a.url, "q", [{ v: 3, note: "grown" }]), 200);

      // Deleted with a subscriber open on it and one on another stream.
      const doomed = await TestSub.open(`${a.ws}/q?offset=1`);
      await doomed.waitLines(3);
      const other = await TestSub.open(`${a.ws}/t`);
      const publisher = new WebSocket(`${a.ws}/q/publish?producer=p1`);
      const publisherClosed = new Promise<CloseEvent>((r) => (publisher.onclose = r));
      await new Promise((r) => (publisher.onmessage = r)); // its greeting
      const gone = await del(a.url, "q");
      assertEquals(gone.status, 204);
      const closed = await doomed.done;
      assertEquals(closed.code, 4410);
      assertEquals(JSON.parse(closed.reason), { error: "stream_deleted" });
      const pubClose = await publisherClosed;
      assertEquals([pubClose.code, pubClose.reason], [4410, '{"error":"stream_deleted"}']);
      assertEquals(await postRows(a.url, "q", [{ v: 3 }]), 404);
      assertEquals((await getJson(`${a.url}/q/head`)).status, 404);
      // The other stream's subscriber is untouched: it gets the next row.
      assertEquals(await postRows(a.url, "t", [{ v: 9 }]), 200);
      await other.waitLines(1);
      assertEquals([other.closed, other.offsets()], [null, [1]]);
      await other.close();
      let removed = false;
      try {
        await Deno.stat(`${root}/q`);
      } catch (err) {
        removed = err instanceof Deno.errors.NotFound;
      }
      assert(removed, "the deleted stream's folder is removed");
      const after = JSON.parse(await Deno.readTextFile(`${root}/streams.json`));
      assertEquals(after.streams, {});
      const health = (await getJson(`${a.url}/_/health`)).body as Record<string, unknown>;
      assertEquals(health.streams, 1);
      // No series of the deleted stream is left: names that come and go do not pile up.
      const left = (await (await fetch(`${a.url}/_/metrics`)).text()).split("\n")
        .filter((l) => l.includes('stream="q"'));
      assertEquals(left, []);

      // Created again: a new stream, from offset 1.
      const anew = await put(a.url, "q", { schema: SCHEMA, publish: true });
      assertEquals(anew.status, 201);
      assert(anew.body.stream_id !== id, "a new stream id");
      const fresh = (await getJson(`${a.url}/q/head`)).body as Record<string, unknown>;
      assertEquals(fresh.end_offset, 1);
      const metrics = await (await fetch(`${a.url}/_/metrics`)).text();
      assert(metrics.includes('stream="q"'), "the new stream's series are served");
    } finally {
      await a.stop();
    }
  });
});

Deno.test("serve: PUT and DELETE /_/streams answer conflicts, a grown schema, bad names and bodies, declared streams and too many", async () => {
  await withRoot(async (root, schemaFile) => {
    const a = await startServe([
      "--stream",
      `t=${schemaFile}`,
      "--root",
      root,
      "--max-streams",
      "2",
      "--port",
      String(freePort()),
    ]);
    try {
      assertEquals((await put(a.url, "q", { schema: SCHEMA })).status, 201);
      // Another definition: 409 naming the difference.
      const flag = await put(a.url, "q", { schema: SCHEMA, ephemeral: true });
      assertEquals(flag.status, 409);
      assertEquals(flag.body.error, "conflict");
      assertMatch(flag.body.detail as string, /ephemeral/);
      const retyped = { ...SCHEMA, properties: { v: { type: "string" } } };
      const typed = await put(a.url, "q", { schema: retyped });
      assertEquals(typed.status, 409);
      assertMatch(typed.body.detail as string, /column "v" changes type/);
      // A nullable column added at the end: 200, from the next row.
      assertEquals(await postRows(a.url, "q", [{ v: 1 }]), 405); // not opened for publishing
      const grown = await put(a.url, "q", { schema: GROWN });
      assertEquals(grown.status, 200);
      const head = (await getJson(`${a.url}/q/head`)).body as Record<string, unknown>;
      assertEquals((head.schema_versions as unknown[]).length, 1); // no row yet: replaced
      assertEquals(head.schema, GROWN);
      // Bad names and bodies: 400, each naming what is wrong.
      const bad: [string, unknown, RegExp][] = [
        ["_x", { schema: SCHEMA }, /stream name "_x" is not/],
        ["streams.json", { schema: SCHEMA }, /taken by ROOT\/streams\.json/],
        ["ok", "{not json", /not JSON/],
        ["ok", [1], /must be a JSON object/],
        ["ok", {}, /"schema" is required/],
        ["ok", { schema: SCHEMA, colour: "red" }, /unknown field "colour"/],
        ["ok", { schema: { type: "string" } }, /schema is refused/],
        ["ok", { schema: SCHEMA, publish: "yes" }, /publish must be true or false/],
        ["ok", { schema: SCHEMA, retainAge: "soon" }, /retainAge must be a duration like 90s/],
        ["ok", { schema: SCHEMA, retainBytes: -1 }, /retainBytes must be a size like 500MB/],
        // Past the bounds: the value and the bound named.
        ["ok", { schema: SCHEMA, retainAge: 1e-300 }, /retainAge must be at least 1 s, got 1e-300/],
        [
          "ok",
          { schema: SCHEMA, retainAge: 1e300 },
          /retainAge must be at most 100 years \(3153600000 s = 36500d\), got 1e\+300/,
        ],
        [
          "ok",
          { schema: SCHEMA, retainBytes: 1e300 },
          /retainBytes must be at most 1PiB .*got 1e\+300/,
        ],
        ["ok", { schema: SCHEMA, retainBytes: "1000B" }, /retainBytes must be at least 1KiB/],
        ["ok", { schema: SCHEMA, key: ["w"] }, /key: key column "w" is not a column/],
        ["ok", { schema: SCHEMA, ephemeral: true, publish: true }, /publish needs a durable/],
      ];
      for (const [name, body, detail] of bad) {
        const r = await put(a.url, name, body);
        assertEquals(
          [r.status, r.body.error],
          [400, "bad_request"],
          `${name} ${JSON.stringify(body)}`,
        );
        assertMatch(r.body.detail as string, detail);
      }
      const big = await put(a.url, "ok", { schema: SCHEMA, pad: "x".repeat(2 << 20) });
      assertEquals([big.status, big.body.error], [413, "too_large"]);
      // Declared streams: neither changed nor deleted here.
      const changed = await put(a.url, "t", { schema: GROWN });
      assertEquals([changed.status, changed.body.error], [409, "declared"]);
      assertEquals((await put(a.url, "t", { schema: SCHEMA })).status, 200);
      const undeletable = await del(a.url, "t");
      assertEquals([undeletable.status, undeletable.body?.error], [409, "declared"]);
      assertEquals((await del(a.url, "nope")).status, 404);
      // t and q are served: a third is one too many.
      const third = await put(a.url, "r", { schema: SCHEMA });
      assertEquals([third.status, third.body.error], [409, "too_many_streams"]);
      assertEquals((await del(a.url, "q")).status, 204);
      assertEquals((await put(a.url, "r", { schema: SCHEMA, ephemeral: true })).status, 201);
      const r = (await getJson(`${a.url}/r/head`)).body as Record<string, unknown>;
      assertEquals([r.durable, r.stream_id], [false, null]);
    } finally {
      await a.stop();
    }
  });
});

Deno.test("serve: with --tokens only an admin token creates and deletes streams", async () => {
  await withRoot(async (root, schemaFile) => {
    const tokens = `${root}.tokens.json`;
    const admin = "admin-token-0123456789";
    const reader = "reader-token-0123456789";
    await Deno.writeTextFile(
      tokens,
      JSON.stringify({
        tokens: [
          { name: "ops", token: admin, admin: true },
          { name: "reader", token: reader, streams: ["*"], publish: ["*"] },
        ],
      }),
    );
    const a = await startServe([
      "--stream",
      `t=${schemaFile}`,
      "--root",
      root,
      "--tokens",
      tokens,
      "--port",
      String(freePort()),
    ]);
    try {
      const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
      assertEquals((await put(a.url, "q", { schema: SCHEMA })).status, 401);
      const denied = await put(a.url, "q", { schema: SCHEMA }, bearer(reader));
      assertEquals([denied.status, denied.body.error], [403, "forbidden"]);
      assertEquals((await put(a.url, "q", { schema: SCHEMA }, bearer(admin))).status, 201);
      assertEquals((await del(a.url, "q", bearer(reader))).status, 403);
      // Administering grants no reading.
      const head = await fetch(`${a.url}/q/head`, { headers: bearer(admin) });
      await head.body?.cancel();
      assertEquals(head.status, 403);
      const shown = await fetch(`${a.url}/_/streams/q`, { headers: bearer(admin) });
      await shown.body?.cancel();
      assertEquals(shown.status, 403);
      const read = await fetch(`${a.url}/_/streams/q`, { headers: bearer(reader) });
      assertEquals([read.status, (await read.json()).stream], [200, "q"]);
      const anonymous = await fetch(`${a.url}/_/streams/q`);
      await anonymous.body?.cancel();
      assertEquals(anonymous.status, 401);
      assertEquals((await del(a.url, "q", bearer(admin))).status, 204);
    } finally {
      await a.stop();
      await Deno.remove(tokens);
    }
  });
});

Deno.test("serve: a stream declared and recorded in streams.json with another definition stops the start", async () => {
  await withRoot(async (root, schemaFile) => {
    await Deno.mkdir(root, { recursive: true });
    await Deno.writeTextFile(
      `${root}/streams.json`,
      JSON.stringify({ format: 1, streams: { t: { schema: GROWN } } }),
    );
    const { code, stderr } = await runServe([
      "--stream",
      `t=${schemaFile}`,
      "--root",
      root,
      "--port",
      String(freePort()),
    ]);
    assertEquals(code, 2);
    const lines = stderr.trim().split("\n");
    assertEquals(lines.length, 1, stderr);
    assertMatch(
      lines[0],
      /^streamcast serve: stream "t" is declared and also recorded in .*streams\.json/,
    );
  });
});

async function streamsCmd(
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "streams", ...args],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

Deno.test("cli streams: create, list, show and delete against a running server", async () => {
  await withRoot(async (root, schemaFile) => {
    const a = await startServe([
      "--stream",
      `t=${schemaFile}`,
      "--root",
      root,
      "--port",
      String(freePort()),
    ]);
    try {
      const made = await streamsCmd([
        "create",
        a.url,
        "q",
        "--schema",
        schemaFile,
        "--publish",
        "--retain-age",
        "1h",
        "--retain-bytes",
        "64MiB",
      ]);
      assertEquals(made.code, 0, made.stderr);
      assertEquals(JSON.parse(made.stdout).stream, "q");
      const listed = await streamsCmd(["list", a.url]);
      assertEquals(listed.code, 0, listed.stderr);
      const q = JSON.parse(listed.stdout).find((h: { stream: string }) => h.stream === "q");
      assertEquals([q.definition.retainAge, q.definition.retainBytes], [3600, 64 << 20]);
      // One stream, as the list shows it.
      const shown = await streamsCmd(["show", a.url, "q"]);
      assertEquals(shown.code, 0, shown.stderr);
      assertEquals(JSON.parse(shown.stdout), q);
      const declared = await getJson(`${a.url}/_/streams/t`);
      assertEquals(declared.status, 200);
      assertEquals(
        [
          (declared.body as Record<string, unknown>).stream,
          (declared.body as Record<string, unknown>).declared,
        ],
        ["t", true],
      );
      const unknown = await streamsCmd(["show", a.url, "nope"]);
      assertEquals(unknown.code, 1);
      assertMatch(unknown.stderr, /^streamcast streams: show nope: HTTP 404 /);
      const refused = await streamsCmd(["delete", a.url, "t"]);
      assertEquals(refused.code, 1);
      assertMatch(refused.stderr, /^streamcast streams: delete t: HTTP 409 declared: /);
      const gone = await streamsCmd(["delete", a.url, "q"]);
      assertEquals([gone.code, gone.stdout], [0, ""]);
      const usage = await streamsCmd(["create", a.url, "q"]);
      assertEquals(usage.code, 2);
      assertMatch(usage.stderr, /needs --schema FILE/);
      const help = await streamsCmd(["--help"]);
      assertEquals(help.code, 0);
      assertMatch(help.stdout, /streams create URL NAME --schema FILE/);
    } finally {
      await a.stop();
    }
  });
});

Deno.test("serve: a stream created with a key keeps its latest row per key; a key column it cannot key on is a 400", async () => {
  await withRoot(async (root, schemaFile) => {
    const args = ["--stream", `t=${schemaFile}`, "--root", root, "--port", String(freePort())];
    const a = await startServe(args);
    try {
      const quotes = {
        type: "object",
        properties: {
          sym: { type: "string" },
          px: { type: "number" },
          note: { type: ["string", "null"] },
        },
        required: ["sym", "px", "note"],
      };
      const nullable = await put(a.url, "q", { schema: quotes, key: ["note"] });
      assertEquals(nullable.status, 400);
      assertMatch(String(nullable.body.detail), /key column "note" is nullable/);
      const number = await put(a.url, "q", { schema: quotes, key: ["px"] });
      assertEquals(number.status, 400);
      assertMatch(String(number.body.detail), /key column "px" is double/);
      const ephemeral = await put(a.url, "q", { schema: quotes, key: ["sym"], ephemeral: true });
      assertEquals(ephemeral.status, 400);
      assertMatch(String(ephemeral.body.detail), /key needs a durable stream/);
      assertEquals(
        (await put(a.url, "q", { schema: quotes, key: ["sym"], publish: true })).status,
        201,
      );
      const rows = [
        { sym: "a", px: 1, note: null },
        { sym: "b", px: 2, note: null },
        { sym: "a", px: 3, note: "x" },
      ];
      assertEquals(await postRows(a.url, "q", rows), 200);
      const res = await fetch(`${a.url}/q/latest`);
      assertEquals(res.status, 200);
      assertEquals(res.headers.get("streamcast-end"), "4");
      assertEquals((await res.text()).trim().split("\n"), [
        `[2,{"sym":"b","px":2,"note":null}]`,
        `[3,{"sym":"a","px":3,"note":"x"}]`,
      ]);
    } finally {
      await a.stop();
    }
  });
});

Deno.test("serve: with no stream declared it starts empty, says so, and serves the streams created", async () => {
  await withRoot(async (root) => {
    const a = await startServe(["--root", root, "--port", String(freePort())]);
    try {
      assertMatch(a.stderr(), /no stream declared: serving none until one is created/);
      assertEquals((await getJson(`${a.url}/_/health`)).body, { ok: true, streams: 0 });
      assertEquals((await getJson(`${a.url}/_/streams`)).body, []);
      assertEquals((await put(a.url, "q", { schema: SCHEMA, publish: true })).status, 201);
      const sub = await TestSub.open(`${a.ws}/q`);
      assertEquals(await postRows(a.url, "q", [{ v: 1 }]), 200);
      await sub.waitLines(1);
      assertEquals(sub.offsets(), [1]);
      await sub.close();
    } finally {
      await a.stop();
    }
  });
});

Deno.test("serve: a definition given again with another description or order of required is the same: 200, its subscribers stay open", async () => {
  await withRoot(async (root, schemaFile) => {
    const args = ["--stream", `t=${schemaFile}`, "--root", root, "--port", String(freePort())];
    const a = await startServe(args);
    try {
      const grown = await put(a.url, "q", { schema: GROWN, publish: true });
      assertEquals(grown.status, 201);
      const sub = await TestSub.open(`${a.ws}/q`);
      const annotated = {
        ...GROWN,
        title: "quotes",
        description: "one row per quote",
        properties: {
          v: { type: "number", description: "the value" },
          note: { type: ["string", "null"], title: "a note" },
        },
        required: ["note", "v"],
      };
      const again = await put(a.url, "q", { schema: annotated, publish: true });
      assertEquals([again.status, again.body.stream_id], [200, grown.body.stream_id]);
      // Still open: the next row reaches it, and it was never closed.
      assertEquals(await postRows(a.url, "q", [{ v: 1, note: null }]), 200);
      await sub.waitLines(1);
      assertEquals([sub.offsets(), sub.closed], [[1], null]);
      // The definition in force is kept, annotations and all; one schema version.
      const head = (await getJson(`${a.url}/q/head`)).body as Record<string, unknown>;
      assertEquals((head.schema_versions as unknown[]).length, 1);
      assertEquals(head.schema, GROWN);
      assert(!a.stderr().includes("stream_schema_grown"), a.stderr());
      // A changed constraint is a change of the rows accepted: the stream takes it (reopened).
      const bounded = {
        ...GROWN,
        properties: { v: { type: "number", minimum: 0 }, note: { type: ["string", "null"] } },
      };
      assertEquals((await put(a.url, "q", { schema: bounded, publish: true })).status, 200);
      assertEquals((await sub.done).code, 1001);
      assertEquals(await postRows(a.url, "q", [{ v: -1, note: null }]), 400);
      // Columns swapped are never the same, whatever the text's key order.
      const swapped = {
        ...bounded,
        properties: { note: { type: ["string", "null"] }, v: { type: "number", minimum: 0 } },
      };
      const refused = await put(a.url, "q", { schema: swapped, publish: true });
      assertEquals(refused.status, 409);
      assertMatch(refused.body.detail as string, /column "v" moves from position 1 to 2/);
    } finally {
      await a.signal("SIGTERM");
    }
  });
});
