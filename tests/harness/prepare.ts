/**
 * Run by `deno task test` before the suite: makes sure what the tests need
 * outside npm is on the machine. Today that is Chromium for the browser tests
 * (Debian's package `chromium`, driven by playwright-core; no browser download),
 * the `zstd` command, which the compress= tests decode frames with (Debian's
 * package `zstd`), and etcd, which the cluster tests start (Debian's package
 * `etcd-server`, etcd 3.4).
 * When one is missing and this runs as root with apt-get, it installs it and
 * says so on stderr; otherwise it exits 1 with one line naming what is missing
 * and the command that installs it. npm packages need nothing here: Deno
 * fetches them for the tests (deno.dev.json), never for `cli.ts`.
 *
 * @module
 */

import { CHROMIUM } from "./chromium_path.ts";
import { exists } from "../../log/disk/fs.ts";

async function run(cmd: string, args: string[]): Promise<boolean> {
  try {
    const out = await new Deno.Command(cmd, {
      args,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
      env: { DEBIAN_FRONTEND: "noninteractive" },
    }).output();
    if (!out.success) console.error(new TextDecoder().decode(out.stderr).trim().split("\n").at(-1));
    return out.success;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
    return false; // no such command
  }
}

function isRoot(): boolean {
  try {
    return Deno.uid() === 0;
  } catch {
    return false; // no uid on this platform
  }
}

/** Where the compress= tests find the `zstd` command. */
export const ZSTD = "/usr/bin/zstd";

/** Where the cluster tests find etcd (tests/harness/etcd.ts). */
export const ETCD = "/usr/bin/etcd";

// A command from a Debian package, installed like Chromium when missing:
// 0 when it is there (after installing it), else 1 with one line saying how.
async function debianCommand(path: string, pkg: string, who: string): Promise<number> {
  if (await exists(path)) return 0;
  if (isRoot() && await exists("/usr/bin/apt-get")) {
    console.error(`streamcast tests: ${path} is missing; installing Debian's ${pkg}`);
    const ok = await run("apt-get", ["update", "-qq"]) &&
      await run("apt-get", ["install", "-y", "-qq", pkg]);
    if (ok && await exists(path)) return 0;
  }
  console.error(
    `streamcast tests: ${who} need ${path}: install it with ` +
      `\`sudo apt-get install ${pkg}\` (Debian/Ubuntu)`,
  );
  return 1;
}

async function main(): Promise<number> {
  if (await debianCommand(ZSTD, "zstd", "the compress= tests") !== 0) return 1;
  if (await debianCommand(ETCD, "etcd-server", "the cluster tests") !== 0) return 1;
  if (await exists(CHROMIUM)) return 0;
  const how = "apt-get install chromium";
  if (isRoot() && await exists("/usr/bin/apt-get")) {
    console.error(
      `streamcast tests: ${CHROMIUM} is missing; installing Debian's chromium (${how})`,
    );
    const ok = await run("apt-get", ["update", "-qq"]) &&
      await run("apt-get", ["install", "-y", "-qq", "chromium"]);
    if (ok && await exists(CHROMIUM)) {
      console.error("streamcast tests: chromium installed");
      return 0;
    }
  }
  console.error(
    `streamcast tests: the browser tests need Chromium at ${CHROMIUM}: install it with ` +
      `\`sudo ${how}\` (Debian/Ubuntu), or point STREAMCAST_CHROMIUM at a Chromium binary`,
  );
  return 1;
}

if (import.meta.main) Deno.exit(await main());
