// client/s3.ts without a store: its options are checked at construction, a
// failed cursor upload is reported through the Logger, and the AWS SDK is
// loaded only when S3 is used (a dynamic import in common/s3.ts).
import { assert, assertEquals, assertThrows } from "../harness/assert.ts";
import { type Cursor, MemoryCursor } from "../../client/mod.ts";
import { BackedUpCursor, S3ChunkSource, S3Cursor } from "../../client/s3.ts";
import type { CursorStore } from "../../client/cursor.ts";

Deno.test("S3ChunkSource and S3Cursor check their options when made", () => {
  assertThrows(
    () => new S3ChunkSource({ uri: "s3://archive/prod", pathStyle: true } as never, "trades"),
    TypeError,
    "S3ChunkSource archive: unknown option pathStyle",
  );
  assertThrows(
    () => new S3ChunkSource({ uri: 5 } as never, "trades"),
    TypeError,
    "S3ChunkSource archive.uri must be a string, got number 5",
  );
  assertThrows(
    () => new S3ChunkSource({ uri: "http://archive/prod" }, "trades"),
    TypeError,
    "archive must be s3://bucket/prefix",
  );
  assertThrows(
    () => new S3ChunkSource({ uri: "s3://archive/prod", endpoint: "not a url" }, "trades"),
    RangeError,
    'S3ChunkSource archive.endpoint must be a URL, got "not a url"',
  );
  assertThrows(
    () => new S3ChunkSource("s3://archive/prod" as never, "trades"),
    TypeError,
    "S3ChunkSource archive must be an object",
  );
  assertThrows(
    () => new S3Cursor("s3://streamcast/c", { forcePathStyle: "yes" } as never),
    TypeError,
    'S3Cursor options.forcePathStyle must be a boolean, got string "yes"',
  );
  assertThrows(
    () => new S3Cursor("s3://streamcast/c", { uri: "s3://other/k" } as never),
    TypeError,
    "S3Cursor options: unknown option uri",
  );
  assertThrows(() => new S3Cursor("s3://streamcast"), TypeError, "a cursor URI needs a key");
  // Made without a request: nothing to release but the (unmade) client.
  new S3ChunkSource({ uri: "s3://archive/prod", forcePathStyle: true }, "trades").close();
  new S3Cursor("s3://streamcast/c", { region: "eu-west-1" }).close();
});

Deno.test("BackedUpCursor checks its stores and options when made", () => {
  const m = new MemoryCursor();
  assertThrows(
    () => new BackedUpCursor(".c" as never, m),
    TypeError,
    "BackedUpCursor local must be a CursorStore",
  );
  assertThrows(
    () => new BackedUpCursor(m, {} as never),
    TypeError,
    "BackedUpCursor remote must be a CursorStore (load and save methods), got an object without load and save",
  );
  assertThrows(
    () => new BackedUpCursor(m, m, { uploadEveryMs: "5s" } as never),
    TypeError,
    "uploadEveryMs must be a number, got string",
  );
  assertThrows(
    () => new BackedUpCursor(m, m, { uploadEveryMs: -1 }),
    RangeError,
    "uploadEveryMs must be a number >= 0, got -1",
  );
  assertThrows(
    () => new BackedUpCursor(m, m, { onError: "log" } as never),
    TypeError,
    "onError must be a function",
  );
  assertThrows(
    () => new BackedUpCursor(m, m, { uploadEvery: 5 } as never),
    TypeError,
    "BackedUpCursor: unknown option uploadEvery",
  );
});

class FailingRemote implements CursorStore {
  load(): Promise<Cursor | null> {
    return Promise.resolve(null);
  }
  save(): Promise<void> {
    return Promise.reject(new Error("S3 is down"));
  }
}

Deno.test("BackedUpCursor reports a failed upload to onError, by default as a Logger warning", async () => {
  const seen: unknown[] = [];
  const local = new MemoryCursor();
  const withHandler = new BackedUpCursor(local, new FailingRemote(), {
    uploadEveryMs: 60_000,
    onError: (e) => seen.push(e),
  });
  await withHandler.save({ offset: 3, streamId: null });
  await withHandler.close();
  assertEquals(seen.map((e) => (e as Error).message), ["S3 is down"]);
  assertEquals(local.value?.offset, 3, "the local save is not held up by the remote");

  const lines: string[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => void lines.push(args.join(" "));
  try {
    const byDefault = new BackedUpCursor(new MemoryCursor(), new FailingRemote(), {
      uploadEveryMs: 60_000,
    });
    await byDefault.save({ offset: 4, streamId: null });
    await byDefault.close();
  } finally {
    console.error = original;
  }
  // The Logger's text line: the sentence the bare console.error used to print.
  assertEquals(lines, ["streamcast: cursor upload failed: Error: S3 is down"]);
});

Deno.test("the AWS SDK is loaded only when S3 is used: a dynamic import, in common/s3.ts only", async () => {
  const files = ["client/s3.ts", "log/chunk/archive.ts", "common/s3.ts"];
  const root = new URL("../../", import.meta.url);
  for (const file of files) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", new URL(file, root).pathname],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert(out.success, new TextDecoder().decode(out.stderr));
    const info = JSON.parse(new TextDecoder().decode(out.stdout));
    for (const m of info.modules as { specifier: string; dependencies?: unknown[] }[]) {
      if (!m.specifier.startsWith(root.href)) continue;
      for (const d of (m.dependencies ?? []) as { specifier: string; isDynamic?: boolean }[]) {
        if (!d.specifier.includes("@aws-sdk/")) continue;
        const where = m.specifier.slice(root.href.length);
        assertEquals(where, "common/s3.ts", `${where} imports ${d.specifier}`);
        assert(d.isDynamic, `${where} imports ${d.specifier} statically (from ${file})`);
      }
    }
  }
});
