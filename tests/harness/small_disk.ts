// A small disk of its own for a test: a tmpfs of a few MiB mounted at a
// folder (tests run as root), which the test fills with a file of its own
// until little or nothing is left and frees again, and always unmounts.
import { join } from "node:path";

/** A tmpfs mounted at `path`; `close` unmounts it. */
export class SmallDisk implements AsyncDisposable {
  readonly path: string;
  readonly mib: number;
  readonly #filler: string;
  #mounted = true;

  private constructor(path: string, mib: number) {
    this.path = path;
    this.mib = mib;
    this.#filler = join(path, ".filler");
  }

  /**
   * Mounts a tmpfs of `mib` MiB at `path` (made if missing; it should be
   * empty). Throws, naming mount's words, when it cannot.
   */
  static async mount(path: string, mib: number): Promise<SmallDisk> {
    if (!Number.isSafeInteger(mib) || mib < 1) {
      throw new RangeError(`a small disk is a whole number of MiB >= 1, got ${mib}`);
    }
    await Deno.mkdir(path, { recursive: true });
    const out = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", `size=${mib}m`, "tmpfs", path],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(
        `mount a ${mib} MiB tmpfs at ${path}: ${new TextDecoder().decode(out.stderr)}`,
      );
    }
    return new SmallDisk(path, mib);
  }

  /** Bytes free on the disk, as df says. */
  async freeBytes(): Promise<number> {
    const df = await new Deno.Command("df", {
      args: ["-B1", "--output=avail", this.path],
      stdout: "piped",
    }).output();
    return Number(new TextDecoder().decode(df.stdout).trim().split("\n")[1]);
  }

  /**
   * Fills the disk with a file until about `leaveBytes` are free (0: none
   * at all; the filler is written until the disk refuses more).
   */
  async fill(leaveBytes = 0): Promise<void> {
    let want = Math.max(0, (await this.freeBytes()) - leaveBytes);
    // The bulk at once (tmpfs allocates it without writing it), the rest written below.
    const bulk = Math.max(0, want - (1 << 20));
    if (bulk > 0) {
      const out = await new Deno.Command("fallocate", {
        args: ["-l", String(bulk), this.#filler],
        stdout: "null",
        stderr: "null",
      }).output();
      if (out.success) want -= bulk;
    }
    const f = await Deno.open(this.#filler, { write: true, create: true, append: true });
    try {
      const block = new Uint8Array(1 << 20);
      for (let left = want; left > 0;) {
        const n = Math.min(left, block.length);
        try {
          left -= await f.write(block.subarray(0, n));
        } catch (err) {
          if (err instanceof Deno.errors.NotFound) throw err;
          break; // ENOSPC: as full as it gets
        }
      }
    } finally {
      f.close();
    }
  }

  /** Whether the filler is there. */
  async filled(): Promise<boolean> {
    return await Deno.stat(this.#filler).then(() => true, () => false);
  }

  /** Removes the filler: the space is back. */
  async free(): Promise<void> {
    await Deno.remove(this.#filler).catch((err) => {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    });
  }

  /** Unmounts the tmpfs (lazily: a process still holding a file there does not stop it). */
  async close(): Promise<void> {
    if (!this.#mounted) return;
    this.#mounted = false;
    const out = await new Deno.Command("umount", {
      args: ["-l", this.path],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(`umount ${this.path}: ${new TextDecoder().decode(out.stderr)}`);
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
