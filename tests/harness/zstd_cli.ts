// Decoding frames with the `zstd` command (installed by tests/harness/prepare.ts):
// what any consumer's zstd makes of the bytes the server sends.
import { ZSTD } from "./prepare.ts";

/** The text `zstd -d` makes of one compressed frame (`-D dict` when given); throws on failure. */
export async function zstdCli(bytes: Uint8Array, dict?: string): Promise<string> {
  const p = new Deno.Command(ZSTD, {
    args: ["-d", "-c", "-q", ...(dict ? ["-D", dict] : [])],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = p.stdin.getWriter();
  await w.write(bytes);
  await w.close();
  const out = await p.output();
  if (!out.success) throw new Error(`zstd -d failed: ${new TextDecoder().decode(out.stderr)}`);
  return new TextDecoder().decode(out.stdout);
}
