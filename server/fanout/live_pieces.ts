/**
 * A commit's batched live text cut into pieces of at most
 * {@linkcode LIVE_PIECE_BYTES}, once per commit, shared by every subscriber.
 *
 * Why: Deno's `WebSocket.send` copies the frame into that socket's own
 * buffer, so a fan-out of one 175 KB commit to 1000 sockets makes 175 MB of
 * copies in one synchronous pass, and the allocator keeps that peak. Cut into
 * pieces, each subscriber is handed only what fits its share of the server's
 * send buffer (`sendBufferBytes`, see server/limits.ts); the pieces that do
 * not fit wait in its queue as references to these shared strings (no copy),
 * and go out as its socket drains.
 *
 * Invariants: the pieces of a commit are its frames, in order, each piece the
 * frames of consecutive rows joined with `\n` (so each is a valid batched
 * frame); `end` of a piece is the offset after its last row (the commit's end
 * for the last piece, so a filtered subscriber moves past rows that matched
 * nothing), or null on an ephemeral stream.
 *
 * @module
 */

import { frameOffset } from "./filtered_frames.ts";

/** Most characters of one live piece (a commit bigger than this is cut at row boundaries). */
export const LIVE_PIECE_BYTES = 16 * 1024;

/** One piece of a commit's batched text: frames `[from, to)` of the commit's frames. */
export interface LivePiece {
  /** The commit's frames (shared; this piece is `frames[from..to)`). */
  readonly frames: readonly string[];
  /** First frame of the piece. */
  readonly from: number;
  /** After its last frame. */
  readonly to: number;
  /** Its frames joined with `\n`: one batched frame (made once, on first use). */
  readonly text: string;
  /** Characters of `text` (known without making it). */
  readonly chars: number;
  /** The offset after its last row (null when ephemeral). */
  readonly end: number | null;
}

class Piece implements LivePiece {
  readonly frames: readonly string[];
  readonly from: number;
  readonly to: number;
  readonly chars: number;
  readonly end: number | null;
  #text: string | null;

  constructor(
    frames: readonly string[],
    from: number,
    to: number,
    chars: number,
    end: number | null,
    text: string | null,
  ) {
    this.frames = frames;
    this.from = from;
    this.to = to;
    this.chars = chars;
    this.end = end;
    this.#text = text;
  }

  get text(): string {
    return this.#text ??= this.to - this.from === 1
      ? this.frames[this.from]
      : this.frames.slice(this.from, this.to).join("\n");
  }
}

/**
 * How live batched frames are sent: the size of a piece (`Infinity`: a
 * commit is one frame, as before pieces; 0: the socket's share of the send
 * buffer, for commits bigger than it), and what a subscriber over its
 * send share does: `queue` keeps references to the shared pieces (bounded by
 * `maxBacklog` rows, then the log), `cursor` goes straight back to catching
 * up from the log, keeping nothing but its next offset. Benchmarks compare
 * them (bench/memory.ts); the server uses the defaults. `withinShare`:
 * whole-commit frames too are handed only within the socket's share.
 *
 * @example
 * ```ts
 * import { livePolicy } from "./live_pieces.ts";
 * console.log(livePolicy.pieceBytes, livePolicy.fallBehind, livePolicy.withinShare); // 0 queue true
 * ```
 */
export const livePolicy: {
  pieceBytes: number;
  fallBehind: "queue" | "cursor";
  withinShare: boolean;
} = {
  // A commit bigger than the socket's share is cut to share-sized pieces
  // (only a large fan-out has a share that small): with 500 stalled of 1000
  // subscribers it peaked at 241-242 MiB against 316 MiB with whole commits,
  // at 0.94-1.41x the batched rows/s of the old one pass (bench/memory.ts,
  // SPEC §3.4.3). Fixed-size pieces always (16 KiB) cost throughput.
  pieceBytes: 0,
  fallBehind: "queue",
  // Whole-commit batched frames only within the socket's share (or to an idle
  // socket), and a drained queue joined only up to the socket's room; false:
  // any frame while under the share, up to 4096 rows per drained frame (the
  // first wave's way, which let every socket hold its share plus a frame).
  withinShare: true,
};

// Pieces per shared commit (and filter group), made on first use.
const cache = new WeakMap<object, LivePiece[]>();

/**
 * The pieces of a commit's `frames` (each `[offset,msg]`), ending before
 * `end`; `joined` gives the frames joined with `\n` (shared, computed once);
 * `key` is the object the pieces are cached under (the commit's shared
 * frames). `filtered`: the frames skip offsets (a `where=` group's picks).
 *
 * @example
 * ```ts
 * import { livePieces } from "./live_pieces.ts";
 * const frames = ['[1,{"a":1}]', '[2,{"a":2}]'];
 * const key = {};
 * const p = livePieces(frames, 3, () => frames.join("\n"), key, false, 12);
 * console.log(p.map((x) => [x.text, x.end])); // [ [ '[1,{"a":1}]', 2 ], [ '[2,{"a":2}]', 3 ] ]
 * console.log(livePieces(frames, 3, () => "", key, false, 12) === p); // true
 * ```
 */
export function livePieces(
  frames: readonly string[],
  end: number | null,
  joined: () => string,
  key: object,
  filtered: boolean,
  pieceBytes: number = livePolicy.pieceBytes,
): LivePiece[] {
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  const n = frames.length;
  let total = n - 1;
  for (let i = 0; i < n && total <= pieceBytes; i++) total += frames[i].length;
  let out: LivePiece[];
  if (total <= pieceBytes) out = [new Piece(frames, 0, n, total, end, n === 1 ? null : joined())];
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
      out.push(new Piece(frames, a, b, chars, pieceEnd, null));
      a = b;
    }
  }
  cache.set(key, out);
  return out;
}
