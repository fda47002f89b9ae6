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
import type { SegmentWriter, WriterState } from "./segment_writer.ts";
import { syncDir } from "./atomic_write.ts";
import { writeAll } from "../common/write_all.ts";
import type { LogMeta } from "./log_meta.ts";
import type { ResolvedOptions } from "./options.ts";

/** Microseconds since the epoch, by `clock` (ms). */
export function nowUs(clock: () => number): number {
  return Math.round(clock() * 1000);
}

/**
 * What the log knows of one segment.
 *
 * @example
 * ```ts
 * import { Log } from "./mod.ts";
 * const log = await Log.open(await Deno.makeTempDir());
 * const info = log.segments()[0];
 * console.log(info.firstOffset, info.sealed); // 1 false
 * await log.close();
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

/** The writer state of an empty segment. */
export function initialState(): WriterState {
  return { physEnd: HEADER_BYTES, lastOffset: 0, lastTimeUs: 0, running: RUNNING_SEED, count: 0 };
}

/** A new, empty segment starting at `first` (nothing on disk yet). */
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

/** Creates the file of `seg`: its header, synced, and the folder synced. */
export async function createSegmentFile(seg: Segment): Promise<Deno.FsFile> {
  const file = await Deno.open(seg.info.path, {
    read: true,
    write: true,
    create: true,
    truncate: true,
  });
  try {
    await writeAll(file, encodeHeader(seg.header));
    await file.syncData();
    await syncDir(join(seg.info.path, ".."));
  } catch (err) {
    file.close();
    throw err;
  }
  return file;
}

/** Makes a new, empty segment at `first` on disk (closed). */
export async function createSegment(
  dir: string,
  meta: LogMeta,
  first: number,
  opts: ResolvedOptions,
): Promise<Segment> {
  const seg = newSegmentState(dir, meta.stream_id, meta.name, first, opts);
  (await createSegmentFile(seg)).close();
  return seg;
}
