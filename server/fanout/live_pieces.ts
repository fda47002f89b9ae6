/**
 * A commit's live frames as the runs a live subscriber is handed and queues:
 * for batched text, pieces of at most the socket's share of the send
 * buffer; for the other modes, the whole commit. Made once per commit (and
 * filter group) and shared by every subscriber handed that commit.
 *
 * Why pieces: Deno's `WebSocket.send` copies the frame into that socket's
 * own buffer, so a fan-out of one 175 KB commit to 1000 sockets makes 175 MB
 * of copies in one synchronous pass, and the allocator keeps that peak. Cut
 * into pieces, each subscriber is handed only what fits its share of the
 * server's send buffer (`sendBufferBytes`, see send_budget.ts); the pieces
 * that do not fit wait in its queue as references to these shared strings
 * (no copy), and go out as its socket drains. Only a large fan-out has a
 * share smaller than a commit: with 500 stalled of 1000 subscribers this
 * peaked at 241–242 MiB against 316 MiB with whole-commit frames, at
 * 0.94–1.41× their batched rows/s (docs/SPEC.md §3.4.3).
 *
 * Invariants: the pieces of a commit are its frames, in order, each piece the
 * frames of consecutive rows joined with `\n` (so each is a valid batched
 * frame); `end` of a piece is the offset after its last row (the commit's end
 * for the last piece, so a filtered subscriber moves past rows that matched
 * nothing), or null on an ephemeral stream.
 *
 * @module
 */

import { frameOffset } from "../frames/text_frames.ts";
import type { SharedFrames } from "../frames/shared_frames.ts";

/** One run of a commit's frames: `frames[from..to)` of the commit's frames. */
export interface LivePiece {
  /** The commit's frames (shared; this run is `frames[from..to)`). */
  readonly frames: readonly string[];
  /** First frame of the run. */
  readonly from: number;
  /** After its last frame. */
  readonly to: number;
  /** The offset after its last row (null when ephemeral). */
  readonly end: number | null;
  /** Its frames joined with `\n`: one batched frame (made once, on first use). */
  readonly text: string;
  /** Characters of `text` (known without making it). */
  readonly chars: number;
  /** The commit's shared frames when the run is the whole commit (its Arrow and zstd frames). */
  readonly shared: SharedFrames | null;
}

class Piece implements LivePiece {
  readonly frames: readonly string[];
  readonly from: number;
  readonly to: number;
  readonly end: number | null;
  readonly shared: SharedFrames | null;
  #chars: number;
  #text: string | null = null;

  constructor(
    frames: readonly string[],
    from: number,
    to: number,
    end: number | null,
    chars: number,
    shared: SharedFrames | null,
  ) {
    this.frames = frames;
    this.from = from;
    this.to = to;
    this.end = end;
    this.#chars = chars;
    this.shared = shared;
  }

  get chars(): number {
    if (this.#chars < 0) {
      let n = this.to - this.from - 1;
      for (let i = this.from; i < this.to; i++) n += this.frames[i].length;
      this.#chars = n;
    }
    return this.#chars;
  }

  get text(): string {
    return this.#text ??= this.to - this.from === 1
      ? this.frames[this.from]
      : this.shared !== null
      ? this.shared.joined()
      : this.frames.slice(this.from, this.to).join("\n");
  }
}

// Pieces of batched commits, and whole-commit runs, per commit's shared frames.
const pieceCache = new WeakMap<SharedFrames, LivePiece[]>();
const wholeCache = new WeakMap<SharedFrames, LivePiece>();

/**
 * The pieces of a commit's `frames` (each `[offset,msg]`, ending before
 * `end`) of at most `pieceBytes` characters each (a frame bigger than that is
 * a piece alone); cached under `shared`, the commit's shared frames, so every
 * subscriber handed them gets the same pieces. `filtered`: the frames skip
 * offsets (a `where=` group's picks).
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { livePieces } from "./live_pieces.ts";
 * const frames = ['[1,{"a":1}]', '[2,{"a":2}]'];
 * const shared = { joined: () => frames.join("\n"), arrow: () => new Uint8Array(0) };
 * const p = livePieces(frames, 3, shared, false, 12);
 * deepStrictEqual(p.map((x) => [x.text, x.end]), [['[1,{"a":1}]', 2], ['[2,{"a":2}]', 3]]);
 * equal(livePieces(frames, 3, shared, false, 12), p); // made once per commit
 * ```
 */
export function livePieces(
  frames: readonly string[],
  end: number | null,
  shared: SharedFrames,
  filtered: boolean,
  pieceBytes: number,
): LivePiece[] {
  const hit = pieceCache.get(shared);
  if (hit !== undefined) return hit;
  const n = frames.length;
  let total = n - 1;
  for (let i = 0; i < n && total <= pieceBytes; i++) total += frames[i].length;
  let out: LivePiece[];
  if (total <= pieceBytes) out = [new Piece(frames, 0, n, end, total, shared)];
  else {
    out = [];
    const first = end === null ? 0 : end - n;
    for (let a = 0; a < n;) {
      let b = a;
      let chars = -1;
      while (b < n && (b === a || chars + frames[b].length + 1 <= pieceBytes)) {
        chars += frames[b++].length + 1;
      }
      const pieceEnd = end === null || b === n
        ? end
        : filtered
        ? frameOffset(frames[b - 1]) + 1
        : first + b;
      out.push(new Piece(frames, a, b, pieceEnd, chars, null));
      a = b;
    }
  }
  pieceCache.set(shared, out);
  return out;
}

/**
 * The whole commit as one run (Arrow, single and compressed frames are not
 * cut), cached under `shared` like {@linkcode livePieces}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { wholeCommit } from "./live_pieces.ts";
 * const frames = ['[1,{"a":1}]', '[2,{"a":2}]'];
 * const shared = { joined: () => frames.join("\n"), arrow: () => new Uint8Array(0) };
 * const run = wholeCommit(frames, 3, shared);
 * equal(run.to - run.from, 2);
 * equal(run.chars, 23);
 * equal(wholeCommit(frames, 3, shared), run);
 * ```
 */
export function wholeCommit(
  frames: readonly string[],
  end: number | null,
  shared: SharedFrames,
): LivePiece {
  let run = wholeCache.get(shared);
  if (run === undefined) {
    run = new Piece(frames, 0, frames.length, end, -1, shared);
    wholeCache.set(shared, run);
  }
  return run;
}
