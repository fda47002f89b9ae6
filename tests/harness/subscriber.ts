// A test subscriber over Deno's WebSocket that records every frame.
import { until } from "./util.ts";

export interface Closed {
  code: number;
  reason: string;
}

export class TestSub {
  readonly ws: WebSocket;
  readonly frames: string[] = [];
  /** Data lines ([offset,msg]) in arrival order, batch frames split. */
  readonly lines: string[] = [];
  greeting: Record<string, unknown> | null = null;
  closed: Closed | null = null;
  readonly done: Promise<Closed>;

  constructor(url: string) {
    this.ws = new WebSocket(url);
    this.done = new Promise((resolve) => {
      this.ws.onclose = (e) => {
        this.closed = { code: e.code, reason: e.reason };
        resolve(this.closed);
      };
    });
    this.ws.onerror = () => {};
    this.ws.onmessage = (e) => {
      const data = e.data as string;
      this.frames.push(data);
      if (this.greeting === null && this.frames.length === 1) {
        this.greeting = JSON.parse(data);
        return;
      }
      for (const line of data.split("\n")) this.lines.push(line);
    };
  }

  /** Opens and waits for the greeting (or the close, for a refusal). */
  static async open(url: string): Promise<TestSub> {
    const s = new TestSub(url);
    await until(() => s.greeting !== null || s.closed !== null, 10_000, `greeting from ${url}`);
    return s;
  }

  /** Offsets received so far. */
  offsets(): number[] {
    return this.lines.map((l) => JSON.parse(l)[0]);
  }

  async waitLines(n: number, ms = 20_000): Promise<void> {
    await until(() => this.lines.length >= n || this.closed !== null, ms, `${n} rows`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.ws.close();
    await this.done;
  }
}
