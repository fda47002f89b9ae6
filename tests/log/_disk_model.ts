// A model of what a crash leaves on disk, behind the log's I/O seam (log/disk/io.ts).
//
// Every change the log makes goes through this LogIo: it is done for real
// (on the files the running log reads: the page cache, as it were), and
// mirrored in a model that knows, per file, its bytes now and its bytes as
// of its last sync, and per folder, its entries as of its last folder sync.
// Before each change it can hand the test two states of the disk:
// - a power loss there: only what was synced (a file's bytes as of its last
//   fsync, a folder's entries as of its last fsync; a file created or
//   renamed since is gone or back under its old name);
// - a process crash there: everything done so far (the page cache survives),
//   optionally with the first `j` bytes of the write about to happen (a torn
//   write).
// It can also fail one change instead of doing it: a write with ENOSPC after
// just over half of its bytes, or with EIO; a sync or folder sync with either.
//
// The lock file (LOCK) holds no data for recovery and is written around the
// seam; every other file the log writes must go through it (differences()).
//
// What the model does not cover (docs/SPEC.md §9.4 says so too): a folder's
// own existence (folders exist once made); a failed fsync that nonetheless
// persisted part of its bytes (the model keeps none of them); unsynced
// writes reaching the disk in part or out of order (a power loss keeps none
// of them, a process crash all, but for the torn write it is given). The
// real syncs are skipped (the model decides what is durable), which keeps
// thousands of runs fast.
import { dirname, join, relative } from "node:path";
import { crc32 } from "node:zlib";
import type { LogIo } from "../../log/disk/io.ts";

/** One file's bytes, now and as of its last sync (null: never synced). */
interface Inode {
  data: Uint8Array;
  durable: Uint8Array | null;
}

/** A change the log asked for. */
export interface DiskOp {
  /** 0-based, in the order asked. */
  index: number;
  kind: "open" | "write" | "sync" | "truncate" | "rename" | "remove" | "mkdir" | "syncdir";
  /** The file or folder, relative to the root. */
  path: string;
  /** `path` with the random part of a temporary file's name as `*`: the same in every run. */
  name: string;
  /** For a write: the bytes, and where they go. */
  bytes?: Uint8Array;
  pos?: number;
}

/** The files of a disk state: path relative to the root → bytes. */
export type DiskState = Map<string, Uint8Array>;

/** A fault to inject: the `nth` (1-based) change of `kind` to the file or folder named `name`. */
export interface DiskFault {
  kind: "write" | "sync" | "syncdir";
  name: string;
  nth: number;
  error: "ENOSPC" | "EIO";
}

/** The name of `path` the same in every run (see {@linkcode DiskOp.name}). */
export function stableName(path: string): string {
  return path.replace(/(\.tmp)-[0-9a-f]{8}$/, "$1-*");
}

function osError(error: "ENOSPC" | "EIO"): Error {
  return error === "ENOSPC"
    ? Object.assign(new Error("No space left on device (os error 28)"), { code: "ENOSPC" })
    : Object.assign(new Error("Input/output error (os error 5)"), { code: "EIO" });
}

/** A stable digest of a disk state, to tell states apart. */
export function stateKey(state: DiskState): string {
  const parts: string[] = [];
  for (const [path, bytes] of [...state].sort(([a], [b]) => a < b ? -1 : 1)) {
    parts.push(`${path}:${bytes.length}:${crc32(bytes) >>> 0}`);
  }
  return parts.join("|");
}

/** Writes `state` under `root` (which must be empty). */
export function writeState(root: string, state: DiskState): void {
  for (const [path, bytes] of state) {
    const full = join(root, path);
    Deno.mkdirSync(dirname(full), { recursive: true });
    Deno.writeFileSync(full, bytes);
  }
}

/** The log's I/O through the model (see the module doc). */
export class DiskModel implements LogIo {
  readonly root: string;
  /** Every change asked for so far. */
  readonly ops: DiskOp[] = [];
  /** Called before each change, with the change (the model is as before it). */
  beforeOp: ((op: DiskOp) => void) | null = null;
  /** The fault to inject, if any, and whether it was. */
  fault: DiskFault | null = null;
  faulted: DiskOp | null = null;
  readonly #files = new Map<string, Inode>();
  readonly #durableDirs = new Map<string, Map<string, Inode>>();
  readonly #handles = new WeakMap<Deno.FsFile, Inode>();
  readonly #counts = new Map<string, number>();

  /** A model of the folder `root` as it is now, all of it durable (a clean start). */
  constructor(root: string) {
    this.root = root;
    const walk = (dir: string) => {
      const entries = new Map<string, Inode>();
      for (const e of Deno.readDirSync(dir)) {
        const full = join(dir, e.name);
        if (e.isDirectory) walk(full);
        else if (e.isFile) {
          const data = Deno.readFileSync(full);
          const inode = { data, durable: data };
          this.#files.set(full, inode);
          entries.set(e.name, inode);
        }
      }
      this.#durableDirs.set(dir, entries);
    };
    walk(root);
  }

  /** The disk after a power loss now: only what was synced. */
  powerLoss(): DiskState {
    const out: DiskState = new Map();
    for (const [dir, entries] of this.#durableDirs) {
      for (const [name, inode] of entries) {
        const path = relative(this.root, join(dir, name));
        if (path !== "LOCK") out.set(path, inode.durable ?? new Uint8Array(0));
      }
    }
    return out;
  }

