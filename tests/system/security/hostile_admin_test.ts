// Hostile requests to the admin routes of a real `serve` process
// (PUT/DELETE /_/streams/NAME, docs/SPEC.md 3.13): bodies that are not JSON,
// not objects, with unknown fields, fields of the wrong type, schemas nested
// tens of thousands deep, bad retention values and key columns; names that
// are too long, hold characters a name may not, or play tricks with the
// path. Each must get a 4xx naming what was wrong (a 400's detail bounded),
// never a 5xx; the valid ones among them create and delete streams as a
// model of the server's streams says; and the streams there before — one
// declared, two created, with rows — are untouched after. Seeded
// (tests/harness/seeds.ts): a fresh seed every run plus the regression
// seeds; STREAMCAST_FUZZ_SEED=N replays seed N.
import { assert, assertEquals } from "../../harness/assert.ts";
import { caseName, caseRng, type FuzzCase, fuzzCases, seedBanner } from "../../harness/seeds.ts";
import { rawRequest, row, SCHEMA } from "../../harness/security.ts";
import { type JwtServe, serveWithJwt } from "../../harness/jwt_serve.ts";
import { isStreamName } from "../../../wire/stream_name.ts";
import { MAX_SCHEMA_DEPTH } from "../../../schema/rules.ts";
import { MAX_DEFINITION_BYTES } from "../../../server/stream_definition.ts";
import { MAX_DETAIL_CHARS } from "../../../server/http/streams_admin.ts";

console.log(seedBanner("hostile admin"));

const SMALL = {
  type: "object",
  properties: { seq: { type: "integer" }, sym: { type: "string" }, px: { type: "number" } },
  required: ["seq", "sym", "px"],
  additionalProperties: false,
};

// JSON.parse makes "__proto__" an own property, as a request body's parse does.
const ODD = JSON.parse(
  '{"type":"object","properties":{"__proto__":{"type":"string"},"constructor":{"type":"integer"}},' +
    '"required":["__proto__","constructor"],"additionalProperties":false}',
);

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)];
}

function int(r: () => number, lo: number, hi: number): number {
  return lo + Math.floor(r() * (hi - lo + 1));
}

const NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";

function randomText(r: () => number, alphabet: string, n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += alphabet[Math.floor(r() * alphabet.length)];
  return s;
}

/** JSON text nesting `depth` levels of arrays or objects around `inner`. */
function nested(r: () => number, depth: number, inner: string): string {
  return r() < 0.5
    ? "[".repeat(depth) + inner + "]".repeat(depth)
    : '{"a":'.repeat(depth) + inner + "}".repeat(depth);
}

/** A schema whose column `x` nests `levels` object or array levels deep. */
function deepSchema(r: () => number, levels: number): string {
  const arrays = r() < 0.5;
  const open = arrays
    ? '{"type":"array","items":'
    : '{"type":"object","required":["a"],"properties":{"a":';
  const close = arrays ? "}" : "}}";
  return `{"type":"object","required":["x"],"properties":{"x":${
    open.repeat(levels)
  }{"type":"integer"}${close.repeat(levels)}}}`;
}

/** A request to the admin routes and what it must get. */
interface Hostile {
  kind: string;
  method: "PUT" | "DELETE";
  /** The raw request target. */
  target: string;
  body?: string | Uint8Array;
  /** The status wanted: one of them. */
  statuses: number[];
  /** A text the 400's detail must hold (null: any). */
  names: string | null;
  /** What the model does when it is answered: a stream created or deleted. */
  creates?: { name: string; definition: Record<string, unknown> };
  deletes?: string;
}

const enc = new TextEncoder();

