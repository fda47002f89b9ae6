// A LogIo (log/disk/io.ts) on the real filesystem whose segment syncs (files
// *.seg; the producer journal's and the rest go on), or the syncs of other
// files named by their ends, can be held: once `hold()` is called, each such
// sync waits until `release()`, which may make the held syncs fail instead.
// Tests use it to see what a node does between writing a commit and syncing
// it.
import { type LogIo, REAL_IO } from "../../log/disk/io.ts";

/** A LogIo whose segment syncs can be held, and the switches. */
export interface HeldSyncs {
  io: LogIo;
  /** Segment syncs from now on wait for `release()`. */
  hold(): void;
  /** Lets the held syncs go on (or fail, with `fail`), and stops holding. */
  release(fail?: boolean): void;
  /** Whether syncs are held now. */
  readonly held: boolean;
}

/** A fresh {@linkcode HeldSyncs} for files whose names end with one of `ends`, holding nothing. */
export function heldSyncs(ends: readonly string[] = [".seg"]): HeldSyncs {
  let gate: { promise: Promise<boolean>; resolve: (fail: boolean) => void } | null = null;
  const held = new WeakSet<Deno.FsFile>();
  const io: LogIo = {
    ...REAL_IO,
    async open(path, options) {
      const f = await REAL_IO.open(path, options);
      if (ends.some((e) => path.endsWith(e))) held.add(f);
      return f;
    },
    async syncData(file) {
      if (held.has(file) && gate) {
        if (await gate.promise) throw new Error("EIO (a test failed this sync)");
      }
      return await REAL_IO.syncData(file);
    },
  };
  return {
    io,
    hold() {
      if (gate) return;
      let resolve!: (fail: boolean) => void;
      gate = { promise: new Promise<boolean>((r) => (resolve = r)), resolve };
    },
    release(fail = false) {
      const g = gate;
      gate = null;
      g?.resolve(fail);
    },
    get held() {
      return gate !== null;
    },
  };
}
