// client/_describe.ts
function describe(v) {
  if (v === null) return "null";
  if (v === void 0) return "undefined";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") {
    return `string ${JSON.stringify(v.length > 60 ? v.slice(0, 60) + "\u2026" : v)}`;
  }
  if (typeof v === "function") return "a function";
  if (typeof v === "object") {
    const name = v.constructor?.name;
    return name && name !== "Object" ? `an object (${name})` : "an object";
  }
  return `${typeof v} ${String(v)}`;
}

// client/since.ts
var RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;
var MICROS = /^\d{1,16}$/;
var MAX_SINCE_US = Number.MAX_SAFE_INTEGER;
function daysIn(year, month) {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}
function parseSince(text) {
  if (MICROS.test(text)) {
    const us2 = Number(text);
    if (us2 <= MAX_SINCE_US) return us2;
  }
  const m = RFC3339.exec(text);
  if (!m) {
    throw new RangeError(`since must be RFC 3339 (2026-12-01T09:30:00Z) or \xB5s since the epoch, got ${text.length > 40 ? `${text.slice(0, 37)}...` : text}`);
  }
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 60) {
    throw new RangeError(`since names no real time: ${text}`);
  }
  const fraction = Number((m[7] ?? "").padEnd(6, "0").slice(0, 6));
  let offsetMin = 0;
  if (m[9]) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) throw new RangeError(`since has a bad UTC offset: ${text}`);
    offsetMin = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  const ms = Date.UTC(year, month - 1, day, hour, minute, Math.min(second, 59)) - offsetMin * 6e4;
  const us = ms * 1e3 + fraction;
  if (!Number.isSafeInteger(us) || us < 0) {
    throw new RangeError(`since must be between 1970 and 2255, got ${text}`);
  }
  return us;
}
function sinceMicros(value) {
  if (value instanceof Date) {
    const ms = value.getTime();
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`since: invalid Date`);
    return ms * 1e3;
  }
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`since must be an integer of \xB5s >= 0, got ${value}`);
    }
    return value;
  }
  if (typeof value === "string") return parseSince(value);
  throw new TypeError(`since must be a Date, \xB5s or RFC 3339 text, got ${typeof value}`);
}

// client/wire.ts
var PROTOCOL_VERSION = 2;
var CloseCode = {
  /** Server shutting down; reconnect with your next offset. */
  GoingAway: 1001,
  /** The client sent a data frame; subscriptions are read-only. */
  PolicyViolation: 1008,
  /** The runtime's own message size limit fired. */
  MessageTooBig: 1009,
  /** The server failed while serving this subscriber (e.g. reading the log failed). */
  InternalError: 1011,
  /** Too many subscribers on this stream or connections on the server; try again later. */
  TryAgainLater: 1013,
  /** The path or query does not parse. */
  Protocol: 4400,
  /** Access denied (bearer token missing or not valid for this stream). */
  Unauthorized: 4401,
  /** No such stream. */
  NotFound: 4404,
  /** That offset cannot be served. */
  NotReplayable: 4416,
  /** Too slow; resume at the offset in the reason. */
  TooSlow: 4429
};
var NOT_REPLAYABLE_WHYS = [
  "not_durable",
  "other_stream",
  "ahead",
  "empty",
  "evicted",
  "too_old"
];
function decodeCloseReason(text) {
  if (!text.startsWith("{")) return null;
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && typeof v.error === "string" ? v : null;
  } catch {
    return null;
  }
}
var SUBPROTOCOL = "streamcast";
var BEARER_PROTOCOL_PREFIX = "bearer.";
var TOKEN_PATTERN = /^[A-Za-z0-9._~-]{16,512}$/;
var MAX_OFFSET = Number.MAX_SAFE_INTEGER;
function subscribeUrl(url, query) {
  const u = new URL(url);
  if (u.protocol === "http:") u.protocol = "ws:";
  if (u.protocol === "https:") u.protocol = "wss:";
  for (const key of [
    "offset",
    "stream_id",
    "frames",
    "where",
    "since"
  ]) {
    u.searchParams.delete(key);
  }
  if (query.since !== void 0 && query.since !== null) {
    u.searchParams.set("since", String(query.since));
  } else if (query.offset !== void 0 && query.offset !== null) {
    u.searchParams.set("offset", String(query.offset));
  }
  if (query.where !== void 0 && query.where !== null) {
    u.searchParams.set("where", typeof query.where === "string" ? query.where : JSON.stringify(query.where));
  }
  if (query.streamId) u.searchParams.set("stream_id", query.streamId);
  if (query.frames && query.frames !== "single") u.searchParams.set("frames", query.frames);
  return u.toString();
}
function splitBatch(frame) {
  return frame.split("\n");
}