/** A bad body: its text and the words the 400 must name. */
function badBody(r: () => number): { kind: string; body: string | Uint8Array; names: string } {
  const schema = JSON.stringify(SMALL);
  const kinds = [
    "not_json",
    "not_utf8",
    "not_object",
    "unknown_fields",
    "no_schema",
    "schema_not_object",
    "deep_schema",
    "deep_keyword",
    "deep_field",
    "bad_schema",
    "flag_type",
    "retain_age",
    "retain_bytes",
    "bad_key",
    "ephemeral_durable",
  ] as const;
  const kind = pick(r, kinds);
  switch (kind) {
    case "not_json": {
      const body = pick(r, [
        "",
        "{",
        `{"schema": ${schema}`,
        "{'schema': 1}",
        "schema=1",
        `${schema}}`,
        "[1,]",
        "NaN",
        randomText(r, '{}[]":,ab01 \n', int(r, 1, 200)),
      ]);
      // A random text may happen to be JSON: then it is not an object (or has no schema).
      try {
        const v = JSON.parse(body);
        const names = typeof v === "object" && v !== null && !Array.isArray(v)
          ? '"schema" is required'
          : "must be a JSON object";
        return { kind, body, names };
      } catch {
        return { kind, body, names: "the body is not JSON" };
      }
    }
    case "not_utf8": {
      const bytes = enc.encode(`{"schema": ${schema}, "x": "é"}`);
      bytes[bytes.length - 3] = 0xff;
      return { kind, body: bytes, names: "the body is not JSON" };
    }
    case "not_object":
      return {
        kind,
        body: pick(r, ["[]", "1", '"schema"', "null", "true", `[${schema}]`]),
        names: "must be a JSON object",
      };
    case "unknown_fields": {
      const field = pick(r, [
        "schemas",
        "retain_age",
        "Schema",
        "__proto__",
        "constructor",
        "x".repeat(int(r, 1, 100_000)),
        "é",
      ]);
      const body = `{"schema": ${schema}, ${JSON.stringify(field)}: ${
        pick(r, ["1", "null", "{}", nested(r, int(r, 1, 20_000), "1")])
      }}`;
      return { kind, body, names: "unknown field" };
    }
    case "no_schema":
      return {
        kind,
        body: pick(r, ["{}", '{"publish": true}', '{"key": ["seq"]}']),
        names: '"schema" is required',
      };
    case "schema_not_object":
      return {
        kind,
        body: `{"schema": ${pick(r, ["[]", "1", '"object"', "null", "true", `[${schema}]`])}}`,
        names: "schema must be a JSON Schema object",
      };
    case "deep_schema":
      // Nested columns past the schema's depth: refused before anything recurses.
      return {
        kind,
        body: `{"schema": ${deepSchema(r, int(r, MAX_SCHEMA_DEPTH, 60_000))}}`,
        names: `nests deeper than ${MAX_SCHEMA_DEPTH} levels`,
      };
    case "deep_keyword": {
      const keyword = pick(r, ["description", "enum", "examples", "items", "title"]);
      const inner = nested(r, int(r, MAX_SCHEMA_DEPTH, 60_000), "1");
      const body =
        `{"schema": {"type":"object","required":["x"],"properties":{"x":{"type":"integer","${keyword}":${inner}}}}}`;
      return { kind, body, names: `nests deeper than ${MAX_SCHEMA_DEPTH} levels` };
    }
    case "deep_field": {
      const field = pick(r, ["publish", "ephemeral", "iceberg", "retainAge", "retainBytes", "key"]);
      const body = `{"schema": ${schema}, "${field}": ${nested(r, int(r, 2, 60_000), "1")}}`;
      return { kind, body, names: field };
    }
    case "bad_schema": {
      const broken = structuredClone(SMALL) as Record<string, unknown>;
      const props = broken.properties as Record<string, Record<string, unknown>>;
      switch (int(r, 0, 5)) {
        case 0:
          props.sym = { type: "strin" };
          break;
        case 1:
          broken.required = ["seq", "sym"];
          break;
        case 2:
          broken.additionalProperties = true;
          break;
        case 3:
          props.px = { type: "number", default: 1 };
          break;
        case 4:
          broken.properties = {};
          break;
        case 5:
          props["0"] = { type: "integer" };
          (broken.required as string[]).push("0");
          break;
      }
      return { kind, body: JSON.stringify({ schema: broken }), names: "schema is refused" };
    }
    case "flag_type": {
      const field = pick(r, ["publish", "ephemeral", "iceberg"]);
      const value = pick(r, [
        '"true"',
        "1",
        "0",
        "null",
        "[]",
        "{}",
        JSON.stringify("y".repeat(int(r, 1, 200_000))),
      ]);
      return {
        kind,
        body: `{"schema": ${schema}, "${field}": ${value}}`,
        names: `${field} must be true or false`,
      };
    }
    case "retain_age": {
      const value = pick(r, [
        "0",
        "-1",
        '"0s"',
        '"soon"',
        '"-5m"',
        '"1y"',
        '"1e3s"',
        '""',
        "true",
        "[]",
        "{}",
        "1e400",
        "-1e400",
        "1e-300",
        "1e300",
        "0.5",
        '"36501d"',
        JSON.stringify("9".repeat(int(r, 400, 100_000))),
      ]);
      return { kind, body: `{"schema": ${schema}, "retainAge": ${value}}`, names: "retainAge" };
    }
    case "retain_bytes": {
      const value = pick(r, [
        "0",
        "-5",
        "0.4",
        '"5XB"',
        '"lots"',
        '"1e9"',
        "false",
        "{}",
        String(2 ** 60),
        "1e400",
        "1e300",
        "1023",
        '"2PiB"',
        JSON.stringify("MB".repeat(int(r, 1, 100_000))),
      ]);
      return { kind, body: `{"schema": ${schema}, "retainBytes": ${value}}`, names: "retainBytes" };
    }
    case "bad_key": {
      const value = pick(r, [
        "[]",
        '"sym"',
        "[1]",
        '["nope"]',
        '["px"]',
        '["seq", "seq"]',
        "{}",
        JSON.stringify(["k".repeat(int(r, 1, 100_000))]),
      ]);
      return { kind, body: `{"schema": ${schema}, "key": ${value}}`, names: "key" };
    }
    case "ephemeral_durable": {
      const field = pick(r, [
        '"publish": true',
        '"iceberg": true',
        '"retainAge": "1h"',
        '"retainBytes": "1MB"',
        '"key": ["seq"]',
      ]);
      return {
        kind,
        body: `{"schema": ${schema}, "ephemeral": true, ${field}}`,
        names: "an ephemeral stream has no log",
      };
    }
  }
}

