// Readers of a keyed stream on signed tokens, for a long run: subscribers
// (the project's `connect(urls)`) that start from a snapshot (`snapshot=1`:
// each key's latest row, then live) or from an offset, each with a row-level
// grant (the token's `where`) or not and a `where=` of its own or not, and a
// poller of `GET /t/latest`; and the checks of what they got against the
// final log — a reference model of each key's latest row, and of the rows
// a filter lets through, computed from the log alone.
//
// The filters are of the two shapes the stream's columns allow: a set of
// keys (`{"sym": [...]}`) and a bound on the price (`{"px": {"gte": N}}` or
// `{"lt": N}`), alone or both.
import { connect, type Subscription } from "../../../client/mod.ts";
import type { SoakRow, TokenMint } from "./signed_clients.ts";

/** A filter of the soak stream (see the module doc). */
export interface SoakFilter {
  sym?: string[];
  px?: { gte: number } | { lt: number };
}

/** Whether `row` passes `f` (null: every row). */
export function passes(f: SoakFilter | null, row: SoakRow): boolean {
  if (f === null) return true;
  if (f.sym && !f.sym.includes(row.sym)) return false;
  if (f.px && "gte" in f.px && !(row.px >= f.px.gte)) return false;
  if (f.px && "lt" in f.px && !(row.px < f.px.lt)) return false;
  return true;
}

/** A random filter over `syms` (null a quarter of the time when `maybeNone`). */
export function randomFilter(
  random: () => number,
  syms: readonly string[],
  maybeNone = false,
): SoakFilter | null {
  if (maybeNone && random() < 0.25) return null;
  const kind = Math.floor(random() * 3);
  const f: SoakFilter = {};
  if (kind !== 1) {
    const pick = syms.filter(() => random() < 0.4);
    f.sym = pick.length > 0 ? pick : [syms[Math.floor(random() * syms.length)]];
  }
  if (kind !== 0) {
    const at = 10 + Math.floor(random() * 80);
    f.px = random() < 0.5 ? { gte: at } : { lt: at };
  }
  return f;
}

/** One row of the final log: its offset, the row, and its text as `JSON.stringify` gives it. */
export interface LogRow {
  offset: number;
  row: SoakRow;
  text: string;
}

/**
 * The snapshot at `end` under filter `test` (the rows of `log`, in offset
 * order, from its first): each key's latest row below `end`, where that
 * row passes the filter, in offset order (a key whose latest row does not
 * pass is left out, though an earlier row of it may pass).
 */
export function snapshotModel(
  log: readonly LogRow[],
  end: number,
  test: (row: SoakRow) => boolean,
): LogRow[] {
  const latest = new Map<string, LogRow>();
  for (const r of log) {
    if (r.offset >= end) break;
    latest.set(r.row.sym, r);
  }
  return [...latest.values()].filter((r) => test(r.row)).sort((a, b) => a.offset - b.offset);
}

/** Both filters at once: a row must pass each. */
function both(a: SoakFilter | null, b: SoakFilter | null): (row: SoakRow) => boolean {
  return (row) => passes(a, row) && passes(b, row);
}

/**
 * A subscriber on tokens from `mint` (with a row-level grant `grant`, or
 * none), its own `where=` (`own`, or none), from a snapshot or from an
 * offset. Each token expires during the run; the server closes the
 * socket (4401) and `connect` reconnects on a fresh one from its cursor.
 */
export class KeyedReader {
  /** `[offset, row text]` in order of arrival. */
  readonly rows: [number, string][] = [];
  /** The first greeting's snapshot (null: not a snapshot reader, or none). */
  snapshot: { end: number; keys: number } | null = null;
  ended: string | null = null;
  #sub: Subscription<SoakRow> | null = null;
  #reading: Promise<void> | null = null;

  constructor(
    readonly name: string,
    readonly grant: SoakFilter | null,
    readonly own: SoakFilter | null,
    /** "snapshot", or the offset it starts at. */
    readonly from: "snapshot" | number,
  ) {}

  /** What it should get: rows passing both its grant and its own filter. */
  get test(): (row: SoakRow) => boolean {
    return both(this.grant, this.own);
  }