// client/errors.ts
var RECONNECT_CODES = [
  1e3,
  CloseCode.GoingAway,
  1005,
  1006,
  1011,
  1012,
  1013,
  1014,
  CloseCode.TooSlow
];
function streamName(url) {
  try {
    const path = decodeURIComponent(new URL(url).pathname);
    const name = path.replace(/^\/+/, "").split("/")[0];
    return name === "_" ? "" : name;
  } catch {
    return url;
  }
}
function quoteStream(url) {
  const name = streamName(url);
  return name === "" ? "the unnamed stream" : `stream "${name}"`;
}
function num(v) {
  return typeof v === "number" && Number.isFinite(v) ? v : void 0;
}
var SubscriptionError = class extends Error {
  /** The WebSocket close code, or `null` when the client detected the problem itself. */
  code;
  /** The close reason as received (`""` when none). */
  reason;
  /** The stream URL. */
  url;
  /** Makes the error; `code` is the close code (or `null`). */
  constructor(message, code, reason, url) {
    super(message);
    this.name = "SubscriptionError";
    this.code = code;
    this.reason = reason;
    this.url = url;
  }
  /** Whether `reconnect: true` connects again after this error. */
  get reconnectable() {
    return this.code !== null && RECONNECT_CODES.includes(this.code);
  }
};
var ProtocolError = class extends SubscriptionError {
  /** What did not parse or was out of order. */
  detail;
  /** Makes the error; `code` is 4400 for a refusal, `null` for a client-side check. */
  constructor(detail, url, code = null, reason = "") {
    super(code === CloseCode.Protocol ? `subscribe to ${url} refused (4400): ${detail}. Check the URL's path and query (the client sets offset, stream_id and frames itself)` : `protocol error on ${url}: ${detail}`, code, reason, url);
    this.name = "ProtocolError";
    this.detail = detail;
  }
};
var StreamNotFound = class extends SubscriptionError {
  /** The stream name asked for. */
  stream;
  /** Makes the error for `stream` at `url`; `code` is `null` for an HTTP 404. */
  constructor(stream, url, reason = "", code = CloseCode.NotFound) {
    const base = new URL(url);
    base.pathname = "/_/streams";
    base.search = "";
    base.protocol = base.protocol === "wss:" ? "https:" : base.protocol === "ws:" ? "http:" : base.protocol;
    super(`no ${stream === "" ? "unnamed stream" : `stream "${stream}"`} at ${url} (${code === null ? "HTTP 404" : code}): check the name; GET ${base} lists the streams this server has`, code, reason, url);
    this.name = "StreamNotFound";
    this.stream = stream;
  }
};
function notReplayableMessage(url, i) {
  const s = quoteStream(url);
  const at = i.offset !== void 0 ? `offset ${i.offset}` : "the offset asked for";
  switch (i.why) {
    case "not_durable":
      return `${s} is ephemeral (it has no log), so ${at} cannot be replayed (4416 not_durable). Subscribe live: no offset and no cursor.`;
    case "other_stream":
      return `${s} is not the log your position came from (4416 other_stream): you sent stream_id ${i.streamId ?? "(unknown)"}, and the server's log has another id (it was wiped and recreated, or this is another server). Your offset means nothing here: delete the saved cursor and start again at offset "earliest" or live, knowing that rows of the old log are not on this one.`;
    case "ahead":
      return `${at} is ahead of ${s}, whose end is ${i.endOffset ?? "(unknown)"} (the next offset to be written) (4416 ahead). The position came from a longer or another log, or is a typo: check the stream_id, then subscribe at ${i.endOffset ?? "the end"} to go live or at "earliest" to re-read what is there.`;
    case "empty":
      return `${s} holds no row it can serve below its end ${i.endOffset ?? "(unknown)"}, so ${at} cannot be replayed (4416 empty: everything was evicted). Subscribe at ${i.endOffset ?? "the end"} (live) or at "earliest"; older rows are only in the archive, if the stream has one.`;
    case "evicted": {
      const gap = i.offset !== void 0 && typeof i.earliest === "number" ? ` (a gap of ${i.earliest - i.offset} offsets)` : "";
      return `${at} was evicted from ${s}: the earliest offset it still serves is ${i.earliest ?? "(unknown)"} (4416 evicted). Read ${i.offset ?? "the offset"}..${typeof i.earliest === "number" ? i.earliest - 1 : "earliest-1"} from the archive first, or resume at "earliest" accepting the gap${gap}.`;
    }
    case "too_old": {
      const oldest = i.endOffset !== void 0 && i.maxReplay !== void 0 ? ` (about offset ${Math.max(1, i.endOffset - i.maxReplay)})` : "";
      return `${at} of ${s} is ${i.rows ?? "more"} rows behind its end ${i.endOffset ?? "(unknown)"}, more than the server's max_replay of ${i.maxReplay ?? "(unknown)"} (4416 too_old). Resume within the last ${i.maxReplay ?? "max_replay"} rows${oldest}, read the gap from the archive, or ask the operator to raise --max-replay.`;
    }
    default:
      return `${s} cannot serve ${at} (4416; the server gave no reason that this client understands). Subscribe live or at "earliest", or check the server's version.`;
  }
}
var NotReplayable = class extends SubscriptionError {
  /** Why the offset cannot be served (`null`: the reason was missing or not JSON). */
  why;
  /** The offset asked for, when known. */
  offset;
  /** The earliest offset the stream still serves, when sent. */
  earliest;
  /** The stream's end offset (exclusive), when sent. */
  endOffset;
  /** Rows between `offset` and `endOffset`, when sent (`too_old`). */
  rows;
  /** The server's `max_replay`, when sent (`too_old`). */
  maxReplay;
  /** Makes the error from what is known about the refusal. */
  constructor(url, info, reason = "") {
    super(notReplayableMessage(url, info), CloseCode.NotReplayable, reason, url);
    this.name = "NotReplayable";
    this.why = info.why;
    this.offset = info.offset;
    this.earliest = info.earliest;
    this.endOffset = info.endOffset;
    this.rows = info.rows;
    this.maxReplay = info.maxReplay;
  }
};
var TooSlow = class extends SubscriptionError {
  /** The offset to resume at, or `null` (ephemeral stream, or not sent). */
  resume;
  /** Makes the error. */
  constructor(url, resume, reason = "") {
    super(`${quoteStream(url)} dropped this subscriber for reading too slowly (4429). ` + (resume !== null ? `Resume at offset ${resume} (reconnect: true does this).` : `The stream is ephemeral: rows sent meanwhile are lost; subscribe live again (reconnect: true does this) and read faster, or ask for a larger --max-backlog.`), CloseCode.TooSlow, reason, url);
    this.name = "TooSlow";
    this.resume = resume;
  }
};
function describeCode(code) {
  switch (code) {
    case null:
      return "no close code";
    case 1e3:
      return "1000: closed normally by the server";
    case 1001:
      return "1001: the server is shutting down";
    case 1005:
      return "1005: closed without a status";
    case 1006:
      return "1006: connection dropped or refused, no close frame";
    case 1008:
      return "1008: policy violation (subscriptions are read-only)";
    case 1009:
      return "1009: message too big";
    case 1011:
      return "1011: server error";
    case 4401:
      return "4401: not authorized";
    default:
      return String(code);
  }
}
var ConnectionClosed = class extends SubscriptionError {
  /** Whether the close handshake completed (false for a drop). */
  wasClean;
  /** The offset to resume at, when the client knows one. */
  resume;
  /**
   * Makes the error. `resume` is the next offset the client would read;
   * `detail` replaces the description of the code (e.g. a timeout).
   */
  constructor(url, code, reason, resume = null, detail, wasClean = false) {
    const tail = resume !== null ? ` Resume at offset ${resume} with the same stream_id (reconnect: true does this).` : "";
    super(`connection to ${url} closed (${detail ?? describeCode(code)})` + (reason ? `: ${reason}` : "") + "." + tail, code, reason, url);
    this.name = "ConnectionClosed";
    this.wasClean = wasClean;
    this.resume = resume;
  }
};
function closeError(code, reason, ctx, resume = null, wasClean = true) {
  const r = decodeCloseReason(reason);
  const f = r ?? {};
  const asked = typeof ctx.offset === "number" ? ctx.offset : void 0;
  switch (code) {
    case CloseCode.Protocol:
      return new ProtocolError(typeof f.detail === "string" ? f.detail : reason || "the server gave no detail", ctx.url, code, reason);
    case CloseCode.NotFound:
      return new StreamNotFound(typeof f.stream === "string" ? f.stream : streamName(ctx.url), ctx.url, reason);
    case CloseCode.NotReplayable: {
      const why = NOT_REPLAYABLE_WHYS.includes(f.why) ? f.why : null;
      return new NotReplayable(ctx.url, {
        why,
        offset: num(f.offset) ?? asked,
        earliest: f.earliest === null ? null : num(f.earliest),
        endOffset: num(f.end_offset),
        rows: num(f.rows),
        maxReplay: num(f.max_replay),
        streamId: ctx.streamId
      }, reason);
    }
    case CloseCode.TooSlow:
      return new TooSlow(ctx.url, num(f.resume) ?? resume, reason);
    default:
      return new ConnectionClosed(ctx.url, code, reason, resume, void 0, wasClean);
  }
}

