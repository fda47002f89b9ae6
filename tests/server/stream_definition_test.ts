// A stream's definition: what a PUT body may hold, how two compare, and the
// file that records created streams (ROOT/streams.json), written whole.
import { assert, assertEquals } from "../harness/assert.ts";
import {
  compareDefinitions,
  DefinitionError,
  durationSeconds,
  parseDefinition,
  sizeBytes,
} from "../../server/stream_definition.ts";
import { readStreamsFile, writeStreamsFile } from "../../server/admin/streams_file.ts";
import { rmrf, tempDir } from "../harness/util.ts";

const SCHEMA = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
const KEYED = {
  type: "object",
  properties: { k: { type: "string" }, v: { type: "number" } },
  required: ["k", "v"],
};

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    assert(err instanceof DefinitionError, String(err));
    return err.message;
  }
  throw new Error("not refused");
}

Deno.test("stream definition: durations and sizes in their units, anything else named", () => {
  assertEquals(
    ["90s", "15m", "24h", "7d", "2.5", 30].map((v) => durationSeconds(v, "retainAge")),
    [90, 900, 86400, 604800, 2.5, 30],
  );
  assertEquals(
    ["500MB", "2GiB", "4096", 1024].map((v) => sizeBytes(v, "retainBytes")),
    [500e6, 2 ** 31, 4096, 1024],
  );
  // Past the bounds: 1 s to 100 years, 1 KiB to 1 PiB, the value and the bound named.
  assertEquals(
    refusal(() => durationSeconds(1e-300, "retainAge")),
    "retainAge must be at least 1 s, got 1e-300 (1e-300 s)",
  );
  assertEquals(
    refusal(() => durationSeconds("36501d", "retainAge")),
    'retainAge must be at most 100 years (3153600000 s = 36500d), got "36501d" (3153686400 s); leave it out to keep all',
  );
  assertEquals(durationSeconds("36500d", "retainAge"), 3153600000);
  assertEquals(
    refusal(() => sizeBytes(10, "retainBytes")),
    "retainBytes must be at least 1KiB (1024 bytes), got 10",
  );
  assertEquals(
    refusal(() => sizeBytes(1e300, "retainBytes")),
    "retainBytes must be at most 1PiB (1125899906842624 bytes), got 1e+300; leave it out to keep all",
  );
  assertEquals(sizeBytes("1024TiB", "retainBytes"), 2 ** 50);
  assertEquals(durationSeconds(null, "retainAge"), null);
  for (const bad of ["", "1w", "-5s", 0, true]) {
    assert(refusal(() => durationSeconds(bad, "retainAge")).startsWith("retainAge must be"));
  }
  for (const bad of ["2 PiB", 0, "lots", -1]) {
    assert(refusal(() => sizeBytes(bad, "retainBytes")).startsWith("retainBytes must be"));
  }
});

Deno.test("stream definition: a changed annotation is the same, a changed constraint grows, a changed option or column conflicts", () => {
  const d = parseDefinition({ schema: KEYED, key: ["k"], retainBytes: "1MB" });
  // Key order of the schema is no difference.
  const reordered = parseDefinition({
    schema: {
      required: ["k", "v"],
      properties: { k: { type: "string" }, v: { type: "number" } },
      type: "object",
    },
    key: ["k"],
    retainBytes: 1e6,
  });
  assertEquals(compareDefinitions(d, reordered).kind, "same");
  const titled = {
    ...KEYED,
    properties: { k: { type: "string" }, v: { type: "number", title: "value" } },
  };
  // Annotations and the order of required change neither columns nor rows accepted: the same.
  assertEquals(compareDefinitions(d, { ...d, schema: titled }).kind, "same");
  const described = { ...KEYED, description: "prices", required: ["v", "k"] };
  assertEquals(compareDefinitions(d, { ...d, schema: described }).kind, "same");
  // A constraint changes the rows accepted: the stream takes the new schema.
  const bounded = {
    ...KEYED,
    properties: { k: { type: "string" }, v: { type: "number", minimum: 0 } },
  };
  assertEquals(compareDefinitions(d, { ...d, schema: bounded }).kind, "grows");
  // The columns' order is the properties' order: swapped, a conflict, never the same.
  const swapped = {
    ...KEYED,
    properties: { v: { type: "number" }, k: { type: "string" } },
  };
  assertEquals(compareDefinitions(d, { ...d, schema: swapped }).kind, "conflict");
  const keyless = compareDefinitions(d, { ...d, key: null });
  assertEquals(keyless, { kind: "conflict", detail: 'key is ["k"] here, null in the request' });
  const renamed = parseDefinition({
    schema: { type: "object", properties: { w: { type: "number" } }, required: ["w"] },
  });
  assertEquals(compareDefinitions(d, { ...d, schema: renamed.schema }), {
    kind: "conflict",
    detail: 'the schema column "k" (string) is removed; a stream takes only nullable columns ' +
      "added at the end",
  });
});

Deno.test("streams file: written whole, read back; a damaged one is named", async () => {
  const root = await tempDir();
  try {
    const defs = new Map([["a", parseDefinition({ schema: SCHEMA, publish: true })]]);
    await writeStreamsFile(root, defs);
    await writeStreamsFile(root, new Map([...defs, ["b", parseDefinition({ schema: SCHEMA })]]));
    const names = [];
    for await (const e of Deno.readDir(root)) names.push(e.name);
    assertEquals(names, ["streams.json"]); // no temp file left behind
    assertEquals([...(await readStreamsFile(root)).keys()], ["a", "b"]);
    await Deno.writeTextFile(
      `${root}/streams.json`,
      JSON.stringify({ format: 1, streams: { c: { schema: SCHEMA, colour: 1 } } }),
    );
    let message = "";
    try {
      await readStreamsFile(root);
    } catch (err) {
      message = (err as Error).message;
    }
    assert(message.includes('streams.json: stream "c": unknown field "colour"'), message);
  } finally {
    await rmrf(root);
  }
});
