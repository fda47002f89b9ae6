// One WebSocket of a subscription: collects the greeting, the data frames and
// the close, and wakes whoever waits for any of them. Private to client/.
// Web APIs only (runs in browsers).

import { type Greeting, PROTOCOL_VERSION } from "../wire/subscribe.ts";
import { decodeZstdFrame, type ZstdDecompress } from "./_zstd.ts";
import { ZstdStreamDecoder } from "./_zstd_stream.ts";

/**
 * compress=zstd-dict (§16): how a connection decodes frames made with the
 * dictionary its greeting names.
 */
export interface DictionaryDecoding {
  /** Decompresses one frame made with `dict`. */
  decompress(bytes: Uint8Array, dict: Uint8Array): Uint8Array;
  /** The dictionary with `id` (fetched once per id). */
  load(id: string): Promise<Uint8Array>;
}

/** How a socket closed. */
export interface CloseInfo {
  /** The close code (1006 when the connection dropped or never opened). */
  code: number;
  /** The close reason. */
  reason: string;
  /** Whether the close handshake completed. */
  wasClean: boolean;
}

/**
 * A WebSocket constructor: the global one, or another with the same API (a
 * polyfill, or a recording subclass in tests).
 */
export type WebSocketConstructor = new (url: string | URL) => WebSocket;

/** How long `close()` waits for the close handshake before giving up. */
const CLOSE_WAIT_MS = 5_000;

/** Checks the first frame; returns the greeting or what is wrong with it. */
export function parseGreeting(text: string): Greeting | string {
  let g: Record<string, unknown>;
  try {
    g = JSON.parse(text);
  } catch {
    return `the first frame is not a JSON greeting: ${JSON.stringify(text.slice(0, 80))}`;
  }
  if (!g || typeof g !== "object" || Array.isArray(g)) {
    return `the first frame is not a greeting object: ${JSON.stringify(text.slice(0, 80))}`;
  }
  if (g.streamcast !== PROTOCOL_VERSION) {
    return `the server speaks streamcast protocol ${
      JSON.stringify(g.streamcast)
    }; this client speaks ${PROTOCOL_VERSION}`;
  }
  if (typeof g.durable !== "boolean") return "the greeting has no boolean durable";
  if (g.durable) {
    if (typeof g.stream_id !== "string" || !/^[0-9a-f]{32}$/.test(g.stream_id)) {
      return `the greeting of a durable stream has no valid stream_id: ${
        JSON.stringify(g.stream_id)
      }`;
    }
    if (!Number.isSafeInteger(g.end_offset) || (g.end_offset as number) < 0) {
      return `the greeting's end_offset is not an integer >= 0: ${JSON.stringify(g.end_offset)}`;
    }
    const r = g.replay;
    if (
      r !== null &&
      !(Array.isArray(r) && r.length === 2 && Number.isSafeInteger(r[0]) &&
        Number.isSafeInteger(r[1]) && r[0] <= r[1])
    ) {
      return `the greeting's replay is not null or [from, end]: ${JSON.stringify(r)}`;
    }
  }
  return g as unknown as Greeting;
}

/** One socket: greeting, frames and close as they arrive. */
export class Connection {
  /** The socket. */
  readonly ws: WebSocket;
  /** The greeting, once received. */
  greeting: Greeting | null = null;
  /** How the socket closed, once it has. */
  closed: CloseInfo | null = null;
  /** Bytes of data messages received (binary: their length; text: UTF-16 code units). */
  bytes = 0;
  /** A protocol problem found in what the server sent (the socket is then closed). */
  problem: string | null = null;
  #frames: string[] = [];
  #head = 0;
  #wake: (() => void) | null = null;
  readonly #done: Promise<void>;
  // compress=zstd-dict (§16): the greeting's dictionary once loaded; while it
  // loads, binary frames (and the close) wait here in order.
  #dict: Uint8Array | null = null;
  #waiting: { data: ArrayBuffer; n: number }[] | null = null;
  #closeWaiting: CloseInfo | null = null;
  // compress=zstd-stream (§20): the decoder of this socket's stream, when the greeting says so.
  #stream: ZstdStreamDecoder | null = null;