/** A valid definition of a new stream, as its PUT body and as the server lists it. */
function goodDefinition(r: () => number): { body: string; definition: Record<string, unknown> } {
  const ephemeral = r() < 0.3;
  const d = {
    schema: SMALL,
    publish: !ephemeral && r() < 0.5,
    ephemeral,
    iceberg: false,
    retainAge: !ephemeral && r() < 0.5 ? 3600 : null,
    retainBytes: !ephemeral && r() < 0.5 ? 1_000_000 : null,
    key: !ephemeral && r() < 0.5 ? ["sym"] : null,
  };
  // The body says retention in units and leaves defaults out, as a client would.
  const body: Record<string, unknown> = { schema: SMALL };
  if (d.publish) body.publish = true;
  if (d.ephemeral) body.ephemeral = true;
  if (d.retainAge !== null) body.retainAge = "1h";
  if (d.retainBytes !== null) body.retainBytes = "1MB";
  if (d.key !== null) body.key = d.key;
  return { body: JSON.stringify(body), definition: d };
}

/** A name that is not a stream's (the path's one segment, percent-encoded). */
function badName(r: () => number): string {
  return pick(r, [
    randomText(r, NAME_CHARS, int(r, 65, 5000)),
    ".hidden",
    "_private",
    "a b",
    "é",
    "a:b",
    "a*b",
    "a\u0000b",
    "a\nb",
    "日本",
    "streams.json",
    "streams.json.tmp",
    "%",
  ]);
}