// client/head.ts
function headUrl(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`not a URL: ${JSON.stringify(String(url))}`);
  }
  if (u.protocol === "ws:") u.protocol = "http:";
  else if (u.protocol === "wss:") u.protocol = "https:";
  else if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new TypeError(`a stream URL is ws://, wss://, http:// or https://, got ${u}`);
  }
  const name = u.pathname.replace(/^\/+|\/+$/g, "");
  if (name.includes("/")) {
    throw new TypeError(`a stream URL's path is /NAME (or / for the unnamed stream), got ${u.pathname}`);
  }
  u.pathname = name === "" || name === "_" ? "/_/head" : `/${name}/head`;
  u.search = "";
  u.hash = "";
  return u.toString();
}
async function fetchHead(url, init = {}) {
  const at = headUrl(url);
  const res = await fetch(at, {
    signal: init.signal,
    headers: init.headers
  });
  const text = await res.text();
  if (res.status === 404) {
    const name = new URL(at).pathname.split("/")[1];
    throw new StreamNotFound(name === "_" ? "" : decodeURIComponent(name), String(url), text.trim(), null);
  }
  if (!res.ok) {
    throw new Error(`GET ${at} answered ${res.status} ${res.statusText}: ${text.trim().slice(0, 200)}`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`GET ${at} did not answer JSON: ${JSON.stringify(text.slice(0, 80))}`);
  }
}

// client/catch_up.ts
var CATCH_UP_KEYS = /* @__PURE__ */ new Set([
  "decompress",
  "archive",
  "fetch"
]);
function checkCatchUpOptions(value, where) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(`${where} must be an object, got ${describe(value)}`);
  }
  const o = value;
  for (const key of Object.keys(o)) {
    if (!CATCH_UP_KEYS.has(key)) throw new TypeError(`${where}: unknown option ${key}`);
  }
  for (const key of [
    "decompress",
    "fetch"
  ]) {
    if (o[key] !== void 0 && typeof o[key] !== "function") {
      throw new TypeError(`${where}.${key} must be a function, got ${describe(o[key])}`);
    }
  }
  const a = o.archive;
  if (a !== void 0 && a !== null && (typeof a !== "object" || typeof a.manifest !== "function" || typeof a.chunk !== "function" || typeof a.name !== "string")) {
    throw new TypeError(`${where}.archive must be a ChunkSource (name, manifest(), chunk(); e.g. an S3ChunkSource from client/s3.ts), got ${describe(o.archive)}`);
  }
  return o;
}
var CorruptChunk = class extends Error {
  /** The chunk's name. */
  sha256;
  /** Makes the error. */
  constructor(sha256, where) {
    super(`chunk ${sha256} from ${where} does not match its SHA-256: refusing to use it`);
    this.name = "CorruptChunk";
    this.sha256 = sha256;
  }
};
async function defaultDecompress(bytes) {
  const spec = "node:zlib";
  let zlib;
  try {
    zlib = await import(spec);
  } catch {
    throw new TypeError("catch-up needs a zstd decoder in this runtime: pass catchUp: { decompress }");
  }
  return zlib.zstdDecompressSync(bytes);
}
async function sha256Hex(bytes) {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}
function streamHttpBase(streamUrl) {
  return headUrl(streamUrl).replace(/\/head$/, "");
}
async function fetchManifest(streamUrl, f = fetch) {
  const res = await f(`${streamHttpBase(streamUrl)}/manifest`);
  if (res.status === 404) {
    await res.body?.cancel();
    return null;
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`GET manifest of ${streamUrl}: HTTP ${res.status}`);
  }
  return await res.json();
}
function lineOffset(line) {
  const comma = line.indexOf(",");
  return Number(line.slice(1, comma));
}
async function catchUp(streamUrl, from, streamId, options = {}) {
  const f = options.fetch ?? fetch;
  const decompress = options.decompress ?? defaultDecompress;
  const manifest = await fetchManifest(streamUrl, f);
  const archived = options.archive ? await options.archive.manifest() : null;
  const idOf = manifest?.stream_id ?? archived?.stream_id ?? null;
  if (streamId !== null && idOf !== null && idOf !== streamId) {
    throw new NotReplayable(streamUrl, {
      why: "other_stream",
      offset: from,
      streamId
    });
  }
  const local = (manifest?.chunks ?? []).filter((c) => c.last >= from);
  const localFirst = local[0]?.first ?? Infinity;
  const older = (archived?.chunks ?? []).filter((c) => c.last >= from && c.first < localFirst);
  const plan = [
    ...older.map((chunk) => ({
      chunk,
      where: "archive"
    })),
    ...local.map((chunk) => ({
      chunk,
      where: "server"
    }))
  ];
  const first = plan[0]?.chunk.first ?? Infinity;
  if (plan.length === 0 || first > from) {
    const earliest = Number.isFinite(first) ? first : null;
    const maxThrough = Math.max(manifest?.through ?? 0, archived?.through ?? 0);
    if (plan.length === 0 && from > maxThrough) {
      return {
        lines: async function* () {
        }(),
        next: () => from
      };
    }
    if (!options.archive || earliest === null) {
      throw new NotReplayable(streamUrl, {
        why: "evicted",
        offset: from,
        earliest: earliest ?? void 0
      });
    }
  }
  let next = from;
  const base = streamHttpBase(streamUrl);
  async function* lines() {
    for (const { chunk, where } of plan) {
      let bytes;
      if (where === "archive") {
        bytes = await options.archive.chunk(chunk.sha256);
      } else {
        const res = await f(`${base}/chunks/${chunk.sha256}`);
        if (!res.ok) {
          await res.body?.cancel();
          throw new Error(`GET chunk ${chunk.sha256}: HTTP ${res.status}`);
        }
        bytes = new Uint8Array(await res.arrayBuffer());
      }
      if (await sha256Hex(bytes) !== chunk.sha256) {
        throw new CorruptChunk(chunk.sha256, where === "archive" ? options.archive.name : base);
      }
      const text = new TextDecoder().decode(await decompress(bytes));
      const all = text.split("\n");
      all.pop();
      let i = 0;
      while (i < all.length && lineOffset(all[i]) < next) i++;
      const out = i === 0 ? all : all.slice(i);
      if (out.length > 0) {
        next = lineOffset(out[out.length - 1]) + 1;
        yield out;
      }
      next = Math.max(next, chunk.last + 1);
    }
  }
  return {
    lines: lines(),
    next: () => next
  };
}
function catchUpGreeting(head, from) {
  return {
    streamcast: PROTOCOL_VERSION,
    stream: head.stream,
    stream_id: head.stream_id,
    end_offset: head.end_offset,
    replay: head.end_offset !== null && from < head.end_offset ? [
      from,
      head.end_offset
    ] : null,
    log: {
      name: head.stream,
      archive: head.archive
    },
    durable: true,
    schema: head.schema,
    frames: "batch"
  };
}