  /** The disk after a process crash now: everything done so far. */
  processCrash(): DiskState {
    const out: DiskState = new Map();
    for (const [full, inode] of this.#files) {
      const path = relative(this.root, full);
      if (path !== "LOCK") out.set(path, inode.data);
    }
    return out;
  }

  #op(kind: DiskOp["kind"], full: string, extra: Partial<DiskOp> = {}): DiskOp {
    const path = relative(this.root, full);
    const op: DiskOp = { index: this.ops.length, kind, path, name: stableName(path), ...extra };
    this.ops.push(op);
    this.beforeOp?.(op);
    return op;
  }

  // Whether the fault is for `op`; counts the changes it could be for.
  #faultFor(op: DiskOp): DiskFault | null {
    const f = this.fault;
    if (f === null || this.faulted !== null || f.kind !== op.kind || op.name !== f.name) {
      return null;
    }
    const key = `${f.kind}:${f.name}`;
    const n = (this.#counts.get(key) ?? 0) + 1;
    this.#counts.set(key, n);
    if (n !== f.nth) return null;
    this.faulted = op;
    return f;
  }

  #inode(file: Deno.FsFile): Inode {
    const inode = this.#handles.get(file);
    if (!inode) throw new Error("a file the log writes was not opened through its io");
    return inode;
  }

  #pathOf(inode: Inode): string {
    for (const [full, i] of this.#files) if (i === inode) return full;
    return "(removed)";
  }

  open(path: string, options: Deno.OpenOptions): Promise<Deno.FsFile> {
    this.#op("open", path);
    const file = Deno.openSync(path, options);
    let inode = this.#files.get(path);
    if (inode === undefined) {
      inode = { data: new Uint8Array(0), durable: null };
      this.#files.set(path, inode);
    } else if (options.truncate) inode.data = new Uint8Array(0);
    this.#handles.set(file, inode);
    return Promise.resolve(file);
  }

  write(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
    const inode = this.#inode(file);
    const pos = file.seekSync(0, Deno.SeekMode.Current);
    // A copy: the caller may reuse its buffer once the write returns.
    const op = this.#op("write", this.#pathOf(inode), { bytes: bytes.slice(), pos });
    const fault = this.#faultFor(op);
    // ENOSPC after just over half of the bytes: a torn write that does not end
    // on the boundary between two records of the same size.
    const torn = Math.min(bytes.length, (bytes.length >> 1) + 1);
    const n = fault === null ? bytes.length : fault.error === "ENOSPC" ? torn : 0;
    let done = 0;
    while (done < n) done += file.writeSync(bytes.subarray(done, n));
    if (n > 0) {
      const data = new Uint8Array(Math.max(inode.data.length, pos + n));
      data.set(inode.data, 0);
      data.set(bytes.subarray(0, n), pos);
      inode.data = data;
    }
    return fault === null ? Promise.resolve() : Promise.reject(osError(fault.error));
  }

  syncData(file: Deno.FsFile): Promise<void> {
    const inode = this.#inode(file);
    const fault = this.#faultFor(this.#op("sync", this.#pathOf(inode)));
    if (fault !== null) return Promise.reject(osError(fault.error));
    inode.durable = inode.data;
    return Promise.resolve();
  }

  truncate(file: Deno.FsFile, length: number): Promise<void> {
    const inode = this.#inode(file);
    this.#op("truncate", this.#pathOf(inode));
    file.truncateSync(length);
    const data = new Uint8Array(length);
    data.set(inode.data.subarray(0, length), 0);
    inode.data = data;
    return Promise.resolve();
  }

  rename(from: string, to: string): Promise<void> {
    this.#op("rename", from);
    Deno.renameSync(from, to);
    const inode = this.#files.get(from);
    this.#files.delete(from);
    if (inode) this.#files.set(to, inode);
    return Promise.resolve();
  }

  remove(path: string): Promise<void> {
    this.#op("remove", path);
    Deno.removeSync(path);
    this.#files.delete(path);
    return Promise.resolve();
  }

  mkdir(path: string): Promise<void> {
    this.#op("mkdir", path);
    Deno.mkdirSync(path, { recursive: true });
    if (!this.#durableDirs.has(path)) this.#durableDirs.set(path, new Map());
    return Promise.resolve();
  }

  syncDir(dir: string): Promise<void> {
    const fault = this.#faultFor(this.#op("syncdir", dir));
    if (fault !== null) return Promise.reject(osError(fault.error));
    const entries = new Map<string, Inode>();
    for (const [full, inode] of this.#files) {
      if (dirname(full) === dir) entries.set(full.slice(dir.length + 1), inode);
    }
    this.#durableDirs.set(dir, entries);
    return Promise.resolve();
  }

  /**
   * Checks the model against the files on disk: a file the log wrote around
   * the seam would differ, or be missing from the model. Returns the paths.
   */
  differences(): string[] {
    const out: string[] = [];
    const walk = (dir: string) => {
      for (const e of Deno.readDirSync(dir)) {
        const full = join(dir, e.name);
        if (e.isDirectory) walk(full);
        else if (!this.#files.has(full) && e.name !== "LOCK") {
          out.push(`${relative(this.root, full)} (unknown)`);
        }
      }
    };
    walk(this.root);
    for (const [full, inode] of this.#files) {
      const path = relative(this.root, full);
      if (path === "LOCK") continue;
      let real: Uint8Array;
      try {
        real = Deno.readFileSync(full);
      } catch {
        out.push(`${path} (gone)`);
        continue;
      }
      if (real.length !== inode.data.length || crc32(real) !== crc32(inode.data)) out.push(path);
    }
    return out;
  }
}
