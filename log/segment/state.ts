/**
 * What the log holds of each segment, and making new segments: the state
 * behind recovery, the committer, fencing and the tier lookup.
 *
 * @module
 */

import { join } from "node:path";
import {
  encodeHeader,
  FORMAT_VERSION,
  HEADER_BYTES,
  Layout,
  RUNNING_SEED,
  segmentFileName,
  type SegmentHeader,
} from "./format.ts";
import type { SegmentWriter, WriterState } from "./writer.ts";
import { type LogIo, REAL_IO } from "../disk/io.ts";
import type { LogMeta } from "../log_meta.ts";
import type { ResolvedOptions } from "../options.ts";

/**
 * Microseconds since the epoch, by `clock` (ms).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { nowUs } from "./state.ts";
 * equal(nowUs(() => 1.5), 1500);
 * ```
 */
export function nowUs(clock: () => number): number {
  return Math.round(clock() * 1000);
}

/**
 * What the log knows of one segment.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../mod.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * const info = log.segments()[0];
 * equal(info.firstOffset, 1);
 * equal(info.sealed, false);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export interface SegmentInfo {
  /** Full path of the file. */
  path: string;
  /** First offset the segment may hold. */
  firstOffset: number;
  /** Number of durable records. */
  count: number;
  /** Durable bytes of the file. */
  size: number;
  /** Whether the segment is sealed (complete, immutable). */
  sealed: boolean;
  /** Creation time, µs since the epoch. */
  createdUs: number;
  /** Append time of the first record (µs), or 0 when empty. */
  firstTimeUs: number;
  /** Append time of the last record (µs), or 0 when empty. */
  lastTimeUs: number;
  /** The beacon interval. */
  beaconInterval: number;
}

/** A segment as the log holds it: what it knows, the header, the layout. */
export interface Segment {
  info: SegmentInfo;
  header: SegmentHeader;
  layout: Layout;
}

/** The segment being appended to, with its writer and what is durable of it. */
export interface Active {
  seg: Segment;
  writer: SegmentWriter;
  file: Deno.FsFile | null;
  durable: WriterState;
}

/**
 * The writer state of an empty segment.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { initialState } from "./state.ts";
 * equal(initialState().count, 0);
 * ```
 */
export function initialState(): WriterState {
  return { physEnd: HEADER_BYTES, lastOffset: 0, lastTimeUs: 0, running: RUNNING_SEED, count: 0 };
}

/**
 * A new, empty segment starting at `first` (nothing on disk yet).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { newSegmentState } from "./state.ts";
 * import { resolveOptions } from "../options.ts";
 * const seg = newSegmentState("data/t", "0".repeat(32), "t", 5, resolveOptions({}));
 * equal(seg.info.path, "data/t/00000000000000000005.seg");
 * ```
 */
export function newSegmentState(
  dir: string,
  streamId: string,
  name: string,
  first: number,
  opts: ResolvedOptions,
): Segment {
  const createdUs = nowUs(opts.clock);
  const header: SegmentHeader = {
    version: FORMAT_VERSION,
    streamId,
    firstOffset: first,
    createdUs,
    beaconInterval: opts.beaconInterval,
    name,
  };
  return {
    header,
    layout: new Layout(opts.beaconInterval),
    info: {
      path: join(dir, segmentFileName(first)),
      firstOffset: first,
      count: 0,
      size: HEADER_BYTES,
      sealed: false,
      createdUs,
      firstTimeUs: 0,
      lastTimeUs: 0,
      beaconInterval: opts.beaconInterval,
    },
  };
}

/**
 * Creates the file of `seg` through `io`: its header, synced, and the folder
 * synced.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { createSegmentFile, newSegmentState } from "./state.ts";
 * import { resolveOptions } from "../options.ts";
 * const dir = await Deno.makeTempDir();
 * const seg = newSegmentState(dir, "0".repeat(32), "t", 1, resolveOptions({}));
 * const file = await createSegmentFile(seg);
 * equal((await file.stat()).size, 128);
 * file.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function createSegmentFile(seg: Segment, io: LogIo = REAL_IO): Promise<Deno.FsFile> {
  const file = await io.open(seg.info.path, {
    read: true,
    write: true,
    create: true,
    truncate: true,
  });
  try {
    await io.write(file, encodeHeader(seg.header));
    await io.syncData(file);
    await io.syncDir(join(seg.info.path, ".."));
  } catch (err) {
    file.close();
    throw err;
  }
  return file;
}

/**
 * Makes a new, empty segment at `first` on disk (closed).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { createSegment } from "./state.ts";
 * import { resolveOptions } from "../options.ts";
 * const meta = { format: 1, name: "t", stream_id: "0".repeat(32), created_us: 0 };
 * const dir = await Deno.makeTempDir();
 * const seg = await createSegment(dir, meta, 1, resolveOptions({}));
 * equal(seg.info.size, 128);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function createSegment(
  dir: string,
  meta: LogMeta,
  first: number,
  opts: ResolvedOptions,
): Promise<Segment> {
  const seg = newSegmentState(dir, meta.stream_id, meta.name, first, opts);
  (await createSegmentFile(seg, opts.io)).close();
  return seg;
}