  /**
   * Opens `url` with `WS`. With `zstd` (compress=zstd asked for), binary data
   * frames are decoded with it, and one that is not a whole zstd frame whose
   * checksum holds is a problem (the socket is then closed). With `stream`
   * (compress=zstd-stream asked for), a greeting that says `zstd-stream`
   * makes binary messages go through one streaming decoder, in order.
   */
  constructor(
    WS: WebSocketConstructor,
    url: string,
    zstd: ZstdDecompress | null = null,
    dict: DictionaryDecoding | null = null,
    stream = false,
  ) {
    const ws = new WS(url);
    this.ws = ws;
    if (zstd || stream) ws.binaryType = "arraybuffer";
    let received = 0;
    this.#done = new Promise((resolve) => {
      ws.onclose = (e: CloseEvent) => {
        // Deno reports a connection that failed or dropped as code 0; the
        // WebSocket standard (and browsers) say 1006.
        const code = e.code >= 1000 ? e.code : 1006;
        const info = { code, reason: e.reason, wasClean: e.wasClean };
        if (this.#waiting !== null) this.#closeWaiting = info; // after the waiting frames
        else this.closed = info;
        this.wakeUp();
        resolve();
      };
    });
    // An error event is always followed by a close event, which carries the code.
    ws.onerror = () => {};
    ws.onmessage = (e: MessageEvent) => {
      if (this.problem !== null) return;
      let data = e.data;
      if (this.greeting !== null) {
        received++; // data frames
        this.bytes += data instanceof ArrayBuffer ? data.byteLength : (data as string).length;
      }
      if (this.#stream !== null) {
        // compress=zstd-stream (§20): every data message is binary, decoded in order.
        data = this.#decodeStream(data, received);
        if (data === null) return;
      } else if (zstd && data instanceof ArrayBuffer && this.greeting?.compress === "zstd") {
        // compress= (§16): a binary data frame is one zstd frame of the batch's text.
        if (this.#waiting !== null) {
          this.#waiting.push({ data, n: received }); // the dictionary is on its way
          return;
        }
        data = this.#decode(data, received, zstd, dict);
        if (data === null) return;
      } else if (zstd && this.greeting?.compress === "zstd") {
        // A text data frame after a greeting that said compress zstd: the
        // server broke the protocol (§16: data frames are binary).
        this.#fail(`compressed frame ${received} is a text frame; compress=zstd frames are binary`);
        return;
      }
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
        if (g.compress === "zstd-stream") {
          if (!stream) {
            this.#fail("the greeting says compress zstd-stream, which was not asked for");
            return;
          }
          this.#stream = new ZstdStreamDecoder({ whole: zstd });
        }
        if (typeof g.dictionary === "string" && g.compress === "zstd" && zstd) {
          if (!dict) {
            this.#fail(`the greeting names dictionary ${g.dictionary}, which was not asked for`);
            return;
          }
          this.#loadDictionary(g.dictionary, zstd, dict);
        }
      } else {
        this.#frames.push(data);
      }
      this.wakeUp();
    };
  }

  // compress=zstd-dict (§16): loads the dictionary, then decodes what waited for it.
  #loadDictionary(id: string, zstd: ZstdDecompress, dict: DictionaryDecoding): void {
    this.#waiting = [];
    dict.load(id).then((bytes) => {
      this.#dict = bytes;
      const waiting = this.#waiting ?? [];
      this.#waiting = null;
      for (const w of waiting) {
        if (this.problem !== null) break;
        const text = this.#decode(w.data, w.n, zstd, dict);
        if (text !== null) this.#frames.push(text);
      }
    }, (err) => {
      this.#waiting = null;
      this.#fail(`dictionary ${id} could not be loaded: ${(err as Error).message}`);
    }).finally(() => {
      if (this.#closeWaiting) this.closed = this.#closeWaiting;
      this.wakeUp();
    });
  }

  // One binary data frame's text, or null after failing the connection.
  #decode(
    data: ArrayBuffer,
    n: number,
    zstd: ZstdDecompress,
    dict: DictionaryDecoding | null,
  ): string | null {
    const d = this.#dict;
    try {
      return decodeZstdFrame(
        new Uint8Array(data),
        d && dict ? (b) => dict.decompress(b, d) : zstd,
      );
    } catch (err) {
      this.#fail(
        `compressed frame ${n} (${data.byteLength} bytes) is corrupt or ` +
          `truncated: ${(err as Error).message}`,
      );
      return null;
    }
  }

  // One compress=zstd-stream message's text, or null after failing the connection.
  #decodeStream(data: unknown, n: number): string | null {
    if (!(data instanceof ArrayBuffer)) {
      this.#fail(
        `compressed message ${n} is a text frame; compress=zstd-stream messages are binary`,
      );
      return null;
    }
    try {
      return this.#stream!.decode(new Uint8Array(data));
    } catch (err) {
      this.#fail(
        `compressed message ${n} (${data.byteLength} bytes) does not decode: ` +
          (err as Error).message,
      );
      return null;
    }
  }

  /** Frames received and not yet taken. */
  get pending(): number {
    return this.#frames.length - this.#head;
  }

  /** The next frame received, or `undefined` when none is waiting. */
  take(): string | undefined {
    if (this.#head >= this.#frames.length) return undefined;
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
  wait(): Promise<void> {
    return new Promise((resolve) => {
      const prev = this.#wake;
      this.#wake = () => {
        prev?.();
        resolve();
      };
    });
  }

  /** Wakes whoever waits. */
  wakeUp(): void {
    const w = this.#wake;
    this.#wake = null;
    w?.();
  }

  #fail(problem: string): void {
    // Frames received before the problem are still delivered; nothing after it.
    this.problem = problem;
    this.wakeUp();
    try {
      this.ws.close(1000, "protocol error");
    } catch {
      // Already closing.
    }
  }

  /** Closes the socket (if open) and waits for the close to complete. */
  async close(): Promise<void> {
    if (this.closed === null) {
      try {
        this.ws.close(1000);
      } catch {
        // Already closing; the close event is on its way.
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      this.#done,
      new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS))),
    ]);
    clearTimeout(timer);
  }
}