/** One hostile request, drawn from the case's generator; `live` are the streams created now. */
function hostile(c: FuzzCase, live: ReadonlyMap<string, Record<string, unknown>>): Hostile {
  const r = caseRng(c, 0xad31);
  const fresh = `fz-${c.seed}-${c.index}`;
  const kind = pick(
    r,
    [
      "bad_body",
      "bad_body",
      "bad_body",
      "bad_name_put",
      "bad_name_delete",
      "path_trick",
      "too_large",
      "conflict",
      "declared",
      "create",
      "delete_missing",
      "delete_created",
    ] as const,
  );
  switch (kind) {
    case "bad_body": {
      const b = badBody(r);
      // On a fresh name or one that exists: the body is checked before either.
      const name = pick(r, [fresh, "keep", "trades", ...live.keys()]);
      return {
        kind: `bad_body/${b.kind}`,
        method: "PUT",
        target: `/_/streams/${name}`,
        body: b.body,
        statuses: [400],
        names: b.names,
      };
    }
    case "bad_name_put":
    case "bad_name_delete": {
      const name = badName(r);
      const put = kind === "bad_name_put";
      // "streams.json" is a name, but the file that records the created streams holds it.
      const names = isStreamName(name) ? "is taken by ROOT/streams.json" : "stream name";
      return {
        kind,
        method: put ? "PUT" : "DELETE",
        target: `/_/streams/${encodeURIComponent(name)}`,
        body: put ? goodDefinition(r).body : undefined,
        statuses: put || !isStreamName(name) ? [400] : [404],
        names: put || !isStreamName(name) ? names : null,
      };
    }
    case "path_trick": {
      const target = pick(r, [
        `/_/streams/${fresh}/`,
        `/_/streams/${fresh}/more`,
        `/_/streams//${fresh}`,
        `/_/streams/`,
        `/_/streams`,
        `/_/streams/${fresh}%2Fmore`,
        `/_/streams/%2e%2e%2f${fresh}`,
        `/_/streams/..%2f..%2f${fresh}`,
        `/_/streams/${fresh}%00`,
        `/_/streams/%ZZ`,
        `/_/streams/../streams/${fresh}`,
        `/_/streams/./${fresh}`,
        `/_/streams/%2e%2e/streams/${fresh}`,
        `/_/%73treams/${fresh}`,
        `/_/streams/${fresh}?x=1`,
      ]);
      const method = pick(r, ["PUT", "DELETE"] as const);
      const good = goodDefinition(r);
      // What the server's URL parser makes of it (dot segments resolved, as the URL standard says).
      const path = new URL(target, "http://127.0.0.1").pathname;
      let name: string | null = null;
      try {
        const m = /^\/_\/streams\/([^/]+)$/.exec(decodeURIComponent(path));
        name = m !== null && isStreamName(m[1]) ? m[1] : null;
      } catch {
        // not percent-encoding: no name
      }
      if (name === fresh) {
        // It is an ordinary request for that name.
        return method === "PUT"
          ? {
            kind,
            method,
            target,
            body: good.body,
            statuses: [201],
            names: null,
            creates: { name, definition: good.definition },
          }
          : { kind, method, target, statuses: [404], names: null };
      }
      return {
        kind,
        method,
        target,
        body: method === "PUT" ? good.body : undefined,
        statuses: [400, 404, 405],
        names: null,
      };
    }
    case "too_large": {
      const pad = "d".repeat(MAX_DEFINITION_BYTES + int(r, 1, 100_000));
      return {
        kind,
        method: "PUT",
        target: `/_/streams/${fresh}`,
        body: JSON.stringify({ schema: { ...SMALL, description: pad } }),
        statuses: [413],
        names: null,
      };
    }
    case "conflict": {
      // The created stream defined otherwise: refused, the stream as it was.
      const body = pick(r, [
        { schema: SMALL, publish: false, key: ["sym"] },
        { schema: SMALL, publish: true },
        { schema: SMALL, publish: true, key: ["sym"], retainAge: "2h" },
        { schema: { ...SMALL, properties: { ...SMALL.properties, px: { type: "string" } } } },
      ]);
      return {
        kind,
        method: "PUT",
        target: "/_/streams/keep",
        body: JSON.stringify({ retainAge: "7d", ...body }),
        statuses: [409],
        names: null,
      };
    }
    case "declared":
      return {
        kind,
        method: pick(r, ["PUT", "DELETE"] as const),
        target: "/_/streams/trades",
        body: JSON.stringify({ schema: SMALL }),
        statuses: [409],
        names: null,
      };
    case "create": {
      const good = goodDefinition(r);
      return {
        kind,
        method: "PUT",
        target: `/_/streams/${fresh}`,
        body: good.body,
        statuses: [201],
        names: null,
        creates: { name: fresh, definition: good.definition },
      };
    }
    case "delete_missing":
      return {
        kind,
        method: "DELETE",
        target: `/_/streams/${fresh}`,
        statuses: [404],
        names: null,
      };
    case "delete_created": {
      const names = [...live.keys()];
      if (names.length === 0) {
        return {
          kind,
          method: "DELETE",
          target: `/_/streams/${fresh}`,
          statuses: [404],
          names: null,
        };
      }
      const name = pick(r, names);
      return {
        kind,
        method: "DELETE",
        target: `/_/streams/${name}`,
        statuses: [204],
        names: null,
        deletes: name,
      };
    }
  }
}

