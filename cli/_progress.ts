/**
 * A progress line for long CLI work (export, restore, verify, catch-up): one
 * line on stderr, redrawn at most every 250 ms, only when stderr is a terminal,
 * so pipes and logs stay quiet.
 *
 * @module
 */

const REDRAW_MS = 250;
const encoder = new TextEncoder();

/** What a {@linkcode Progress} line shows. */
export interface ProgressState {
  /** Rows done so far (absent: work not counted in rows). */
  rows?: number;
  /** The last offset done, when known. */
  offset?: number | null;
  /** The last offset to do, when known: shows "offset X of Y". */
  total?: number | null;
  /** More to say, at the end of the line (`12.5 MiB written`). */
  detail?: string;
}

/** Options of {@linkcode Progress}. */
export interface ProgressOptions {
  /** Whether to draw at all. @default Deno.stderr.isTerminal() */
  enabled?: boolean;
  /** Where the drawing goes. @default stderr */
  write?: (text: string) => void;
}

/**
 * Draws `label: N rows, R rows/s, offset X of Y` on stderr while work goes on.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { Progress } from "./_progress.ts";
 * const p = new Progress("export", { enabled: false });
 * p.update({ rows: 10, offset: 10, total: 100 });
 * p.done();
 * ok(p.line({ rows: 10, offset: 10, total: 100 }).startsWith("export: 10 rows"));
 * ```
 */
export class Progress {
  readonly #label: string;
  readonly #enabled: boolean;
  readonly #write: (text: string) => void;
  readonly #started = performance.now();
  #drawnAt = -Infinity;
  #drawn = false;
  #last: ProgressState = {};

  /** `enabled` defaults to whether stderr is a terminal. */
  constructor(label: string, options: ProgressOptions = {}) {
    this.#label = label;
    this.#enabled = options.enabled ?? Deno.stderr.isTerminal();
    this.#write = options.write ?? ((text) => Deno.stderr.writeSync(encoder.encode(text)));
  }

  /** The text of the line for `s`. */
  line(s: ProgressState): string {
    const parts: string[] = [];
    if (s.rows !== undefined) {
      const secs = Math.max((performance.now() - this.#started) / 1000, 1e-3);
      parts.push(`${s.rows} rows`, `${Math.round(s.rows / secs)} rows/s`);
    }
    if (s.offset != null) {
      parts.push(`offset ${s.offset}${s.total != null ? ` of ${s.total}` : ""}`);
    }
    if (s.detail !== undefined) parts.push(s.detail);
    return `${this.#label}: ${parts.join(", ")}`;
  }

  /** Records progress; redraws when enough time has passed. */
  update(s: ProgressState): void {
    this.#last = s;
    if (!this.#enabled) return;
    const now = performance.now();
    if (now - this.#drawnAt < REDRAW_MS) return;
    this.#drawnAt = now;
    this.#draw();
  }

  /** Draws the final state and ends the line. */
  done(): void {
    if (!this.#enabled) return;
    this.#draw();
    this.#write("\n");
  }

  #draw(): void {
    this.#write(`\r\x1b[2K${this.line(this.#last)}`);
    this.#drawn = true;
  }

  /** Whether a line was drawn. */
  get drawn(): boolean {
    return this.#drawn;
  }
}