// client/_connection.ts
var CLOSE_WAIT_MS = 5e3;
function parseGreeting(text) {
  let g;
  try {
    g = JSON.parse(text);
  } catch {
    return `the first frame is not a JSON greeting: ${JSON.stringify(text.slice(0, 80))}`;
  }
  if (!g || typeof g !== "object" || Array.isArray(g)) {
    return `the first frame is not a greeting object: ${JSON.stringify(text.slice(0, 80))}`;
  }
  if (g.streamcast !== PROTOCOL_VERSION) {
    return `the server speaks streamcast protocol ${JSON.stringify(g.streamcast)}; this client speaks ${PROTOCOL_VERSION}`;
  }
  if (typeof g.durable !== "boolean") return "the greeting has no boolean durable";
  if (g.durable) {
    if (typeof g.stream_id !== "string" || !/^[0-9a-f]{32}$/.test(g.stream_id)) {
      return `the greeting of a durable stream has no valid stream_id: ${JSON.stringify(g.stream_id)}`;
    }
    if (!Number.isSafeInteger(g.end_offset) || g.end_offset < 0) {
      return `the greeting's end_offset is not an integer >= 0: ${JSON.stringify(g.end_offset)}`;
    }
    const r = g.replay;
    if (r !== null && !(Array.isArray(r) && r.length === 2 && Number.isSafeInteger(r[0]) && Number.isSafeInteger(r[1]) && r[0] <= r[1])) {
      return `the greeting's replay is not null or [from, end]: ${JSON.stringify(r)}`;
    }
  }
  return g;
}
var Connection = class {
  /** The socket. */
  ws;
  /** The greeting, once received. */
  greeting = null;
  /** How the socket closed, once it has. */
  closed = null;
  /** A protocol problem found in what the server sent (the socket is then closed). */
  problem = null;
  #frames = [];
  #head = 0;
  #wake = null;
  #done;
  /** Opens `url` with `WS`. */
  constructor(WS, url) {
    const ws = new WS(url);
    this.ws = ws;
    this.#done = new Promise((resolve) => {
      ws.onclose = (e) => {
        const code = e.code >= 1e3 ? e.code : 1006;
        this.closed = {
          code,
          reason: e.reason,
          wasClean: e.wasClean
        };
        this.wakeUp();
        resolve();
      };
    });
    ws.onerror = () => {
    };
    ws.onmessage = (e) => {
      if (this.problem !== null) return;
      const data = e.data;
      if (typeof data !== "string") {
        this.#fail("the server sent a binary frame; this client negotiates text frames=batch");
        return;
      }
      if (this.greeting === null) {
        const g = parseGreeting(data);
        if (typeof g === "string") {
          this.#fail(g);
          return;
        }
        this.greeting = g;
      } else {
        this.#frames.push(data);
      }
      this.wakeUp();
    };
  }
  /** Frames received and not yet taken. */
  get pending() {
    return this.#frames.length - this.#head;
  }
  /** The next frame received, or `undefined` when none is waiting. */
  take() {
    if (this.#head >= this.#frames.length) return void 0;
    const f = this.#frames[this.#head++];
    if (this.#head === this.#frames.length) {
      this.#frames = [];
      this.#head = 0;
    } else if (this.#head >= 4096 && this.#head * 2 >= this.#frames.length) {
      this.#frames = this.#frames.slice(this.#head);
      this.#head = 0;
    }
    return f;
  }
  /** Resolves when a frame or the close arrives (or {@linkcode wakeUp} is called). */
  wait() {
    return new Promise((resolve) => {
      const prev = this.#wake;
      this.#wake = () => {
        prev?.();
        resolve();
      };
    });
  }
  /** Wakes whoever waits. */
  wakeUp() {
    const w = this.#wake;
    this.#wake = null;
    w?.();
  }
  #fail(problem) {
    this.problem = problem;
    this.wakeUp();
    try {
      this.ws.close(1e3, "protocol error");
    } catch {
    }
  }
  /** Closes the socket (if open) and waits for the close to complete. */
  async close() {
    if (this.closed === null) {
      try {
        this.ws.close(1e3);
      } catch {
      }
    }
    let timer;
    await Promise.race([
      this.#done,
      new Promise((resolve) => timer = setTimeout(resolve, CLOSE_WAIT_MS))
    ]);
    clearTimeout(timer);
  }
};

// client/_frame.ts
var BAD_LINE = Symbol("bad line");
function lineOffset2(line) {
  const n = line.length;
  if (n < 4 || line.charCodeAt(0) !== 91 || line.charCodeAt(n - 1) !== 93) return BAD_LINE;
  let c = line.charCodeAt(1);
  if (c === 110) return line.startsWith("null,", 1) ? null : BAD_LINE;
  let i = 1;
  let v = 0;
  while (c >= 48 && c <= 57) {
    v = v * 10 + (c - 48);
    c = line.charCodeAt(++i);
  }
  if (i === 1 || i > 17 || c !== 44 || !Number.isSafeInteger(v)) return BAD_LINE;
  return v;
}
function parseLine(line) {
  let v;
  try {
    v = JSON.parse(line);
  } catch {
    return null;
  }
  if (!Array.isArray(v) || v.length !== 2) return null;
  const o = v[0];
  if (o !== null && !(Number.isSafeInteger(o) && o >= 0)) return null;
  return v;
}