/** What the server holds that the cases must not lose: its streams' definitions and rows. */
async function holdings(s: JwtServe, token: string) {
  const res = await fetch(`${s.url}/_/streams`, { headers: { authorization: `Bearer ${token}` } });
  assertEquals(res.status, 200);
  const heads = (await res.json()) as { stream: string; definition: unknown; end_offset: number }[];
  const streams = Object.fromEntries(
    heads.map((h) => [h.stream, { definition: h.definition, end: h.end_offset }]),
  );
  const rows: Record<string, string> = {};
  for (const name of ["trades", "keep", "keep-odd"]) {
    const latest = await fetch(`${s.url}/${name}/latest`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assertEquals(latest.status, 200);
    rows[name] = await latest.text();
  }
  return { streams, rows };
}

async function put(s: JwtServe, token: string, name: string, body: unknown): Promise<void> {
  const res = await fetch(`${s.url}/_/streams/${name}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  assertEquals(res.status, 201, await res.text());
}

async function publish(s: JwtServe, token: string, name: string, rows: unknown[]) {
  const res = await fetch(`${s.url}/${name}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
    body: rows.map((x) => JSON.stringify(x)).join("\n") + "\n",
  });
  assertEquals(res.status, 200, await res.text());
}

Deno.test("hostile admin: malformed stream definitions and names get a 4xx naming what was wrong, and lose nothing", async () => {
  const s = await serveWithJwt({
    streams: [{ name: "trades", schema: SCHEMA, key: ["seq"], publish: true }],
  });
  try {
    const admin = await s.admin();
    await put(s, admin, "keep", { schema: SMALL, publish: true, key: ["sym"], retainAge: "7d" });
    await put(s, admin, "keep-eph", { schema: SMALL, ephemeral: true });
    // Columns named as Object.prototype's members, one the key: kept as data everywhere.
    await put(s, admin, "keep-odd", { schema: ODD, publish: true, key: ["__proto__"] });
    await publish(
      s,
      admin,
      "keep-odd",
      Array.from(
        { length: 12 },
        (_, i) => JSON.parse(`{"__proto__":"k${i % 5}","constructor":${i}}`),
      ),
    );
    await publish(s, admin, "trades", Array.from({ length: 30 }, (_, i) => row(i)));
    await publish(
      s,
      admin,
      "keep",
      Array.from({ length: 30 }, (_, i) => ({ seq: i, sym: `s${i % 7}`, px: i / 4 })),
    );
    const before = await holdings(s, admin);
    assertEquals(before.rows["keep-odd"].trim().split("\n").length, 5, before.rows["keep-odd"]);
    const live = new Map<string, Record<string, unknown>>();
    const failures: string[] = [];
    const kinds = new Set<string>();
    for (const c of fuzzCases(240, "hostile_admin")) {
      const h = hostile(c, live);
      const size = typeof h.body === "string" ? enc.encode(h.body).length : h.body?.length ?? 0;
      // Over the body limit, whatever it holds: 413, before it is parsed.
      if (size > MAX_DEFINITION_BYTES) Object.assign(h, { statuses: [413], creates: undefined });
      kinds.add(h.kind.split("/")[0]);
      const name = `${caseName(c)} (${h.kind}, ${h.method} ${h.target.slice(0, 80)})`;
      let a;
      try {
        a = await rawRequest(s.port, h.target, {
          method: h.method,
          headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
          body: h.body,
          ms: 30_000,
        });
      } catch (err) {
        failures.push(`${name}: ${(err as Error).message.slice(0, 300)}`);
        continue;
      }
      const detail = (() => {
        try {
          return JSON.parse(a.body).detail as string | undefined;
        } catch {
          return undefined;
        }
      })();
      if (!h.statuses.includes(a.status)) {
        failures.push(
          `${name}: want ${h.statuses.join("|")}, got ${a.status} ${a.body.slice(0, 300)}`,
        );
        continue;
      }
      if (a.status === 400) {
        if (typeof detail !== "string") failures.push(`${name}: a 400 without a detail: ${a.body}`);
        else if (detail.length > MAX_DETAIL_CHARS + 1) {
          failures.push(`${name}: a detail of ${detail.length} characters`);
        } else if (h.names !== null && !detail.includes(h.names)) {
          failures.push(`${name}: the detail does not name ${h.names}: ${detail}`);
        }
      }
      if (h.creates) live.set(h.creates.name, h.creates.definition);
      if (h.deletes) live.delete(h.deletes);
    }
    assertEquals(failures, [], failures.join("\n"));
    assert(s.served.running(), `serve exited:\n${s.served.stderr()}`);
    assert(kinds.size >= 8, `only ${[...kinds].join(", ")} ran`);
    // The streams there before are as they were; the created ones are those the model holds.
    const after = await holdings(s, admin);
    assertEquals(after.rows, before.rows);
    for (const [n, held] of Object.entries(before.streams)) {
      assertEquals(after.streams[n], held, `stream ${n}`);
    }
    const created = Object.keys(after.streams).filter((n) => !(n in before.streams)).sort();
    assertEquals(created, [...live.keys()].sort());
    for (const [n, definition] of live) {
      assertEquals(after.streams[n].definition, definition, `stream ${n}`);
    }
    assert(!/uncaught|panicked/i.test(s.served.stderr()), s.served.stderr());
    // And after a restart, from ROOT/streams.json: the same streams, definitions and rows.
    await s.restart();
    assertEquals(await holdings(s, admin), after);
  } finally {
    await s.stop();
  }
});