  async start(urls: string[], mint: TokenMint): Promise<void> {
    const claim = { read: ["t"], ...(this.grant ? { where: { t: this.grant } } : {}) };
    const sub = this.#sub = await connect<SoakRow>(urls, {
      reconnect: true,
      token: mint.source(this.name, claim),
      backoff: { minMs: 50, maxMs: 1000 },
      ...(this.from === "snapshot" ? { snapshot: true } : { offset: this.from }),
      ...(this.own ? { where: JSON.stringify(this.own) } : {}),
    });
    const g = sub.greeting as { snapshot?: { end: number; keys: number } };
    if (this.from === "snapshot") this.snapshot = g.snapshot ?? null;
    this.#reading = (async () => {
      try {
        for await (const [offset, row] of sub) this.rows.push([offset!, JSON.stringify(row)]);
        this.ended ??= "the subscription ended";
      } catch (err) {
        this.ended = `the subscription failed: ${err}`;
      }
    })();
  }

  /** Reconnects so far (each token's expiry is one). */
  get reconnects(): number {
    return this.#sub?.reconnects ?? 0;
  }

  /** The offset of the last row received (0: none). */
  get last(): number {
    return this.rows.at(-1)?.[0] ?? 0;
  }

  async stop(): Promise<void> {
    const ended = this.ended;
    await this.#sub?.close();
    await this.#reading;
    this.ended = ended; // closing it is not an ending of its own
  }

  /**
   * What is wrong with what it got, against the final `log` (every row
   * from offset 1 to `end` − 1): rows outside its grant; for a snapshot
   * reader, its first `keys` rows against the model at the snapshot's
   * end; then every later row it should have got, once, in order, and
   * nothing else (no gap, no duplicate).
   */
  check(log: readonly LogRow[], end: number): { grantViolations: number; problems: string[] } {
    const problems: string[] = [];
    let grantViolations = 0;
    for (const [o, text] of this.rows) {
      if (!passes(this.grant, JSON.parse(text))) {
        if (grantViolations++ < 3) problems.push(`${this.name}: row ${o} is outside its grant`);
      }
    }
    let got = this.rows;
    let start: number;
    if (this.from === "snapshot") {
      if (this.snapshot === null) {
        return { grantViolations, problems: [`${this.name}: no snapshot`] };
      }
      const want = snapshotModel(log, this.snapshot.end, this.test);
      const head = got.slice(0, this.snapshot.keys);
      if (want.length !== this.snapshot.keys) {
        problems.push(
          `${this.name}: snapshot at ${this.snapshot.end} has ${this.snapshot.keys} keys, the model ${want.length}`,
        );
      }
      const diff = firstDiff(head, want);
      if (diff !== null) problems.push(`${this.name}: snapshot at ${this.snapshot.end}: ${diff}`);
      got = got.slice(this.snapshot.keys);
      start = this.snapshot.end;
    } else {
      start = this.from;
    }
    const want = log.filter((r) => r.offset >= start && r.offset < end && this.test(r.row));
    const diff = firstDiff(got, want);
    if (diff !== null) {
      problems.push(
        `${this.name}: rows from ${start}: ${diff} (got ${got.length}, want ${want.length})`,
      );
    }
    return { grantViolations, problems };
  }
}

// Where `got` first differs from `want`, or null when they are equal.
function firstDiff(got: readonly [number, string][], want: readonly LogRow[]): string | null {
  const n = Math.min(got.length, want.length);
  for (let i = 0; i < n; i++) {
    if (got[i][0] !== want[i].offset || got[i][1] !== want[i].text) {
      return `#${i}: got [${got[i][0]},${got[i][1]}], want [${want[i].offset},${want[i].text}]`;
    }
  }
  if (got.length > n) return `${got.length - n} rows too many, from offset ${got[n][0]}`;
  if (want.length > n) return `${want.length - n} rows missing, from offset ${want[n].offset}`;
  return null;
}

/** One answer of `GET /t/latest`: its `Streamcast-End` and its lines. */
export interface LatestAnswer {
  node: string;
  end: number;
  lines: [number, string][];
}

/**
 * Polls `GET /t/latest` every `everyMs` on the nodes in turn, with a token
 * from `mint` carrying row-level grant `grant` (or none), keeping each answer
 * for the check against the model at its end.
 */
export class LatestPoller {
  readonly answers: LatestAnswer[] = [];
  readonly problems: string[] = [];
  #timer: ReturnType<typeof setInterval> | undefined;
  #turn = 0;
  #busy = false;

  constructor(
    readonly name: string,
    readonly grant: SoakFilter | null,
    readonly nodes: readonly { name: string; url: string }[],
    readonly mint: TokenMint,
  ) {}

  start(everyMs: number): void {
    this.#timer = setInterval(() => void this.poll(), everyMs);
  }

  async poll(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    const node = this.nodes[this.#turn++ % this.nodes.length];
    try {
      const claim = { read: ["t"], ...(this.grant ? { where: { t: this.grant } } : {}) };
      const token = await this.mint.token(this.name, claim);
      const res = await fetch(`${node.url}/t/latest`, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(5000),
      });
      const body = await res.text();
      if (res.status !== 200) {
        this.problems.push(`${this.name} on ${node.name}: ${res.status} ${body.slice(0, 200)}`);
        return;
      }
      const lines = body.split("\n").filter((l) => l !== "").map((l) => {
        const comma = l.indexOf(",");
        const row = JSON.stringify(JSON.parse(l.slice(comma + 1, -1)));
        return [Number(l.slice(1, comma)), row] as [number, string];
      });
      this.answers.push({ node: node.name, end: Number(res.headers.get("streamcast-end")), lines });
    } catch {
      // a node busy past the timeout: the next poll tries the next node
    } finally {
      this.#busy = false;
    }
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** Answers that differ from the model at their end, as problems (the first few). */
  check(log: readonly LogRow[]): { checked: number; wrong: number; problems: string[] } {
    const problems = [...this.problems];
    let wrong = 0;
    // One pass over the log: the answers in order of their end.
    const byEnd = [...this.answers].sort((a, b) => a.end - b.end);
    const latest = new Map<string, LogRow>();
    let i = 0;
    for (const a of byEnd) {
      while (i < log.length && log[i].offset < a.end) latest.set(log[i].row.sym, log[i++]);
      const want = [...latest.values()].filter((r) => passes(this.grant, r.row))
        .sort((x, y) => x.offset - y.offset);
      const diff = firstDiff(a.lines, want);
      if (diff !== null && wrong++ < 3) {
        problems.push(`${this.name}: /latest on ${a.node} at ${a.end}: ${diff}`);
      }
    }
    return { checked: byEnd.length, wrong, problems };
  }
}