// client/_token.ts
function withToken(WS, token) {
  const Base = WS;
  const protocols = [
    SUBPROTOCOL,
    BEARER_PROTOCOL_PREFIX + token
  ];
  return function(url) {
    return new Base(url, protocols);
  };
}
function fetchWithToken(f, token, origin) {
  return (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input);
    if (url.origin !== origin) return f(input, init);
    const headers = new Headers(input instanceof Request ? input.headers : void 0);
    new Headers(init?.headers).forEach((v, k) => headers.set(k, v));
    headers.set("authorization", `Bearer ${token}`);
    return f(input, {
      ...init,
      headers
    });
  };
}
function httpOrigin(url) {
  const u = new URL(url);
  u.protocol = u.protocol === "wss:" ? "https:" : u.protocol === "ws:" ? "http:" : u.protocol;
  return u.origin;
}
async function accessDenied(url, token, timeoutMs, resume) {
  if (typeof fetch !== "function") return null;
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  try {
    const res = await fetch(headUrl(url), {
      signal: ac.signal,
      headers: token === void 0 ? {} : {
        authorization: `Bearer ${token}`
      }
    });
    const body = await res.text();
    if (res.status !== 401 && res.status !== 403) return null;
    const detail = res.status === 401 ? token === void 0 ? "401: the server requires a bearer token (the token option)" : "401: the server does not accept this token" : "403: this token may not read this stream";
    let reason = "";
    try {
      const j = JSON.parse(body);
      if (j && typeof j.error === "string") reason = JSON.stringify(j);
    } catch {
    }
    return new ConnectionClosed(url, CloseCode.Unauthorized, reason, resume, detail);
  } catch {
    return null;
  } finally {
    clearTimeout(timer);
  }
}

// client/connect_options.ts
var DEFAULT_SAVE_EVERY_ROWS = 1e4;
var DEFAULT_SAVE_EVERY_MS = 1e3;
var DEFAULT_CONNECT_TIMEOUT_MS = 1e4;
var DEFAULT_BACKOFF_MIN_MS = 100;
var DEFAULT_BACKOFF_MAX_MS = 1e4;

// common/backoff.ts
function backoffDelay(attempt, minMs, maxMs) {
  const base = Math.min(maxMs, minMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(jitter(base));
}
function jitter(ms) {
  return ms * (0.5 + Math.random() / 2);
}
function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, {
      once: true
    });
  });
}

