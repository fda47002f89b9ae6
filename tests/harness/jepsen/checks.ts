// The checks of the Jepsen-style cluster test, against the final log (what
// every node shows once healed and converged). Each returns the problems it
// found as lines, rather than throwing at the first, so that a failing seed
// reports everything wrong with its run beside its history.
import type { Ack } from "./cluster_clients.ts";
import type { Row, Seen } from "./clients.ts";

/** The final log: offset → row, offsets 1..end-1. */
export type Log = Map<number, Row>;

/** Parses `[offset, text]` pairs into a log, noting gaps and offsets twice. */
export function logOf(shown: [number, string][], problems: string[]): Log {
  const log: Log = new Map();
  shown.forEach(([o, text], k) => {
    if (o !== k + 1) problems.push(`final log: offset ${o} at position ${k + 1}`);
    log.set(o, JSON.parse(text));
  });
  return log;
}

const key = (r: Row) => `${r.p}/${r.seq}/${r.i}`;

/** Every row is in the log once: no (producer, seq, i) twice. */
export function checkOnce(log: Log, problems: string[]): Map<string, number> {
  const at = new Map<string, number>();
  for (const [o, r] of log) {
    const k = key(r);
    if (at.has(k)) problems.push(`row ${k} stored twice: at ${at.get(k)} and ${o}`);
    else at.set(k, o);
  }
  return at;
}

/**
 * A producer that acknowledges by seq (HTTP, or the publish socket): each
 * acknowledged seq's `rows` rows at its offsets; the seqs in the log are
 * exactly 1..max, none missing (an HTTP producer sends a seq until it is
 * acknowledged; a socket producer drops only seqs a greeting said were
 * stored).
 */
export function checkSeqProducer(
  id: string,
  acks: Ack[],
  rows: number,
  log: Log,
  problems: string[],
): void {
  for (const a of acks) {
    if (a.last - a.first + 1 !== rows) {
      problems.push(`${id} seq ${a.seq}: acknowledged ${a.first}..${a.last}, not ${rows} rows`);
    }
    for (let o = a.first; o <= a.last; o++) {
      const r = log.get(o);
      if (!r || r.p !== id || r.seq !== a.seq || r.i !== o - a.first) {
        problems.push(`${id} seq ${a.seq} acknowledged at ${o}, the log has ${JSON.stringify(r)}`);
      }
    }
  }
  const seqs = new Set([...log.values()].filter((r) => r.p === id).map((r) => r.seq));
  // A loop, not Math.max(...): an hour's soak has more seqs than a call takes arguments.
  let max = 0;
  for (const s of seqs) max = Math.max(max, s);
  for (const a of acks) max = Math.max(max, a.seq);
  for (let s = 1; s <= max; s++) {
    if (!seqs.has(s)) problems.push(`${id} seq ${s} missing from the log (max ${max})`);
  }
}

/**
 * `publisher()`'s rows: each resolved one at its offset, each answer_lost
 * one in the log, none refused for a full disk in it.
 */
export function checkLibraryProducer(
  id: string,
  resolved: Map<number, number>,
  answerLost: Set<number>,
  sent: number,
  at: Map<string, number>,
  problems: string[],
  diskFull: ReadonlySet<number> = new Set(),
): void {
  for (const k of diskFull) {
    if (at.has(`${id}/${k}/0`)) problems.push(`${id} row ${k} (disk_full) is in the log`);
  }
  for (const [k, offset] of resolved) {
    const o = at.get(`${id}/${k}/0`);
    if (o !== offset) {
      problems.push(`${id} row ${k} resolved with ${offset}, the log has it at ${o}`);
    }
  }
  for (const k of answerLost) {
    if (!at.has(`${id}/${k}/0`)) problems.push(`${id} row ${k} (answer_lost) is not in the log`);
  }
  for (const [k] of at) {
    const [p, seq] = k.split("/");
    if (
      p === id && !resolved.has(Number(seq)) && !answerLost.has(Number(seq)) &&
      !diskFull.has(Number(seq))
    ) {
      problems.push(`${id} row ${seq} is in the log but its send was not answered`);
    }
  }
  if (resolved.size + answerLost.size + diskFull.size !== sent) {
    problems.push(
      `${id}: ${sent} sent, ${resolved.size + answerLost.size + diskFull.size} answered`,
    );
  }
}

/**
 * A subscriber saw, in order, exactly the rows of the final log it asked for
 * over offsets 1..its last one: every offset (or every matching one) once, no
 * gap, no row twice, no row the log does not hold; and it got to the end.
 */
export function checkSeen(s: Seen, log: Log, problems: string[]): void {
  const want = [...log].filter(([, r]) => !s.filter || s.filter.matches(r));
  const got = s.rows;
  const n = Math.min(want.length, got.length);
  for (let k = 0; k < n; k++) {
    const [o, text] = got[k];
    const [wo, wr] = want[k];
    if (o !== wo || JSON.stringify(JSON.parse(text)) !== JSON.stringify(wr)) {
      problems.push(
        `${s.name}: row #${k + 1} was ${o} ${text}, the log's ${wo} ${JSON.stringify(wr)}` +
          (o < wo ? " (a row twice, or out of order)" : " (a gap, or a row the log lacks)"),
      );
      return; // the rest follows from the first difference
    }
  }
  if (got.length > want.length) {
    problems.push(`${s.name}: saw ${got.length - want.length} rows past the log's end`);
  } else if (got.length < want.length) {
    problems.push(
      `${s.name}: stopped at ${got.length} of ${want.length} rows${s.ended ? ` (${s.ended})` : ""}`,
    );
  }
}
