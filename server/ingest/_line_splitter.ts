/**
 * Splitting bytes into lines with a bound on how much of one line is held.
 * Private to the ingest modules.
 *
 * @module
 */

/** How much of an overlong line the reject record keeps. */
const PREVIEW_BYTES = 1024;

/**
 * A line longer than the limit: its length and its first bytes.
 */
export interface TooLong {
  readonly bytes: number;
  readonly preview: Uint8Array;
}

const EMPTY = new Uint8Array(0);
// Keeps a BOM, so that one inside a region shows (and sends it the slow way).
const regionUtf8 = new TextDecoder("utf-8", { ignoreBOM: true });
const utf8 = new TextEncoder();
// What a region's text must not hold to be split as text: a replacement
// character (bad UTF-8, or a genuine U+FFFD) or a BOM (each line decoded on its
// own drops a leading one).
const NOT_PLAIN = /[\uFEFF\uFFFD]/;

// The preview of an overlong line with more of its bytes, up to PREVIEW_BYTES:
// the first bytes of the line however its chunks fell.
function extend(preview: Uint8Array, bytes: Uint8Array): Uint8Array {
  if (preview.length >= PREVIEW_BYTES || bytes.length === 0) return preview;
  const add = bytes.subarray(0, PREVIEW_BYTES - preview.length);
  return concat([preview, add], preview.length + add.length);
}

function concat(parts: Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * Splits bytes into lines at `\n` (a byte that never occurs inside a multi-byte
 * UTF-8 sequence, so splitting before decoding is safe), stripping one `\r`
 * before it. Holds at most `max` bytes of an unfinished line.
 *
 * The complete lines of a chunk that follow any carried partial line (its
 * *region*) are decoded in one call and handed out as strings: one decode per
 * chunk instead of one per line. That holds when the region is plain valid
 * UTF-8 (no U+FFFD, no BOM) and each line's byte length is known (ASCII, or a
 * region no longer than `max`); otherwise its lines come as bytes, decoded
 * one by one by the caller, as they always were. Either way a line is the
 * same text.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { LineSplitter } from "./_line_splitter.ts";
 * const s = new LineSplitter(1024);
 * s.feed(new TextEncoder().encode("a\r\nb"));
 * equal(s.next(), "a"); // the CR of a CRLF is not part of the line
 * equal(s.next(), null); // "b" waits for its newline
 * deepStrictEqual(s.end(), new Uint8Array([98]));
 * ```
 */
export class LineSplitter {
  readonly #max: number;
  #chunk: Uint8Array = EMPTY;
  #pos = 0;
  #parts: Uint8Array[] = [];
  #partBytes = 0;
  // The region being handed out as text, or null; where its next line starts.
  #text: string | null = null;
  #textPos = 0;
  // The chunk's last newline, and whether its region was tried as text.
  #lastNl = -1;
  #tried = false;
  // A line past the limit, being skipped: its length so far, first bytes, last byte.
  #tooLong: { bytes: number; preview: Uint8Array; last: number } | undefined;

  constructor(max: number) {
    this.#max = max;
  }

  feed(chunk: Uint8Array): void {
    this.#chunk = chunk;
    this.#pos = 0;
    this.#text = null;
    this.#lastNl = chunk.lastIndexOf(10);
    this.#tried = false;
  }

  /**
   * The next complete line of the chunk fed (text, or bytes to decode), or
   * null when it needs more input.
   */
  next(): string | Uint8Array | TooLong | null {
    if (this.#text !== null) {
      const line = this.#nextText(this.#text);
      if (line !== null) return line;
    }
    const chunk = this.#chunk;
    const start = this.#pos;
    if (start >= chunk.length) return null;
    if (
      !this.#tried && this.#partBytes === 0 && this.#tooLong === undefined && start <= this.#lastNl
    ) {
      this.#tried = true;
      if (this.#region(start, this.#lastNl)) return this.next();
    }
    const nl = chunk.indexOf(10, start);
    if (nl === -1) {
      this.#hold(chunk.subarray(start));
      this.#pos = chunk.length;
      return null;
    }
    this.#pos = nl + 1;
    return this.#complete(chunk.subarray(start, nl));
  }

  // Decodes bytes [from, to) of the chunk (to: its last newline) for
  // `#nextText`, if they are plain text whose lines' byte lengths are known.
  #region(from: number, to: number): boolean {
    const bytes = this.#chunk.subarray(from, to);
    const text = regionUtf8.decode(bytes);
    if (text.length !== bytes.length && bytes.length > this.#max) return false;
    if (NOT_PLAIN.test(text)) return false;
    this.#text = text;
    this.#textPos = 0;
    this.#pos = to + 1;
    return true;
  }

  #nextText(text: string): string | TooLong | null {
    const start = this.#textPos;
    if (start > text.length) {
      this.#text = null;
      return null;
    }
    let end = text.indexOf("\n", start);
    if (end === -1) end = text.length;
    this.#textPos = end + 1;
    if (end > start && text.charCodeAt(end - 1) === 13) end--;
    // ASCII unless the region is no longer than the limit (see #region).
    if (end - start > this.#max) {
      const line = text.slice(start, end);
      return { bytes: line.length, preview: utf8.encode(line.slice(0, PREVIEW_BYTES)) };
    }
    return text.slice(start, end);
  }

  /** The last line, if the input did not end with a newline. */
  end(): Uint8Array | TooLong | null {
    if (this.#tooLong === undefined && this.#partBytes === 0) return null;
    return this.#complete(EMPTY);
  }

  #hold(bytes: Uint8Array): void {
    if (this.#tooLong !== undefined) {
      this.#tooLong.bytes += bytes.length;
      if (bytes.length > 0) this.#tooLong.last = bytes[bytes.length - 1];
      this.#tooLong.preview = extend(this.#tooLong.preview, bytes);
      return;
    }
    // One byte of slack for a "\r" that the newline will strip.
    if (this.#partBytes + bytes.length > this.#max + 1) {
      const head = this.#parts.length > 0 ? this.#parts[0] : bytes;
      let preview = head.slice(0, PREVIEW_BYTES);
      if (preview.length < PREVIEW_BYTES && this.#parts.length > 0) {
        this.#parts.push(bytes);
        preview = concat(this.#parts, this.#partBytes + bytes.length).slice(0, PREVIEW_BYTES);
      }
      this.#tooLong = {
        bytes: this.#partBytes + bytes.length,
        preview,
        last: bytes[bytes.length - 1],
      };
      this.#parts = [];
      this.#partBytes = 0;
      return;
    }
    // A copy: the stream may hand us views of buffers it reuses.
    this.#parts.push(bytes.slice());
    this.#partBytes += bytes.length;
  }

  #complete(tail: Uint8Array): Uint8Array | TooLong {
    if (this.#tooLong !== undefined) {
      const { bytes, preview, last } = this.#tooLong;
      this.#tooLong = undefined;
      const cr = (tail.length > 0 ? tail[tail.length - 1] : last) === 13 ? 1 : 0;
      const length = bytes + tail.length - cr;
      // A short overlong line may have its "\r" in the preview.
      return { bytes: length, preview: extend(preview, tail).subarray(0, length) };
    }
    let line = tail;
    if (this.#partBytes > 0) {
      this.#parts.push(tail);
      line = concat(this.#parts, this.#partBytes + tail.length);
      this.#parts = [];
      this.#partBytes = 0;
    }
    if (line.length > 0 && line[line.length - 1] === 13) line = line.subarray(0, line.length - 1);
    if (line.length > this.#max) {
      return { bytes: line.length, preview: line.slice(0, PREVIEW_BYTES) };
    }
    return line;
  }
}