// client/subscription.ts
var DONE = {
  done: true,
  value: void 0
};
var Subscription = class _Subscription {
  #url;
  #opts;
  #WS;
  #cursor;
  #saveEveryRows;
  #saveEveryMs;
  #conn = null;
  #greeting = null;
  #streamId = null;
  #durable = false;
  /** Durable streams: the lowest offset the next row may have. */
  #expect = 0;
  #lastOffset = null;
  /** The offset of the row yielded last (null: ephemeral), `undefined` when none is current. */
  #current = void 0;
  /** The next offset not yet handled (the cursor's offset); null on an ephemeral stream. */
  #handled = null;
  #saved = null;
  /** Rows handled so far, and how many of them the last completed save covers. */
  #handledCount = 0;
  #savedCount = 0;
  #saveChain = Promise.resolve();
  #saveTimer;
  #saveError = void 0;
  #lines = [];
  #li = 0;
  #busy = false;
  #closed = false;
  #closing = null;
  #aborted = false;
  #abortReason = void 0;
  /** Aborted to cut a reconnect delay short (a close, an abort). */
  #sleeping = null;
  #reconnects = 0;
  #catchUp = null;
  #catchUpRows = 0;
  // since= (µs): asked for on the first connect only; from then on, offsets.
  #since = null;
  #onAbort = () => this.#abort();
  constructor(url, options) {
    this.#url = url.toString();
    this.#opts = options;
    const WS = options.WebSocket ?? globalThis.WebSocket;
    if (!WS) throw new TypeError("connect: no WebSocket here; pass the WebSocket option");
    this.#WS = options.token === void 0 ? WS : withToken(WS, options.token);
    this.#cursor = options.cursor ?? null;
    this.#saveEveryRows = options.saveEveryRows ?? DEFAULT_SAVE_EVERY_ROWS;
    this.#saveEveryMs = options.saveEveryMs ?? DEFAULT_SAVE_EVERY_MS;
  }
  /**
   * @internal Use `connect`, which checks `url` and `options` (this trusts them).
   */
  static async _open(u, options) {
    const signal = options.signal;
    signal?.throwIfAborted();
    const sub = new _Subscription(u, options);
    signal?.addEventListener("abort", sub.#onAbort, {
      once: true
    });
    try {
      await sub.#start();
    } catch (err) {
      await sub.#shutdown(false);
      throw err;
    }
    return sub;
  }
  async #start() {
    let offset = this.#opts.offset ?? null;
    let streamId = null;
    const saved = this.#cursor ? await this.#cursor.load() : null;
    if (saved) {
      offset = saved.offset;
      streamId = saved.streamId;
    } else if (this.#opts.since !== void 0) this.#since = sinceMicros(this.#opts.since);
    await this.#openOrCatchUp(offset, streamId, null);
    if (this.#cursor && !this.#durable) {
      throw new NotReplayable(this.#url, {
        why: "not_durable",
        offset: saved?.offset
      });
    }
    this.#handled = this.#durable ? this.#expect : null;
    if (this.#cursor && !saved) await this.#save();
    else this.#saved = this.#handled;
  }
  /**
   * Opens a socket at `offset`; when refused for reaching too far back and
   * `catchUp` is on, starts reading the gap from the chunks instead (the
   * socket is opened again once they are read).
   */
  async #openOrCatchUp(offset, streamId, resume) {
    try {
      await this.#open(offset, streamId, resume);
    } catch (err) {
      const opt = this.#opts.catchUp;
      if (!opt || !(err instanceof NotReplayable)) throw err;
      const options = opt === true ? {} : opt;
      const canRead = err.why === "too_old" || (err.why === "evicted" || err.why === "empty") && options.archive;
      if (!canRead) throw err;
      const from = typeof offset === "number" ? Math.max(1, offset) : err.offset ?? 1;
      if (this.#catchUpRows === 0 && this.#expect === from && this.#greeting !== null) throw err;
      const token = this.#opts.token;
      const c = await catchUp(this.#url, from, streamId ?? this.#streamId, token === void 0 ? options : {
        ...options,
        fetch: fetchWithToken(options.fetch ?? fetch, token, httpOrigin(this.#url))
      });
      const head = await fetchHead(this.#url, token === void 0 ? {} : {
        headers: {
          authorization: `Bearer ${token}`
        }
      });
      this.#catchUp = c;
      this.#since = null;
      this.#catchUpRows = 0;
      this.#durable = true;
      this.#streamId = head.stream_id;
      this.#expect = Math.max(this.#expect, from);
      this.#greeting = catchUpGreeting(head, from);
    }
  }
  /**
   * Opens a socket at `offset` and waits for its greeting. Returns with the
   * subscription updated, or throws the typed error for the refusal, the
   * close, the timeout or the abort.
   */
  async #open(offset, streamId, resume) {
    const ctx = {
      url: this.#url,
      offset,
      streamId
    };
    const conn = new Connection(this.#WS, subscribeUrl(this.#url, {
      offset,
      streamId,
      frames: "batch",
      since: this.#since
    }));
    this.#conn = conn;
    const ms = this.#opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    let timedOut = false;
    let timer;
    const timeout = new Promise((resolve) => {
      timer = setTimeout(() => {
        timedOut = true;
        resolve();
      }, ms);
    });
    try {
      while (conn.greeting === null && conn.closed === null && conn.problem === null && !timedOut && !this.#aborted && !this.#closed) {
        await Promise.race([
          conn.wait(),
          timeout
        ]);
      }
    } finally {
      clearTimeout(timer);
    }
    if (this.#aborted) {
      await conn.close();
      throw this.#abortReason;
    }
    if (this.#closed) return;
    if (conn.greeting === null && conn.problem !== null) {
      await conn.close();
      throw new ProtocolError(conn.problem, this.#url);
    }
    if (conn.greeting === null) {
      if (conn.closed !== null) {
        const c = conn.closed;
        if (c.code === 1006) {
          const denied = await accessDenied(this.#url, this.#opts.token, Math.min(this.#opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, 5e3), resume);
          if (denied) throw denied;
        }
        const err = closeError(c.code, c.reason, ctx, resume, c.wasClean);
        if (err instanceof ConnectionClosed) {
          throw new ConnectionClosed(this.#url, c.code, c.reason, resume, `${c.code === 1006 ? "1006: refused or dropped" : c.code} before the greeting`, c.wasClean);
        }
        throw err;
      }
      await conn.close();
      throw new ConnectionClosed(this.#url, null, "", resume, `no greeting within ${ms} ms`);
    }
    const g = conn.greeting;
    if (this.#streamId !== null && g.stream_id !== this.#streamId) {
      await conn.close();
      throw new NotReplayable(this.#url, {
        why: "other_stream",
        offset: typeof offset === "number" ? offset : void 0,
        streamId: this.#streamId
      });
    }
    this.#greeting = g;
    this.#since = null;
    this.#durable = g.durable;
    this.#streamId = g.stream_id;
    if (g.durable) {
      const floor = g.replay ? g.replay[0] : g.end_offset;
      this.#expect = Math.max(floor, typeof offset === "number" ? offset : 0, this.#expect);
    }
  }
  /** The greeting of the current connection (updated on reconnect). */
  get greeting() {
    return this.#greeting;
  }
  /** The stream id (`null` on an ephemeral stream). */
  get streamId() {
    return this.#streamId;
  }
  /** The offset of the last row yielded, or `null` (none yet, or an ephemeral stream). */
  get lastOffset() {
    return this.#lastOffset;
  }
  /**
   * The resume position: the first offset not yet handled, which is what the
   * cursor saves (`null` on an ephemeral stream).
   */
  get position() {
    return this.#handled;
  }
  /** How many times the subscription reconnected. */
  get reconnects() {
    return this.#reconnects;
  }
  /** At least this many rows are received and ready to be yielded without waiting. */
  get buffered() {
    return this.#lines.length - this.#li + (this.#conn?.pending ?? 0);
  }
  /**
   * Marks the current row (the one yielded last) handled and saves the cursor
   * now. Without a cursor it only marks.
   */
  async commit() {
    if (typeof this.#current === "number" && this.#current + 1 > (this.#handled ?? 0)) {
      this.#handled = this.#current + 1;
    }
    if (this.#cursor && this.#durable) await this.#save();
  }
  /**
   * Closes the subscription: the loop ends (a pending `next()` resolves done)
   * and the cursor is saved at the first row not handled. Resolves once the
   * socket is closed; rejects if that last save fails.
   */
  close() {
    return this.#shutdown(true);
  }
  /** This subscription, as its own iterator of `[offset, msg]`. */
  [Symbol.asyncIterator]() {
    return this;
  }
  /** The next row; see the class documentation. */
  next() {
    const now = this.#tryNow(false);
    if (now !== null) return Promise.resolve(now);
    return this.#next(false);
  }
  /** Closes the subscription (a `for await` loop calls this on `break`). */
  async return() {
    await this.close();
    return DONE;
  }
  /**
   * The rows as `[offset, line]`, where `line` is the `[offset,msg]` text
   * exactly as received (nothing re-encoded, `msg` not parsed): for tools that
   * pass rows on, like `cli.ts tail`. Same cursor rules as iterating the
   * subscription; use one or the other.
   *
   * @example
   * ```ts
   * import { connect } from "./connect.ts";
   * import { serve, Stream } from "../mod.ts";
   * const stream = new Stream("ticks", {
   *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
   * });
   * const server = serve([stream], { port: 0, onListen: () => {} });
   * const sub = await connect(`${server.url}/ticks`);
   * await stream.send({ v: 1.5 });
   * for await (const [, line] of sub.lines()) {
   *   console.log(line); // [null,{"v":1.5}]
   *   break;
   * }
   * await server.shutdown();
   * ```
   */
  lines() {
    const it = {
      next: () => {
        const now = this.#tryNow(true);
        if (now !== null) return Promise.resolve(now);
        return this.#next(true);
      },
      return: async () => {
        await this.close();
        return DONE;
      },
      [Symbol.asyncIterator]: () => it
    };
    return it;
  }
  /** The loop asked for the next row: the current one is handled. */
  #markHandled() {
    const cur = this.#current;
    if (cur === void 0) return;
    if (cur !== null && cur + 1 > (this.#handled ?? 0)) this.#handled = cur + 1;
    this.#current = void 0;
    this.#handledCount++;
    if (this.#cursor && !this.#closed && !this.#saveDue()) this.#armSaveTimer();
  }
  #saveDue() {
    return this.#cursor !== null && !this.#closed && this.#handledCount - this.#savedCount >= this.#saveEveryRows;
  }
  /**
   * The fast path of next(): a row already received, when nothing else (a
   * save, a close, an abort, a bad line) needs the async path. `null`: take
   * the async path.
   */
  #tryNow(raw) {
    if (this.#busy || this.#closed || this.#aborted || this.#saveError !== void 0) return null;
    this.#markHandled();
    if (this.#saveDue()) return null;
    if (this.#li >= this.#lines.length) {
      const frame = this.#conn?.take();
      if (frame === void 0) return null;
      this.#lines = splitBatch(frame);
      this.#li = 0;
    }
    const value = this.#row(this.#lines[this.#li], raw);
    if (typeof value === "string") return null;
    this.#li++;
    return {
      done: false,
      value
    };
  }
  async #next(raw) {
    if (this.#busy) {
      throw new TypeError("Subscription: next() called while another next() is pending; use one for await loop");
    }
    this.#busy = true;
    try {
      this.#markHandled();
      if (this.#saveDue()) await this.#saveOrEnd();
      while (true) {
        if (this.#saveError !== void 0) {
          const err = this.#saveError;
          this.#saveError = void 0;
          await this.#shutdown(false).catch(() => {
          });
          throw err;
        }
        if (this.#aborted) {
          await this.#shutdown(true).catch(() => {
          });
          throw this.#abortReason;
        }
        if (this.#closed) return DONE;
        if (this.#li < this.#lines.length) {
          const value = this.#row(this.#lines[this.#li++], raw);
          if (typeof value === "string") await this.#fail(value);
          return {
            done: false,
            value
          };
        }
        if (this.#catchUp) {
          const r = await this.#catchUp.lines.next();
          if (!r.done) {
            this.#lines = r.value;
            this.#li = 0;
            this.#catchUpRows += r.value.length;
            continue;
          }
          const at = Math.max(this.#catchUp.next(), this.#expect);
          this.#catchUp = null;
          try {
            await this.#openOrCatchUp(at, this.#streamId, at);
          } catch (e) {
            await this.#shutdown(true).catch(() => {
            });
            throw e;
          }
          continue;
        }
        const conn = this.#conn;
        const frame = conn.take();
        if (frame !== void 0) {
          this.#lines = splitBatch(frame);
          this.#li = 0;
          continue;
        }
        if (conn.problem !== null) await this.#fail(conn.problem);
        if (conn.closed !== null) {
          const c = conn.closed;
          const err = closeError(c.code, c.reason, {
            url: this.#url,
            offset: this.#durable ? this.#expect : null,
            streamId: this.#streamId
          }, this.#durable ? this.#expect : null, c.wasClean);
          if (this.#opts.reconnect && err.reconnectable) {
            try {
              await this.#reconnect(err);
            } catch (e) {
              await this.#shutdown(true).catch(() => {
              });
              throw e;
            }
            continue;
          }
          await this.#shutdown(true).catch(() => {
          });
          throw err;
        }
        await conn.wait();
      }
    } finally {
      this.#busy = false;
    }
  }
  /** Checks one line and makes it the current row; returns what is wrong with it instead. */
  #row(line, raw) {
    let offset;
    let value;
    if (raw) {
      const o = lineOffset2(line);
      if (o === BAD_LINE) return `a frame line is not [offset,msg]: ${clip(line)}`;
      offset = o;
      value = [
        o,
        line
      ];
    } else {
      const r = parseLine(line);
      if (r === null) return `a frame line is not [offset,msg]: ${clip(line)}`;
      offset = r[0];
      value = r;
    }
    if (this.#durable) {
      if (offset === null) return `a row without an offset on a durable stream: ${clip(line)}`;
      if (offset < this.#expect) {
        return this.#lastOffset !== null && offset <= this.#lastOffset ? `offset ${offset} came after ${this.#lastOffset}: offsets must increase (a server bug, or rows of another stream)` : `offset ${offset} is below ${this.#expect}, the first offset this subscription asked for (a server bug, or rows of another stream)`;
      }
      this.#expect = offset + 1;
      this.#lastOffset = offset;
    } else if (offset !== null) {
      return `a row with offset ${offset} on an ephemeral stream`;
    }
    this.#current = offset;
    return value;
  }
  /** Ends the subscription with a ProtocolError (the current row is not handled). */
  async #fail(detail) {
    await this.#shutdown(true).catch(() => {
    });
    throw new ProtocolError(detail, this.#url);
  }
  async #reconnect(cause) {
    const minMs = this.#opts.backoff?.minMs ?? DEFAULT_BACKOFF_MIN_MS;
    const maxMs = this.#opts.backoff?.maxMs ?? DEFAULT_BACKOFF_MAX_MS;
    let err = cause;
    for (let attempt = 1; ; attempt++) {
      const delayMs = backoffDelay(attempt, minMs, maxMs);
      const resumeAt = this.#durable ? this.#expect : null;
      this.#opts.onReconnect?.({
        error: err,
        attempt,
        delayMs,
        resumeAt,
        lost: !this.#durable
      });
      const sleeping = this.#sleeping = new AbortController();
      await sleep(delayMs, sleeping.signal);
      this.#sleeping = null;
      if (this.#closed || this.#aborted) return;
      try {
        await this.#openOrCatchUp(resumeAt, this.#streamId, resumeAt);
      } catch (e) {
        if (e instanceof SubscriptionError && e.reconnectable && !this.#aborted) {
          err = e;
          continue;
        }
        throw e;
      }
      if (!this.#closed && !this.#aborted) this.#reconnects++;
      return;
    }
  }
  #abort() {
    this.#aborted = true;
    this.#abortReason = this.#opts.signal?.reason;
    this.#sleeping?.abort();
    this.#conn?.wakeUp();
  }
  #armSaveTimer() {
    if (this.#saveTimer !== void 0 || this.#handled === this.#saved) return;
    this.#saveTimer = setTimeout(() => {
      this.#saveTimer = void 0;
      this.#save().catch((err) => {
        this.#saveError ??= err;
        this.#conn?.wakeUp();
      });
    }, this.#saveEveryMs);
  }
  /** Saves in the loop; a failed save ends the subscription. */
  async #saveOrEnd() {
    try {
      await this.#save();
    } catch (err) {
      await this.#shutdown(false).catch(() => {
      });
      throw err;
    }
  }
  /** Saves the handled position (one save at a time, in order). */
  #save() {
    const run = async () => {
      const pos = this.#handled;
      const count = this.#handledCount;
      if (pos === null || !this.#cursor) return;
      if (pos === this.#saved) {
        this.#savedCount = count;
        return;
      }
      if (this.#opts.beforeSave) await this.#opts.beforeSave();
      await this.#cursor.save({
        offset: pos,
        streamId: this.#streamId
      });
      this.#saved = pos;
      this.#savedCount = count;
    };
    const p = this.#saveChain.then(run);
    this.#saveChain = p.catch(() => {
    });
    return p;
  }
  #shutdown(save) {
    this.#closing ??= (async () => {
      this.#closed = true;
      clearTimeout(this.#saveTimer);
      this.#saveTimer = void 0;
      this.#opts.signal?.removeEventListener("abort", this.#onAbort);
      this.#sleeping?.abort();
      this.#lines = [];
      this.#li = 0;
      await this.#conn?.close();
      if (save && this.#cursor && this.#durable && this.#handled !== this.#saved) {
        await this.#save();
      } else {
        await this.#saveChain;
      }
    })();
    return this.#closing;
  }
};
function clip(s) {
  return JSON.stringify(s.length > 80 ? s.slice(0, 80) + "\u2026" : s);
}

