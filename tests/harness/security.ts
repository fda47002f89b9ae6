// Helpers of the security suites: a raw HTTP/1.1 exchange (to see the status
// of a refused upgrade, which a WebSocket cannot), `cli.ts serve` as a child
// process (http or https), and a throwaway certificate.
import { join } from "node:path";
import { until } from "./util.ts";

export const SCHEMA = {
  type: "object",
  properties: { seq: { type: "integer" }, price: { type: "number" } },
  required: ["seq", "price"],
  additionalProperties: false,
};

export function row(i: number): { seq: number; price: number } {
  return { seq: i, price: 100 + i / 8 };
}

/** The answer to a raw request: status, headers (lowercase names), body text. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends one HTTP/1.1 request over a fresh TCP connection and reads the
 * status line, the headers and (by Content-Length) the body; a 101 returns
 * at once. `upgrade` adds the WebSocket handshake headers.
 */
export async function rawRequest(
  port: number,
  path: string,
  options: {
    headers?: Record<string, string>;
    upgrade?: boolean;
    ms?: number;
    /** The method (default GET). */
    method?: string;
    /** A body, sent with its Content-Length. */
    body?: Uint8Array | string;
  } = {},
): Promise<RawAnswer> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const timer = setTimeout(() => conn.close(), options.ms ?? 10_000);
  try {
    const body = typeof options.body === "string"
      ? new TextEncoder().encode(options.body)
      : options.body;
    let head = `${
      options.method ?? "GET"
    } ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n`;
    if (body !== undefined) head += `Content-Length: ${body.length}\r\n`;
    if (options.upgrade) {
      head = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n` +
        `Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
        `Sec-WebSocket-Version: 13\r\n`;
    }
    for (const [k, v] of Object.entries(options.headers ?? {})) head += `${k}: ${v}\r\n`;
    await conn.write(new TextEncoder().encode(head + "\r\n"));
    // A server may answer (413) and close before it has read a big body.
    for (let at = 0; body !== undefined && at < body.length;) {
      const n = await conn.write(body.subarray(at)).catch(() => null);
      if (n === null) break;
      at += n;
    }
    let acc = new Uint8Array(0);
    const dec = new TextDecoder();
    const more = async (): Promise<boolean> => {
      const chunk = new Uint8Array(65536);
      const n = await conn.read(chunk).catch(() => null);
      if (n === null) return false;
      const next = new Uint8Array(acc.length + n);
      next.set(acc);
      next.set(chunk.subarray(0, n), acc.length);
      acc = next;
      return true;
    };
    let end = -1;
    while ((end = dec.decode(acc).indexOf("\r\n\r\n")) < 0) {
      if (!(await more())) {
        throw new Error(`connection closed before the answer: ${JSON.stringify(dec.decode(acc))}`);
      }
    }
    const text = dec.decode(acc);
    const lines = text.slice(0, end).split("\r\n");
    const status = Number(lines[0].split(" ")[1]);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const at = l.indexOf(":");
      headers[l.slice(0, at).trim().toLowerCase()] = l.slice(at + 1).trim();
    }
    if (status === 101) return { status, headers, body: "" };
    const bodyStart = new TextEncoder().encode(text.slice(0, end + 4)).length;
    const length = Number(headers["content-length"] ?? "-1");
    while (length < 0 || acc.length - bodyStart < length) {
      if (!(await more())) break;
    }
    return { status, headers, body: dec.decode(acc.subarray(bodyStart)) };
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch {
      // closed by the timer or the peer
    }
  }
}

/** Absolute path of cli.ts. */
export const CLI: string = new URL("../../cli.ts", import.meta.url).pathname;

