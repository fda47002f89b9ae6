// glibc malloc's own account (server/malloc_info.ts): on Linux with FFI
// granted it sees memory a process allocates, and without FFI it says
// nothing and never prompts (each checked in a child process).
import { assert, assertEquals } from "../harness/assert.ts";

const MODULE = new URL("../../server/malloc_info.ts", import.meta.url).href;
const MIB = 1024 * 1024;

// Runs `code` (with mallocInfo imported) in a child process with `args`; its stdout.
async function child(args: string[], code: string): Promise<string> {
  const dir = await Deno.makeTempDir();
  const main = `${dir}/main.ts`;
  await Deno.writeTextFile(main, `import { mallocInfo } from "${MODULE}";\n${code}`);
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...args, main],
      stdin: "null",
    }).output();
    return new TextDecoder().decode(out.stdout).trim();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

// In a process of its own, so that no other test's allocations count.
Deno.test("mallocInfo sees 32 MiB of small allocations in use", async () => {
  const out = await child(
    ["-A"],
    `const before = mallocInfo();
    // Typed arrays' bytes come from malloc (V8's array buffer allocator), below the mmap threshold.
    const held = Array.from({ length: 8192 }, () => new Uint8Array(4096));
    console.log(JSON.stringify({ before, during: mallocInfo(), n: held.length }));`,
  );
  if (Deno.build.os !== "linux") {
    assertEquals(JSON.parse(out).during, null);
    return;
  }
  const { before, during } = JSON.parse(out);
  assert(during.inUse - before.inUse >= 30 * MIB, out);
  assert(during.inUse + during.free <= during.arenas, out);
});

Deno.test("mallocInfo says nothing without FFI, and never asks for it", async () => {
  assertEquals(await child(["--allow-read"], "console.log(JSON.stringify(mallocInfo()));"), "null");
});