Deno.test("hostile admin: racing PUTs of one name create it once, and the rest compare with the winner", async () => {
  const s = await serveWithJwt({ streams: [{ name: "trades", schema: SCHEMA }] });
  try {
    const admin = await s.admin();
    const a = { schema: SMALL, publish: true };
    const b = { schema: SMALL, ephemeral: true };
    const bodies = Array.from({ length: 16 }, (_, i) => (i % 3 === 0 ? b : a));
    const answers = await Promise.all(bodies.map(async (body) => {
      const res = await fetch(`${s.url}/_/streams/raced`, {
        method: "PUT",
        headers: { authorization: `Bearer ${admin}` },
        body: JSON.stringify(body),
      });
      await res.body?.cancel();
      return res.status;
    }));
    const won = answers.indexOf(201);
    assert(won !== -1 && answers.lastIndexOf(201) === won, `answers ${answers}`);
    const winner = bodies[won];
    bodies.forEach((body, i) => {
      if (i !== won) assertEquals(answers[i], body === winner ? 200 : 409, `PUT ${i}: ${answers}`);
    });
    const listed = await (await fetch(`${s.url}/_/streams`, {
      headers: { authorization: `Bearer ${admin}` },
    })).json();
    const raced = listed.find((h: { stream: string }) => h.stream === "raced");
    assertEquals(raced.definition.ephemeral, winner === b);
    assertEquals(raced.definition.publish, winner === a);
  } finally {
    await s.stop();
  }
});