/** A `cli.ts serve` child that printed its `listening on` line. */
export interface Served {
  /** `http://HOST:PORT` or `https://…` from the listening line. */
  readonly url: string;
  readonly port: number;
  stderr(): string;
  waitStderr(pattern: RegExp, ms?: number): Promise<void>;
  write(text: string): Promise<void>;
  closeStdin(): Promise<void>;
  /** Sends a signal and returns at once (SIGHUP: reload the tokens file). */
  signal(sig: Deno.Signal): void;
  /** Whether the process is still running. */
  running(): boolean;
  /** Sends SIGINT and waits (bounded) for the exit code. */
  interrupt(): Promise<number>;
  /** Kills it if it still runs and releases its pipes. */
  stop(): Promise<void>;
}

/** Starts `cli.ts serve ARGS`; throws with its stderr if it does not listen within 20 s. */
export async function serveCli(
  args: string[],
  options: { stdin?: boolean } = {},
): Promise<Served> {
  const proc = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "serve", ...args],
    stdin: options.stdin ? "piped" : "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let text = "";
  let exited: Deno.CommandStatus | null = null;
  const decoder = new TextDecoder();
  const drained = (async () => {
    for await (const chunk of proc.stderr) text += decoder.decode(chunk, { stream: true });
  })();
  const status = proc.status.then((s) => (exited = s));
  const writer = options.stdin ? proc.stdin.getWriter() : null;
  let open = writer !== null;
  const closeStdin = async () => {
    if (!open) return;
    open = false;
    await writer!.close().catch(() => {});
  };
  const stop = async () => {
    if (exited === null) {
      try {
        proc.kill("SIGKILL");
      } catch {
        // exited in between
      }
    }
    await closeStdin();
    await status;
    await drained;
  };
  const listening = /listening on (https?:\/\/[^\s]+)/;
  try {
    await until(() => listening.test(text) || exited !== null, 20_000, "the listening line");
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}; stderr:\n${text}`);
  }
  if (exited !== null) {
    await stop();
    throw new Error(`serve exited; stderr:\n${text}`);
  }
  const url = listening.exec(text)![1];
  return {
    url,
    port: Number(new URL(url).port),
    stderr: () => text,
    waitStderr: (pattern, ms = 10_000) =>
      until(() => pattern.test(text), ms, `stderr matching ${pattern}`).catch((err) => {
        throw new Error(`${err.message}; stderr:\n${text}`);
      }),
    write: async (t) => {
      await writer!.write(new TextEncoder().encode(t));
    },
    closeStdin,
    signal: (sig) => proc.kill(sig),
    running: () => exited === null,
    interrupt: async () => {
      proc.kill("SIGINT");
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        const s = await Promise.race([
          status,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`no exit after SIGINT:\n${text}`)), 10_000);
          }),
        ]);
        await drained;
        return s.code;
      } finally {
        clearTimeout(timer);
      }
    },
    stop,
  };
}

/** Runs `cli.ts serve ARGS` to its exit (killed after 20 s): exit code and stderr. */
export async function serveCliExit(args: string[]): Promise<{ code: number; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "serve", ...args],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    signal: AbortSignal.timeout(20_000),
  }).output();
  const stderr = new TextDecoder().decode(out.stderr)
    .replace(/^Blocking waiting for file lock.*\n/gm, "");
  return { code: out.code, stderr };
}

/**
 * A self-signed certificate for 127.0.0.1 and localhost, valid one day, made
 * with openssl. It is its own trust anchor: `CA:FALSE`, because rustls (Deno's
 * TLS) refuses a CA certificate used as the server's own ("CaUsedAsEndEntity").
 */
export async function makeCert(dir: string): Promise<{ cert: string; key: string }> {
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  const out = await new Deno.Command("/usr/bin/openssl", {
    args: [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-keyout",
      key,
      "-out",
      cert,
      "-addext",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
      "-addext",
      "basicConstraints=critical,CA:FALSE",
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`openssl failed: ${new TextDecoder().decode(out.stderr)}`);
  return { cert, key };
}

/** Parses the JSON lines of a stderr text (other lines are skipped). */
export function jsonLines(text: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    out.push(JSON.parse(line));
  }
  return out;
}
