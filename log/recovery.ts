/**
 * Opening a log folder: read `log.json` (or make it), check every segment
 * under the one reading rule (`segment/scan.ts`), cut a torn tail off the last
 * one, remove an empty segment a fence left behind, refuse any other damage
 * naming file and byte, and make the active segment ready for appends.
 *
 * @module
 */

import { join } from "node:path";
import {
  FORMAT_VERSION,
  HEADER_BYTES,
  Layout,
  parseSegmentFileName,
  RUNNING_SEED,
  segmentFileName,
  type SegmentHeader,
} from "./segment/format.ts";
import { readHeader, seekStart, segmentStart } from "./segment/reader.ts";
import { LogCorruptError } from "./errors.ts";
import { SegmentWriter, type WriterState } from "./segment/writer.ts";
import { scanSegmentRecords } from "./segment/scan.ts";
import {
  checkSegmentStreamId,
  type LogMeta,
  mayBeFenceLeftover,
  readMeta,
  writeMeta,
} from "./log_meta.ts";
import type { LogOptions, ResolvedOptions } from "./options.ts";
import { type Active, createSegment, initialState, nowUs, type Segment } from "./segment/state.ts";
import { readManifest } from "./chunk/manifest_file.ts";

/** What opening found: the metadata, the segments (oldest first), the active one. */
export interface Recovered {
  meta: LogMeta;
  segments: Segment[];
  active: Active;
}

function randomId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * Opens the log in `dir` for writing (the caller holds its lock): checks and
 * recovers its segments, creating `log.json` and a first segment when the
 * folder holds no log.
 *
 * @throws {LogCorruptError} on damage other than a torn tail.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { recoverLog } from "./recovery.ts";
 * import { resolveOptions } from "./options.ts";
 * const dir = await Deno.makeTempDir();
 * const { meta, segments } = await recoverLog(dir, {}, resolveOptions({}));
 * equal(meta.stream_id.length, 32);
 * equal(segments.length, 1);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function recoverLog(
  dir: string,
  options: LogOptions,
  opts: ResolvedOptions,
): Promise<Recovered> {
  const firsts: number[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const first = entry.isFile ? parseSegmentFileName(entry.name) : null;
    if (first !== null) firsts.push(first);
  }
  firsts.sort((a, b) => a - b);
  const read = await readMeta(dir);
  let meta = read?.meta ?? null;
  const checked = read?.checked ?? true;
  const defaultName = dir.split("/").filter(Boolean).pop() ?? "";
  if (!meta) {
    let streamId = options.streamId ?? randomId();
    let name = options.name ?? (defaultName === "_" ? "" : defaultName);
    if (firsts.length > 0) {
      // Segments without metadata (a crash between the two at creation): the
      // headers still say whose they are.
      const f = await Deno.open(join(dir, segmentFileName(firsts[0])), { read: true });
      try {
        const h = await readHeader(f, join(dir, segmentFileName(firsts[0])));
        streamId = h.streamId;
        name = h.name;
      } finally {
        f.close();
      }
    }
    if (!/^[0-9a-f]{32}$/.test(streamId)) {
      throw new TypeError(`streamId must be 32 lowercase hex characters, got ${streamId}`);
    }
    meta = {
      format: FORMAT_VERSION,
      name,
      stream_id: streamId,
      created_us: nowUs(opts.clock),
      first_offset: firsts.length > 0 ? firsts[0] : Math.max(1, options.firstOffset ?? 1),
      fenced: [],
    };
    await writeMeta(dir, meta, opts.io);
  }
  const segments: Segment[] = [];
  let tailState: WriterState = initialState();
  for (let i = 0; i < firsts.length; i++) {
    const path = join(dir, segmentFileName(firsts[i]));
    const last = i === firsts.length - 1;
    const scanned = await scanSegment(path, meta, checked, last, opts);
    if (!scanned) continue; // an empty, unsealed segment left by a fence: removed
    segments.push(scanned.segment);
    tailState = scanned.state;
  }
  for (let i = 1; i < segments.length; i++) {
    const prev = segments[i - 1].info;
    if (segments[i].info.firstOffset < prev.firstOffset + prev.count) {
      throw new LogCorruptError(
        segments[i].info.path,
        0,
        `segment starts at ${segments[i].info.firstOffset}, inside the previous segment`,
      );
    }
  }
  let tail = segments.at(-1);
  if (!tail || tail.info.sealed) {
    // A new log, or a crash right after sealing: start the next segment —
    // after its chunks when they hold everything (a crash after the last
    // sealed segment was chunked and deleted, before the next one's file
    // was made: a full disk, say).
    const chunked = tail ? 0 : ((await readManifest(dir).catch(() => null))?.through ?? 0);
    const first = tail
      ? tail.info.firstOffset + tail.info.count
      : Math.max(1, options.firstOffset ?? 1, chunked + 1);
    tail = await createSegment(dir, meta, first, opts);
    segments.push(tail);
    tailState = initialState();
  }
  const file = await opts.io.open(tail.info.path, { read: true, write: true });
  await file.seek(tail.info.size, Deno.SeekMode.Start);
  const state = tailState;
  const active: Active = {
    seg: tail,
    writer: new SegmentWriter(tail.layout.interval, state),
    file,
    durable: state,
  };
  return { meta, segments, active };
}

