// A stream created while serving on a disk that refuses it, through the real
// path: `serve` with its root on a small tmpfs the test mounts (tests run as
// root). Full (ENOSPC): PUT /_/streams/NAME answers 507 disk_full naming the
// stream, logged once, and once the test frees the disk the same PUT creates
// it. Read-only (EROFS, a refusal other than a full disk, from a read-only
// tmpfs mounted where the stream's folder goes): 503 unavailable
// with the system's words. Both tmpfs are unmounted in `finally`.
import { join } from "node:path";
import { assert, assertEquals } from "../harness/assert.ts";
import { startServe } from "../harness/serve.ts";
import { freePort, rmrf, tempDir } from "../harness/util.ts";
import { SmallDisk } from "../harness/small_disk.ts";

const SCHEMA = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };

async function put(
  url: string,
  name: string,
): Promise<{ status: number; body: Record<string, string> }> {
  const res = await fetch(`${url}/_/streams/${name}`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ schema: SCHEMA, publish: true }),
  });
  return { status: res.status, body: await res.json() };
}

async function mount(args: string[]): Promise<void> {
  const out = await new Deno.Command("mount", { args, stderr: "piped" }).output();
  assert(out.success, `mount ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
}

Deno.test("serve: a stream created on a full disk is refused 507 disk_full, on a read-only one 503, and created once the disk takes it", async () => {
  const dir = await tempDir("streamcast-admin-disk-");
  const disk = await SmallDisk.mount(join(dir, "disk"), 4);
  // A read-only tmpfs where stream r's folder goes: the system refuses its files (EROFS).
  let readOnly: string | null = null;
  try {
    const schema = join(dir, "t.json");
    await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
    const root = join(disk.path, "data");
    const s = await startServe([
      ...["--stream", `t=${schema}`, "--root", root, "--port", String(freePort())],
      ...["--min-free-bytes", "0"],
    ]);
    try {
      await disk.fill(0);
      const full = await put(s.url, "q");
      assertEquals([full.status, full.body.error], [507, "disk_full"], JSON.stringify(full.body));
      assert(
        full.body.detail.startsWith('stream "q" cannot be opened: the disk of its folder is full'),
        full.body.detail,
      );
      await s.waitStderr(/stream_open_failed/);
      assertEquals(s.stderr().match(/stream_open_failed/g)?.length, 1, s.stderr());
      assertEquals((await fetch(`${s.url}/_/health`)).status, 200);

      await disk.free();
      const created = await put(s.url, "q");
      assertEquals(created.status, 201, JSON.stringify(created.body));

      // Read-only: not a full disk, and not the request's fault.
      readOnly = join(root, "r");
      await Deno.mkdir(readOnly);
      await mount(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", readOnly]);
      const refused = await put(s.url, "r");
      assertEquals(
        [refused.status, refused.body.error],
        [503, "unavailable"],
        JSON.stringify(refused.body),
      );
      assert(refused.body.detail.startsWith('stream "r" cannot be opened: '), refused.body.detail);
      assert(/read-only|os error 30/i.test(refused.body.detail), refused.body.detail);
      await mount(["-o", "remount,rw", readOnly]);
      assertEquals((await put(s.url, "r")).status, 201);
    } finally {
      await s.signal("SIGTERM");
    }
  } finally {
    if (readOnly !== null) {
      await new Deno.Command("umount", { args: [readOnly], stderr: "null" }).output();
    }
    await disk.close();
    await rmrf(dir);
  }
});
