// Pinning glibc's mmap threshold (server/allocator.ts): it applies on Linux
// with FFI granted (the tests run with -A), checks its argument, and an
// operator's MALLOC_MMAP_THRESHOLD_ wins over it (checked in a child process
// started with the variable set).
import { assertEquals, assertThrows } from "../harness/assert.ts";
import { pinMmapThreshold } from "../../server/allocator.ts";

const MODULE = new URL("../../server/allocator.ts", import.meta.url).href;

Deno.test("pinMmapThreshold pins glibc's threshold on Linux with FFI granted, and checks its argument", () => {
  assertEquals(pinMmapThreshold(), Deno.build.os === "linux");
  assertThrows(() => pinMmapThreshold(100), RangeError, "4096..33554432, got 100");
  assertThrows(() => pinMmapThreshold(64 << 20), RangeError, "got 67108864");
});

Deno.test("pinMmapThreshold leaves the threshold to MALLOC_MMAP_THRESHOLD_ when it is set, and never asks for FFI", async () => {
  const dir = await Deno.makeTempDir();
  const main = `${dir}/main.ts`;
  await Deno.writeTextFile(
    main,
    `import { pinMmapThreshold } from "${MODULE}"; console.log(pinMmapThreshold());`,
  );
  const run = async (args: string[], env: Record<string, string>) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...args, main],
      env,
      stdin: "null",
    }).output();
    return new TextDecoder().decode(out.stdout).trim();
  };
  try {
    assertEquals(await run(["-A"], { MALLOC_MMAP_THRESHOLD_: "65536" }), "false");
    // Without --allow-ffi: false at once, no prompt (stdin is not a terminal either).
    assertEquals(await run(["--allow-env", "--allow-read"], {}), "false");
    assertEquals(await run(["-A"], {}), String(Deno.build.os === "linux"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