// client/connect.ts
var OPTION_KEYS = {
  offset: true,
  since: true,
  cursor: true,
  saveEveryRows: true,
  saveEveryMs: true,
  beforeSave: true,
  reconnect: true,
  backoff: true,
  onReconnect: true,
  signal: true,
  connectTimeoutMs: true,
  WebSocket: true,
  token: true,
  catchUp: true
};
var BACKOFF_KEYS = /* @__PURE__ */ new Set([
  "minMs",
  "maxMs"
]);
function checkUrl(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`connect: not a URL: ${JSON.stringify(String(url))}`);
  }
  if (![
    "ws:",
    "wss:",
    "http:",
    "https:"
  ].includes(u.protocol)) {
    throw new TypeError(`connect: the URL must be ws://, wss://, http:// or https://, got ${u}`);
  }
  for (const key of [
    "offset",
    "stream_id",
    "frames"
  ]) {
    if (u.searchParams.has(key)) {
      throw new TypeError(`connect: the URL carries ${key}=${u.searchParams.get(key)}; pass the offset as the offset option (the client sets offset, stream_id and frames itself)`);
    }
  }
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  return u;
}
function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}
function checkNumber(name, v, min) {
  if (v === void 0) return;
  if (typeof v !== "number") {
    throw new TypeError(`connect: ${name} must be a number, got ${describe(v)}`);
  }
  if (!(Number.isFinite(v) && v >= min)) {
    throw new RangeError(`connect: ${name} must be a number >= ${min}, got ${v}`);
  }
}
function checkType(name, v, type) {
  if (v !== void 0 && typeof v !== type) {
    throw new TypeError(`connect: ${name} must be a ${type}, got ${describe(v)}`);
  }
}
function checkOptions(options) {
  if (options === void 0) return {};
  if (!isObject(options)) {
    throw new TypeError(`connect: options must be an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!Object.hasOwn(OPTION_KEYS, key)) throw new TypeError(`connect: unknown option ${key}`);
  }
  const o = options;
  const off = o.offset;
  if (off !== void 0 && off !== "earliest") {
    if (typeof off !== "number") {
      throw new TypeError(`connect: offset must be an integer >= 0 or "earliest", got ${describe(off)}`);
    }
    if (!(Number.isSafeInteger(off) && off >= 0)) {
      throw new RangeError(`connect: offset must be an integer >= 0 or "earliest", got ${off}`);
    }
  }
  checkSinceOption(o);
  checkNumber("saveEveryRows", o.saveEveryRows, 1);
  checkNumber("saveEveryMs", o.saveEveryMs, 0);
  checkNumber("connectTimeoutMs", o.connectTimeoutMs, 1);
  checkType("beforeSave", o.beforeSave, "function");
  checkType("reconnect", o.reconnect, "boolean");
  checkType("onReconnect", o.onReconnect, "function");
  checkType("WebSocket", o.WebSocket, "function");
  const backoff = o.backoff;
  if (backoff !== void 0) {
    if (!isObject(backoff)) {
      throw new TypeError(`connect: backoff must be an object {minMs, maxMs}, got ${describe(backoff)}`);
    }
    for (const key of Object.keys(backoff)) {
      if (!BACKOFF_KEYS.has(key)) throw new TypeError(`connect: unknown option backoff.${key}`);
    }
    checkNumber("backoff.minMs", backoff.minMs, 0);
    checkNumber("backoff.maxMs", backoff.maxMs, backoff.minMs ?? 0);
  }
  const signal = o.signal;
  if (signal !== void 0) {
    const s = signal;
    if (s === null || typeof s !== "object" || typeof s.aborted !== "boolean" || typeof s.addEventListener !== "function" || typeof s.removeEventListener !== "function" || typeof s.throwIfAborted !== "function") {
      throw new TypeError(`connect: signal must be an AbortSignal, got ${describe(signal)}`);
    }
  }
  const token = o.token;
  if (token !== void 0) {
    if (typeof token !== "string") {
      throw new TypeError(`connect: token must be a string, got ${typeof token}`);
    }
    if (!TOKEN_PATTERN.test(token)) {
      throw new TypeError("connect: token must be 16-512 characters of A-Z a-z 0-9 . _ ~ -");
    }
  }
  const catchUp2 = o.catchUp;
  if (catchUp2 !== void 0 && typeof catchUp2 !== "boolean") {
    if (!isObject(catchUp2)) {
      throw new TypeError(`connect: catchUp must be a boolean or CatchUpOptions, got ${describe(catchUp2)}`);
    }
    checkCatchUpOptions(catchUp2, "connect: catchUp");
  }
  checkCursorOption(o.cursor);
  return o;
}
function checkSinceOption(o) {
  const since = o.since;
  if (since === void 0) return;
  if (!(since instanceof Date) && typeof since !== "number" && typeof since !== "string") {
    throw new TypeError(`connect: since must be a Date, \xB5s since the epoch or RFC 3339 text, got ${describe(since)}`);
  }
  if (o.offset !== void 0) {
    throw new TypeError(`connect: give offset or since, not both (offset ${o.offset})`);
  }
  try {
    sinceMicros(since);
  } catch (err) {
    throw new RangeError(`connect: ${err.message}`);
  }
}
function hasDeno() {
  const d = globalThis.Deno;
  return typeof d?.readTextFile === "function";
}
function checkCursorOption(cursor) {
  if (cursor === void 0) return;
  if (typeof cursor === "string") {
    if (cursor === "") throw new RangeError(`connect: cursor must be a file path, got ""`);
    if (!hasDeno()) {
      throw new TypeError(`connect: cursor ${JSON.stringify(cursor)} is a file path, and files are for Deno (FileCursor); here pass a CursorStore such as LocalStorageCursor or MemoryCursor`);
    }
    return;
  }
  const c = cursor;
  if (c === null || typeof c !== "object" || typeof c.load !== "function" || typeof c.save !== "function") {
    throw new TypeError(`connect: cursor must be a file path (a string) or a CursorStore (an object with load and save methods, such as FileCursor or MemoryCursor), got ${describe(cursor)}`);
  }
}
async function cursorStore(cursor) {
  if (typeof cursor !== "string") return cursor;
  const spec = "./file_cursor.ts";
  let mod;
  try {
    mod = await import(spec);
  } catch (err) {
    throw new TypeError(`connect: cursor ${JSON.stringify(cursor)} is a file path, but client/file_cursor.ts cannot be loaded here (${err}); pass new FileCursor(path) instead`);
  }
  return new mod.FileCursor(cursor);
}
function connect(url, options = {}) {
  return open(url, options);
}
async function open(url, options) {
  const u = checkUrl(url);
  const o = checkOptions(options);
  const resolved = {
    ...o,
    cursor: await cursorStore(o.cursor)
  };
  return await Subscription._open(u, resolved);
}
export {
  DEFAULT_BACKOFF_MAX_MS,
  DEFAULT_BACKOFF_MIN_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_SAVE_EVERY_MS,
  DEFAULT_SAVE_EVERY_ROWS,
  Subscription,
  backoffDelay,
  connect
};
