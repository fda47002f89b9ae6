/**
 * What every ingest shares: the sink rows go to, the reject record and sink,
 * the options, the stats, and the structured events an ingest reports
 * ({@linkcode IngestEvent}: rejects, end of input, upstream connects and
 * disconnects), each with the one-line text `serve` prints for it.
 *
 * @module
 */

/**
 * Where ingested rows go: in the server, a stream.
 */
export interface IngestSink {
  /** The stream name, for messages. */
  readonly name: string;
  /**
   * Validates and appends one row, resolving with its offset (null on an
   * ephemeral stream). Rejects with `RowError` for an invalid row,
   * or with `RangeError` for a row too big to store (a stream's log refuses a
   * row over its `maxPayloadBytes` so); either way nothing is stored and the
   * row is a reject. Any other rejection is a real failure (disk etc.).
   * Offsets are assigned in call order, so calls may be pipelined without
   * awaiting.
   */
  send(row: unknown): Promise<number | null>;
  /**
   * Optional, the fast path for a batch of rows given as JSON texts
   * (`ingestLines` sends each input chunk's lines through it when present):
   * stores the rows in order, the valid ones in as few commits as it can,
   * and tells at once which texts it refused: a `SyntaxError` for a text
   * that is not JSON (a reject, as a line that does not parse is), or what
   * `send` would reject the row with. Nothing of a refused text is stored.
   */
  sendJson?(texts: readonly string[]): IngestBatch;
  /**
   * Optional: resolves once the sink takes rows (at once unless its disk is
   * full: a `DiskFullError`, or a write that failed for lack of space).
   * Without it, a feeder tries again after a second.
   */
  ready?(): Promise<void>;
}

/**
 * What {@linkcode IngestSink.sendJson} returns: the refusals, known at the
 * call, and when the stored rows are durable.
 */
export interface IngestBatch {
  /**
   * `null` when every row was stored; else, per text, its refusal
   * (`SyntaxError`, or the `RowError` or `RangeError` that `send` would
   * reject with) or `undefined` for a row stored.
   */
  readonly refused: readonly (Error | undefined)[] | null;
  /**
   * Resolves once every stored row is durable; rejects with any other
   * failure (disk full…), which stops ingest.
   */
  readonly durable: Promise<unknown>;
}

/**
 * One bad input line or frame, as given to a {@linkcode RejectSink}.
 */
export interface RejectRecord {
  /** The 1-based line number (frame number for an upstream, counted across reconnects). */
  line: number;
  /** Why it was rejected: the parse error, the schema's message, or the handler's error. */
  error: string;
  /** The raw line or frame text (for an overlong line, its first 1024 bytes). */
  input: string;
}

/**
 * Receives every bad line or frame, in input order. A returned promise that
 * rejects (or a throw) stops ingest: a reject that cannot be recorded would be
 * lost silently.
 */
export interface RejectSink {
  /** Records one reject. */
  (rec: RejectRecord): void | Promise<void>;
}
/**
 * Where a reject came from: `source` is what the input is called (`stdin`,
 * or `LinesOptions.source`; `upstream` for a WebSocket), `url` the
 * upstream's URL without credentials.
 */
export interface IngestOrigin {
  /** `stdin` (or the lines' own name), or `upstream`. */
  source: string;
  /** The upstream's URL, credentials hidden; absent for lines. */
  url?: string;
}

/** Fields every {@linkcode IngestEvent} has. */
interface EventBase {
  /** The stream's name. */
  stream: string;
  /** The event as one text line (`streamcast: …`): what `log` receives. */
  msg: string;
}

/**
 * What an ingest reports, in the order it happens. `msg` is the line a
 * text log shows (what {@linkcode IngestOptions.log} receives); the other
 * fields are the same facts, for a structured log.
 *
 * | event | when | fields |
 * |---|---|---|
 * | `reject` | a bad line, frame or row (before `onReject`) | `source`, `url`, `line`, `error`, `input` |
 * | `end_of_input` | the lines ended (not when stopped) | `source`, `accepted`, `rejected` |
 * | `upstream_connected` | a connection opened | `url` |
 * | `upstream_disconnected` | an open connection closed; a reconnect follows | `url`, `code`, `reason`, `error`, `delayMs` |
 * | `upstream_connect_failed` | a connection did not open; a retry follows | `url`, `code`, `error`, `delayMs` |
 * | `upstream_backlog` | too many frames queued: disconnecting to shed load | `url`, `queued`, `limit` |
 * | `upstream_frames_dropped` | frames received but not handled when stopped | `url`, `dropped` |
 * | `upstream_stopped` | the upstream ingest ended | `url`, `accepted`, `rejected` |
 */
export type IngestEvent =
  | (EventBase & IngestOrigin & {
    event: "reject";
    /** The 1-based line (or frame) number. */
    line: number;
    /** Why it was rejected. */
    error: string;
    /** The raw line or frame (for an overlong line, its first 1024 bytes). */
    input: string;
  })
  | (EventBase & { event: "end_of_input"; source: string; accepted: number; rejected: number })
  | (EventBase & { event: "upstream_connected"; url: string })
  | (EventBase & {
    event: "upstream_disconnected";
    url: string;
    code: number;
    reason: string;
    error: string | undefined;
    delayMs: number;
  })
  | (EventBase & {
    event: "upstream_connect_failed";
    url: string;
    code: number;
    error: string | undefined;
    delayMs: number;
  })
  | (EventBase & { event: "upstream_backlog"; url: string; queued: number; limit: number })
  | (EventBase & { event: "upstream_paused"; url: string; detail: string })
  | (EventBase & {
    event: "upstream_resumed";
    url: string;
    /** When the stream stopped taking rows (ISO 8601). */
    missedFrom: string;
    /** When it took rows again and the upstream is reconnected (ISO 8601). */
    missedTo: string;
    /** Rows received and not stored meanwhile. */
    dropped: number;
  })
  | (EventBase & { event: "upstream_frames_dropped"; url: string; dropped: number })
  | (EventBase & { event: "upstream_stopped"; url: string; accepted: number; rejected: number });

/**
 * Options shared by `ingestLines` and `ingestUpstream`.
 */
export interface IngestOptions {
  /** Called for every bad line/frame, in order. */
  onReject?: RejectSink;
  /**
   * Receives every {@linkcode IngestEvent}, in order. When given, `log` is
   * not called.
   */
  onEvent?: (event: IngestEvent) => void;
  /**
   * Status and reject messages, one line each, prefixed `streamcast: ` (each
   * event's `msg`), when there is no `onEvent`.
   *
   * @default {console.error}
   */
  log?: (message: string) => void;
  /**
   * Rows sent to the sink before awaiting the oldest.
   *
   * @default {4096}
   */
  maxInFlight?: number;
  /** Stops ingest: the returned promise resolves once sent rows have settled. */
  signal?: AbortSignal;
}

/**
 * What an ingest did, as `ingestLines` and `ingestUpstream`
 * return it.
 */
export interface IngestStats {
  /** Input lines read, blank ones included (for an upstream: frames received). */
  lines: number;
  /** Rows the sink accepted. */
  accepted: number;
  /** Lines, frames or (from a handler's array) rows rejected. */
  rejected: number;
}