// Reads a segment's header and checks its records: all of them for sealed
// segments (and for the tail with verify "all"), from the last beacon for the
// tail otherwise. Cuts a torn tail off the last segment.
async function scanSegment(
  path: string,
  meta: LogMeta,
  checked: boolean,
  last: boolean,
  opts: ResolvedOptions,
): Promise<{ segment: Segment; state: WriterState } | null> {
  const file = last
    ? await opts.io.open(path, { read: true, write: true })
    : await Deno.open(path, { read: true });
  try {
    const size = (await file.stat()).size;
    let header: SegmentHeader;
    try {
      header = await readHeader(file, path);
    } catch (err) {
      if (last && size < HEADER_BYTES + 1 && err instanceof LogCorruptError) {
        // Torn while being created: it never held a row. Make it anew.
        const first = parseSegmentFileName(path.split("/").pop()!)!;
        file.close();
        await opts.io.remove(path);
        return {
          segment: await createSegment(join(path, ".."), meta, first, opts),
          state: initialState(),
        };
      }
      throw err;
    }
    await checkSegmentStreamId(join(path, ".."), meta, checked, path, header.streamId);
    const expectName = parseSegmentFileName(path.split("/").pop()!);
    if (header.firstOffset !== expectName) {
      throw new LogCorruptError(
        path,
        24,
        `first offset ${header.firstOffset} does not match the file name`,
      );
    }
    const layout = new Layout(header.beaconInterval);
    const start = last && opts.verify === "tail"
      ? await seekStart(file, header, size, Number.MAX_SAFE_INTEGER)
      : segmentStart(header);
    const cursor = await scanSegmentRecords(file, path, header, {
      size,
      last,
      start,
      maxPayloadBytes: opts.maxPayloadBytes,
    });
    let { firstTimeUs } = cursor;
    const { lastTimeUs } = cursor;
    const sealed = cursor.endMark !== null;
    const count = cursor.nextOffset - header.firstOffset;
    const leftover = mayBeFenceLeftover(meta, header.firstOffset);
    if (!sealed && !last && count === 0 && cursor.physicalEnd === size && leftover) {
      // A fence made the next segment before removing this empty one.
      file.close();
      await opts.io.remove(path);
      return null;
    }
    if (!sealed && !last) {
      throw new LogCorruptError(path, cursor.physicalEnd, "sealed segment has no end mark");
    }
    const end = cursor.physicalEnd;
    if (end < size) {
      if (sealed) {
        throw new LogCorruptError(path, end, `${size - end} bytes after the end mark`);
      }
      // The torn tail was never acknowledged: cut it off.
      await opts.io.truncate(file, end);
      await opts.io.syncData(file);
    }
    if (start.phys !== HEADER_BYTES && firstTimeUs === 0 && count > 0) {
      firstTimeUs = header.createdUs;
    }
    const segment: Segment = {
      header,
      layout,
      info: {
        path,
        firstOffset: header.firstOffset,
        count,
        size: end,
        sealed,
        createdUs: header.createdUs,
        firstTimeUs,
        lastTimeUs,
        beaconInterval: header.beaconInterval,
      },
    };
    const state: WriterState = {
      physEnd: end,
      lastOffset: count > 0 ? cursor.nextOffset - 1 : 0,
      lastTimeUs,
      running: cursor.running ?? RUNNING_SEED,
      count,
    };
    return { segment, state };
  } finally {
    try {
      file.close();
    } catch {
      // already closed above, before removing an empty segment
    }
  }
}
