// A raw publish socket for the publish tests: the greeting, then every answer in order.
import { until } from "../../harness/util.ts";

export class RawPub {
  readonly ws: WebSocket;
  readonly answers: Record<string, unknown>[] = [];
  greeting: Record<string, unknown> | null = null;
  closed: { code: number; reason: string } | null = null;
  constructor(url: string) {
    this.ws = new WebSocket(url);
    this.ws.onerror = () => {};
    this.ws.onclose = (e) => (this.closed = { code: e.code, reason: e.reason });
    this.ws.onmessage = (e) => {
      const v = JSON.parse(e.data as string);
      if (this.greeting === null) this.greeting = v;
      else this.answers.push(v);
    };
  }
  static async open(url: string): Promise<RawPub> {
    const p = new RawPub(url);
    await until(() => p.greeting !== null || p.closed !== null, 10_000, "publish greeting");
    return p;
  }
  send(seq: number, rows: unknown[]): void {
    this.ws.send(JSON.stringify({ seq, rows }));
  }
  async wait(n: number): Promise<void> {
    await until(() => this.answers.length >= n || this.closed !== null, 10_000, `${n} answers`);
  }
  async close(): Promise<void> {
    if (this.closed) return;
    this.ws.close();
    await until(() => this.closed !== null, 5000, "close");
  }
}
