import { assert, assertEquals } from "../harness/assert.ts";
import { join } from "node:path";
import { Log } from "../../log/mod.ts";
import { rmrf, tempDir, utf8 } from "../harness/util.ts";

const cli = new URL("../../cli.ts", import.meta.url).pathname;

async function run(...args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", cli, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

Deno.test("cli inspect and verify describe a healthy log", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(join(dir, "trades"), { beaconInterval: 4096, timers: false });
    await log.appendMany(Array.from({ length: 500 }, (_, i) => utf8(`{"i":${i}}`)));
    await log.roll();
    await log.append(utf8('{"i":500}'));
    await log.close();
    const inspect = await run("inspect", join(dir, "trades"));
    assertEquals(inspect.code, 0, inspect.stderr);
    assert(inspect.stdout.includes("segments: 2  chunks: 0  rows: 501"), inspect.stdout);
    assert(inspect.stdout.includes("sealed  offsets 1..500"), inspect.stdout);
    assert(inspect.stdout.includes("active  offsets 501..501"), inspect.stdout);
    const json = await run("inspect", join(dir, "trades"), "--json");
    assertEquals(JSON.parse(json.stdout).rows, 501);
    const verify = await run("verify", join(dir, "trades"));
    assertEquals(verify.code, 0, verify.stderr);
    assert(verify.stdout.includes("ok: 501 rows checked"), verify.stdout);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("cli verify exits 1 naming the file and byte of a flipped byte", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(join(dir, "t"), { timers: false });
    await log.appendMany(Array.from({ length: 100 }, (_, i) => utf8(`{"i":${i}}`)));
    await log.close();
    const seg = join(dir, "t", "00000000000000000001.seg");
    const bytes = await Deno.readFile(seg);
    bytes[128 + 20 + 3] ^= 0xff; // record 1's payload
    await Deno.writeFile(seg, bytes);
    const verify = await run("verify", join(dir, "t"));
    assertEquals(verify.code, 1);
    assert(verify.stderr.includes(`at byte 128 in ${seg}`), verify.stderr);
    assert(verify.stderr.includes("checksum mismatch in record 1"), verify.stderr);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("cli refuses unknown commands and flags with one line", async () => {
  const bad = await run("inspect", "--bogus", "x");
  assertEquals(bad.code, 2);
  assert(bad.stderr.includes("--bogus"), bad.stderr);
  const none = await run("verify", "/nonexistent/log");
  assertEquals(none.code, 1);
  assertEquals(
    none.stderr.trim(),
    "streamcast verify: no log at /nonexistent/log (log.json is missing)",
  );
  const unknown = await run("frobnicate");
  assertEquals(unknown.code, 2);
});

Deno.test("cli verify checks chunks and names a corrupt one", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(join(dir, "c"), { chunks: true, timers: false });
    await log.appendMany(Array.from({ length: 300 }, (_, i) => utf8(`{"i":${i}}`)));
    await log.roll();
    await log.append(utf8('{"i":300}'));
    await log.chunks.settled();
    const sha = log.chunks.manifest!.chunks[0].sha256;
    await log.close();
    const good = await run("verify", join(dir, "c"));
    assertEquals(good.code, 0, good.stderr);
    assert(good.stdout.includes("ok: 301 rows checked"), good.stdout);
    const inspect = await run("inspect", join(dir, "c"));
    assert(inspect.stdout.includes("segments: 1  chunks: 1  rows: 301"), inspect.stdout);
    assert(inspect.stdout.includes("offsets 1..300  rows 300"), inspect.stdout);
    const path = join(dir, "c", "chunks", `${sha}.ndjson.zst`);
    const bytes = await Deno.readFile(path);
    bytes[bytes.length >> 1] ^= 1;
    await Deno.writeFile(path, bytes);
    const bad = await run("verify", join(dir, "c"));
    assertEquals(bad.code, 1);
    assert(bad.stderr.includes(path), bad.stderr);
    assert(bad.stderr.includes("SHA-256 does not match"), bad.stderr);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("cli commands end an unexpected failure with one line naming it, and exit 1", async () => {
  const dir = await tempDir();
  try {
    const file = join(dir, "not-a-log");
    await Deno.writeTextFile(file, "hello\n");
    for (const command of ["inspect", "verify"]) {
      const r = await run(command, file);
      assertEquals(r.code, 1, r.stderr);
      const lines = r.stderr.trim().split("\n");
      assertEquals(lines.length, 1, r.stderr);
      assert(lines[0].startsWith(`streamcast ${command}: Not a directory`), r.stderr);
      assert(!r.stderr.includes("    at "), `no stack trace: ${r.stderr}`);
    }
  } finally {
    await rmrf(dir);
  }
});
