// A minimal WebSocket client over a raw TCP socket, for tests that need to stop
// reading (so the server's buffers fill) and to read again later.

/** One frame from the server. */
export interface RawFrame {
  /** 1 text, 2 binary, 8 close, 9 ping, 10 pong. */
  opcode: number;
  /** Payload bytes. */
  data: Uint8Array;
  /** Whether this is the last fragment of its message. */
  fin: boolean;
}

export class RawWs {
  readonly conn: Deno.TcpConn;
  #buf: Uint8Array = new Uint8Array(0);

  private constructor(conn: Deno.TcpConn, rest: Uint8Array) {
    this.conn = conn;
    this.#buf = rest;
  }

  /** Connects and completes the handshake; throws unless the answer is 101. */
  static async connect(port: number, path: string, recvBuffer?: number): Promise<RawWs> {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    void recvBuffer;
    const req = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n` +
      `Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
      `Sec-WebSocket-Version: 13\r\n\r\n`;
    let acc: Uint8Array = new Uint8Array(0);
    try {
      await conn.write(new TextEncoder().encode(req));
      while (true) {
        const chunk = new Uint8Array(4096);
        const n = await conn.read(chunk);
        if (n === null) throw new Error("connection closed during handshake");
        acc = concat(acc, chunk.subarray(0, n));
        const text = new TextDecoder().decode(acc);
        const end = text.indexOf("\r\n\r\n");
        if (end >= 0) {
          if (!text.startsWith("HTTP/1.1 101")) {
            throw new Error(`handshake refused: ${text.split("\r\n")[0]}`);
          }
          const headerBytes = new TextEncoder().encode(text.slice(0, end + 4)).length;
          return new RawWs(conn, acc.slice(headerBytes));
        }
      }
    } catch (err) {
      // Refused or cut: the connection is of no further use.
      conn.close();
      throw err;
    }
  }

  async #fill(n: number): Promise<boolean> {
    while (this.#buf.length < n) {
      const chunk = new Uint8Array(256 * 1024);
      const got = await this.conn.read(chunk);
      if (got === null) return false;
      this.#buf = concat(this.#buf, chunk.subarray(0, got));
    }
    return true;
  }

  /** Reads the next frame (null at end of stream). */
  async readFrame(): Promise<RawFrame | null> {
    if (!(await this.#fill(2))) return null;
    const b0 = this.#buf[0];
    let len = this.#buf[1] & 0x7f;
    let head = 2;
    if (len === 126) {
      if (!(await this.#fill(4))) return null;
      len = (this.#buf[2] << 8) | this.#buf[3];
      head = 4;
    } else if (len === 127) {
      if (!(await this.#fill(10))) return null;
      const v = new DataView(this.#buf.buffer, this.#buf.byteOffset + 2, 8);
      len = v.getUint32(0) * 2 ** 32 + v.getUint32(4);
      head = 10;
    }
    if (!(await this.#fill(head + len))) return null;
    const data = this.#buf.slice(head, head + len);
    this.#buf = this.#buf.slice(head + len);
    return { opcode: b0 & 0x0f, data, fin: (b0 & 0x80) !== 0 };
  }

  /**
   * Reads the next whole message, joining fragments (control frames other
   * than close are skipped); null at end of stream.
   */
  async readMessage(): Promise<RawFrame | null> {
    let first: RawFrame | null = null;
    const parts: Uint8Array[] = [];
    while (true) {
      const f = await this.readFrame();
      if (!f) return null;
      if (f.opcode === 8) return f;
      if (f.opcode === 9 || f.opcode === 10) continue;
      first ??= f;
      parts.push(f.data);
      if (f.fin) {
        const data = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
        let o = 0;
        for (const p of parts) {
          data.set(p, o);
          o += p.length;
        }
        return { opcode: first.opcode, data, fin: true };
      }
    }
  }

  /** Reads frames until a text or close frame; returns its text, or null on close. */
  async readText(): Promise<string | null> {
    while (true) {
      const f = await this.readMessage();
      if (!f || f.opcode === 8) return null;
      if (f.opcode === 1) return new TextDecoder().decode(f.data);
    }
  }

  /** Sends a masked frame with `opcode`. */
  async send(opcode: number, data: Uint8Array): Promise<void> {
    const mask = crypto.getRandomValues(new Uint8Array(4));
    const head: number[] = [0x80 | opcode];
    if (data.length < 126) head.push(0x80 | data.length);
    else if (data.length < 65536) head.push(0x80 | 126, data.length >> 8, data.length & 255);
    else {
      head.push(0x80 | 127, 0, 0, 0, 0);
      head.push(
        (data.length >>> 24) & 255,
        (data.length >>> 16) & 255,
        (data.length >>> 8) & 255,
        data.length & 255,
      );
    }
    const masked = data.map((b, i) => b ^ mask[i & 3]);
    await this.conn.write(concat(concat(new Uint8Array(head), mask), masked));
  }

  close(): void {
    try {
      this.conn.close();
    } catch {
      // already closed
    }
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
