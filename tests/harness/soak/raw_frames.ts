// A raw WebSocket client over TCP with full control of what goes on the wire:
// any request line and headers (sent at once or byte by byte), and frames with
// any FIN/RSV bits, opcode, mask (or none), declared length and payload. For
// the fault tests only; tests/harness/raw_ws.ts is the well-behaved variant.

/** One frame from the server. */
export interface Frame {
  /** 0 continuation, 1 text, 2 binary, 8 close, 9 ping, 10 pong. */
  opcode: number;
  /** Whether this is the last fragment of its message. */
  fin: boolean;
  /** Payload bytes. */
  data: Uint8Array;
}

/** How a connection ended, as seen by the client. */
export type Ending =
  | { kind: "close"; code: number | null; reason: string }
  | { kind: "eof" }
  | { kind: "reset"; error: string }
  | { kind: "timeout" };

/** What the server answered to a handshake. */
export interface Answer {
  /** HTTP status (101 when upgraded), 0 when the connection ended first. */
  status: number;
  /** The response head (status line and headers). */
  head: string;
  /** Bytes after the head (the start of the frames, or an HTTP body). */
  rest: Uint8Array;
}

/** Options of {@linkcode frame}. */
export interface FrameOptions {
  /** FIN bit. @default true */
  fin?: boolean;
  /** RSV1..3 as a 3-bit number. @default 0 */
  rsv?: number;
  /** Mask the payload (clients must). @default true */
  mask?: boolean;
  /** The length to declare in the header (a lie when it is not the payload's). */
  declaredLength?: number;
}

const enc = new TextEncoder();

/** Concatenates byte arrays. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Encodes a client frame, exactly as asked (a fixed mask key keeps runs reproducible). */
export function frame(opcode: number, payload: Uint8Array, o: FrameOptions = {}): Uint8Array {
  const fin = o.fin ?? true;
  const mask = o.mask ?? true;
  const len = o.declaredLength ?? payload.length;
  const head: number[] = [(fin ? 0x80 : 0) | ((o.rsv ?? 0) << 4) | (opcode & 0x0f)];
  const m = mask ? 0x80 : 0;
  if (len < 126) head.push(m | len);
  else if (len < 65536) head.push(m | 126, len >> 8, len & 255);
  else {
    const hi = Math.floor(len / 2 ** 32);
    head.push(m | 127, (hi >>> 24) & 255, (hi >>> 16) & 255, (hi >>> 8) & 255, hi & 255);
    head.push((len >>> 24) & 255, (len >>> 16) & 255, (len >>> 8) & 255, len & 255);
  }
  if (!mask) return concat(new Uint8Array(head), payload);
  const key = new Uint8Array([0x37, 0xfa, 0x21, 0x3d]);
  const body = payload.map((b, i) => b ^ key[i & 3]);
  return concat(new Uint8Array(head), key, body);
}

/** A close frame's payload: the code (if any) and a reason. */
export function closePayload(code: number | null, reason = ""): Uint8Array {
  if (code === null) return new Uint8Array(0);
  return concat(new Uint8Array([(code >> 8) & 255, code & 255]), enc.encode(reason));
}

/** The request head of a WebSocket upgrade for `target` (written as given). */
export function upgradeRequest(port: number, target: string, extra = ""): string {
  return `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n` +
    `Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
    `Sec-WebSocket-Version: 13\r\n${extra}\r\n`;
}

/**
 * A raw TCP connection speaking (or misspeaking) WebSocket. One loop reads the
 * socket; callers wait on what it has read, with deadlines that leave nothing
 * reading behind them.
 */
export class RawConn {
  readonly conn: Deno.TcpConn;
  #buf: Uint8Array = new Uint8Array(0);
  #pos = 0;
  #closed = false;
  #eof = false;
  #error: string | null = null;
  #reading: Promise<void> | null = null;
  #changed: (() => void)[] = [];
  #paused = false;

  private constructor(conn: Deno.TcpConn) {
    this.conn = conn;
  }

  /** Opens a TCP connection to 127.0.0.1:`port`. */
  static async open(port: number): Promise<RawConn> {
    return new RawConn(await Deno.connect({ hostname: "127.0.0.1", port }));
  }

  /** Connects and sends an upgrade for `target`; returns the connection and the answer. */
  static async upgrade(
    port: number,
    target: string,
    ms = 10_000,
  ): Promise<{ c: RawConn; answer: Answer }> {
    const c = await RawConn.open(port);
    try {
      await c.write(enc.encode(upgradeRequest(port, target)));
      return { c, answer: await c.readHead(ms) };
    } catch (err) {
      c.close();
      throw err;
    }
  }

  /** Writes all of `bytes` (false when the peer is gone). */
  async write(bytes: Uint8Array): Promise<boolean> {
    try {
      let done = 0;
      while (done < bytes.length) done += await this.conn.write(bytes.subarray(done));
      return true;
    } catch {
      return false;
    }
  }

  /** Stops reading the socket (its buffers fill and the peer's writes back up). */
  pause(): void {
    this.#paused = true;
  }

  /** Reads the socket again after {@linkcode pause}. */
  resume(): void {
    this.#paused = false;
    this.#start();
  }

  // The one loop that reads the socket into #buf.
  #start(): void {
    if (this.#reading || this.#paused || this.#eof || this.#closed) return;
    this.#reading = (async () => {
      const chunk = new Uint8Array(64 * 1024);
      while (!this.#paused && !this.#closed) {
        let n: number | null;
        try {
          n = await this.conn.read(chunk);
        } catch (err) {
          this.#error = String(err);
          n = null;
        }
        if (n === null) {
          this.#eof = true;
          break;
        }
        // Consumed bytes are dropped here, so each read copies only what is unread.
        this.#buf = concat(this.#buf.subarray(this.#pos), chunk.subarray(0, n));
        this.#pos = 0;
        this.#notify();
      }
      this.#reading = null;
      this.#notify();
    })();
  }

  #notify(): void {
    const w = this.#changed;
    this.#changed = [];
    for (const f of w) f();
  }

  // Waits until `ready()` gives a value, the stream ends (null) or the deadline passes.
  async #wait<T>(ready: () => T | null, deadline: number): Promise<T | null | "timeout"> {
    while (true) {
      const v = ready();
      if (v !== null) return v;
      if (this.#eof || this.#closed) return null;
      this.#start();
      const left = deadline - Date.now();
      if (left <= 0) return "timeout";
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((r) => {
        this.#changed.push(r);
        timer = setTimeout(r, left);
      });
      clearTimeout(timer);
    }
  }

  /** Reads the HTTP response head (status 0 if the connection ends first or `ms` pass). */
  async readHead(ms = 10_000): Promise<Answer> {
    const got = await this.#wait(() => {
      const buf = this.#buf.subarray(this.#pos);
      const end = indexOfCrlf2(buf);
      if (end < 0) return null;
      const head = new TextDecoder().decode(buf.subarray(0, end));
      const rest = buf.slice(end + 4);
      this.#buf = rest;
      this.#pos = 0;
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      return { status, head, rest };
    }, Date.now() + ms);
    if (got === "timeout") return { status: 0, head: "(timeout)", rest: new Uint8Array(0) };
    if (got === null) {
      return { status: 0, head: new TextDecoder().decode(this.#buf), rest: this.#buf };
    }
    return got;
  }

  // Takes one whole frame off the buffer, or null when it holds none yet.
  #takeFrame(): Frame | null {
    const b = this.#buf;
    const p = this.#pos;
    const avail = b.length - p;
    if (avail < 2) return null;
    let len = b[p + 1] & 0x7f;
    let head = 2;
    if (len === 126) {
      if (avail < 4) return null;
      len = (b[p + 2] << 8) | b[p + 3];
      head = 4;
    } else if (len === 127) {
      if (avail < 10) return null;
      const v = new DataView(b.buffer, b.byteOffset + p + 2, 8);
      len = v.getUint32(0) * 2 ** 32 + v.getUint32(4);
      head = 10;
    }
    if (avail < head + len) return null;
    const f = {
      opcode: b[p] & 0x0f,
      fin: (b[p] & 0x80) !== 0,
      data: b.slice(p + head, p + head + len),
    };
    this.#pos = p + head + len;
    return f;
  }

  /** Reads the next frame from the server; null at end of stream or after `ms`. */
  async readFrame(ms = 30_000): Promise<Frame | null> {
    const got = await this.#wait(() => this.#takeFrame(), Date.now() + ms);
    return got === "timeout" ? null : got;
  }

  /**
   * Reads frames until the connection ends (a close frame, end of stream, an
   * error or `ms`), passing the other frames to `onData`.
   */
  async ending(ms = 10_000, onData?: (f: Frame) => void): Promise<Ending> {
    const deadline = Date.now() + ms;
    while (true) {
      const f = await this.#wait(() => this.#takeFrame(), deadline);
      if (f === "timeout") return { kind: "timeout" };
      if (f === null) return this.#error ? { kind: "reset", error: this.#error } : { kind: "eof" };
      if (f.opcode === 8) {
        const code = f.data.length >= 2 ? (f.data[0] << 8) | f.data[1] : null;
        return { kind: "close", code, reason: new TextDecoder().decode(f.data.subarray(2)) };
      }
      onData?.(f);
    }
  }

  /** Closes the TCP connection (idempotent). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.conn.close();
    } catch {
      // already closed by the peer's reset
    }
    this.#notify();
  }
}

function indexOfCrlf2(b: Uint8Array): number {
  for (let i = 0; i + 3 < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && b[i + 2] === 13 && b[i + 3] === 10) return i;
  }
  return -1;
}
