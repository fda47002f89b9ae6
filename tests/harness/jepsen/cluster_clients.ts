// Clients of a cluster for the failover tests, over plain fetch and WebSocket:
// producers that publish with a producer id and move to another node when
// theirs goes (an HTTP one resending its seq; a WebSocket one pipelining and
// resending what the greeting's last_seq says was not stored), and a
// subscriber that moves to another node with its cursor. Each records what
// it was told, for the checks against the final log. A full disk (507, a
// frame's disk_full) is no problem: the producer sends the refused seq again
// until it is stored, and counts the refusals.
import { post, rowsOf, type ServeNode, tokenQuery } from "../serve_nodes.ts";

/** An acknowledgement: the seq and the offsets it was given. */
export interface Ack {
  seq: number;
  first: number;
  last: number;
  duplicate: boolean;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

// The running nodes, starting after the `i`th.
function rotation(nodes: ServeNode[], i: number): ServeNode[] {
  const live = nodes.filter((n) => n.running);
  return live.map((_, k) => live[(i + k) % live.length]);
}

/**
 * Publishes `rows` rows a seq over HTTP, one seq at a time, until stopped;
 * with `paceMs`, waits that long after each acknowledgement (a steady feed).
 */
export class HttpProducer {
  readonly acks: Ack[] = [];
  readonly problems: string[] = [];
  /** Sends refused for a full disk (507), sent again. */
  diskFull = 0;
  #stop = false;
  #done: Promise<void>;

  constructor(
    readonly id: string,
    nodes: ServeNode[],
    readonly rows = 3,
    readonly paceMs = 0,
  ) {
    this.#done = this.#run(nodes);
  }

  async #run(nodes: ServeNode[]): Promise<void> {
    let at = 0;
    for (let seq = 1; !this.#stop; seq++) {
      for (;;) {
        const node = rotation(nodes, at)[0];
        const a = node
          ? await post(
            node.url,
            rowsOf(this.id, seq, this.rows),
            {
              producer: this.id,
              seq,
            },
            5000,
            { token: node.token },
          )
          : null;
        if (a?.status === 507) this.diskFull++;
        if (a?.status === 200) {
          const b = a.body as { first: number; last: number; duplicate?: boolean };
          this.acks.push({ seq, first: b.first, last: b.last, duplicate: b.duplicate === true });
          if (this.paceMs > 0) await pause(this.paceMs);
          break;
        }
        if (a && a.status !== 503 && a.status !== 507) {
          this.problems.push(`seq ${seq}: ${a.status} ${JSON.stringify(a.body)}`);
        }
        at++; // no answer, or not taken there: the next node
        await pause(100);
      }
    }
  }

  /** Stops after the seq in flight is acknowledged. */
  async stop(): Promise<void> {
    this.#stop = true;
    await this.#done;
  }
}

/**
 * Publishes frames of `rows` rows over the publish socket, `window` in
 * flight; with `paceMs`, each acknowledgement lets the next frame go that
 * much later (a steady feed).
 */
export class WsProducer {
  readonly acks: Ack[] = [];
  readonly problems: string[] = [];
  /** The greetings' last_seq, in order. */
  readonly greetings: number[] = [];
  /** Frames refused for a full disk (disk_full, and the ones after it refused with it). */
  diskFull = 0;
  #next = 1;
  #unacked = new Map<number, string>();
  #stop = false;
  #done: Promise<void>;

  constructor(
    readonly id: string,
    nodes: ServeNode[],
    readonly rows = 2,
    readonly window = 8,
    readonly paceMs = 0,
  ) {
    this.#done = this.#run(nodes);
  }

  #frame(seq: number): string {
    const rows = rowsOf(this.id, seq, this.rows).trim().split("\n").map((l) => JSON.parse(l));
    return JSON.stringify({ seq, rows });
  }

  async #run(nodes: ServeNode[]): Promise<void> {
    let at = 0;
    while (!this.#stop || this.#unacked.size > 0) {
      const node = rotation(nodes, at++)[0];
      if (node) await this.#session(node);
      if (this.#stop && this.#unacked.size === 0) return;
      await pause(100);
    }
  }

  // One connection: resolves when it closes (or fails to open).
  #session(node: ServeNode): Promise<void> {
    return new Promise((resolve) => {
      const ws = new WebSocket(
        `${node.ws}/t/publish?producer=${this.id}${tokenQuery(node.token)}`,
      );
      let greeted = false;
      // A frame refused for a full disk: the frames after it are refused too (no hole).
      let full = false;
      const fill = () => {
        if (!greeted || ws.readyState !== WebSocket.OPEN) return;
        while (!this.#stop && this.#unacked.size < this.window) {
          const seq = this.#next++;
          const f = this.#frame(seq);
          this.#unacked.set(seq, f);
          ws.send(f);
        }
        if (this.#stop && this.#unacked.size === 0) ws.close();
      };
      ws.onmessage = (e) => {
        const m = JSON.parse(e.data as string);
        if (!greeted) {
          greeted = true;
          this.greetings.push(m.last_seq);
          // What the log holds of ours already was stored: never sent again.
          for (const seq of [...this.#unacked.keys()]) {
            if (seq <= m.last_seq) this.#unacked.delete(seq);
          }
          for (const f of [...this.#unacked.keys()].sort((a, b) => a - b)) {
            ws.send(this.#unacked.get(f)!);
          }
          fill();
          return;
        }
        if (m.error) {
          // Refused for a full disk, or behind such a refusal: sent again on a new
          // connection, from what its greeting says is stored.
          if (m.error === "disk_full" || (full && m.error === "write_failed")) {
            full = true;
            this.diskFull++;
            ws.close();
            return;
          }
          this.problems.push(`${JSON.stringify(m)}`);
          return;
        }
        if (!this.#unacked.delete(m.seq)) return;
        this.acks.push({
          seq: m.seq,
          first: m.first,
          last: m.last,
          duplicate: m.duplicate === true,
        });
        if (this.paceMs > 0) setTimeout(fill, this.paceMs);
        else fill();
      };
      ws.onerror = () => {};
      ws.onclose = () => resolve();
    });
  }

  /** The seqs sent and neither acknowledged nor known stored. */
  get unacked(): number[] {
    return [...this.#unacked.keys()];
  }

  /** Stops sending new frames; resolves once every frame sent is acknowledged or known stored. */
  async stop(): Promise<void> {
    this.#stop = true;
    await this.#done;
  }

  /** The greeting a new connection to `node` gets: its last_seq. */
  async lastSeq(node: ServeNode): Promise<number> {
    const ws = new WebSocket(`${node.ws}/t/publish?producer=${this.id}${tokenQuery(node.token)}`);
    try {
      return await new Promise<number>((resolve, reject) => {
        ws.onmessage = (e) => resolve(JSON.parse(e.data as string).last_seq);
        ws.onclose = (e) => reject(new Error(`closed ${e.code} ${e.reason}`));
      });
    } finally {
      ws.close();
    }
  }
}

/** A subscriber that moves to another node with its cursor when its connection ends. */
export class MovingSub {
  /** Every row received, `[offset, row text]`, in order of arrival. */
  readonly rows: [number, string][] = [];
  #stop = false;
  #ws: WebSocket | null = null;
  #done: Promise<void>;

  constructor(nodes: ServeNode[], first: ServeNode) {
    this.#done = this.#run(nodes, first);
  }

  get next(): number {
    return this.rows.length === 0 ? 1 : this.rows[this.rows.length - 1][0] + 1;
  }

  async #run(nodes: ServeNode[], first: ServeNode): Promise<void> {
    let node: ServeNode | undefined = first;
    let at = nodes.indexOf(first);
    while (!this.#stop) {
      if (node?.running) await this.#session(node);
      if (this.#stop) return;
      await pause(100);
      node = rotation(nodes, ++at)[0];
    }
  }

  #session(node: ServeNode): Promise<void> {
    return new Promise((resolve) => {
      const ws = new WebSocket(`${node.ws}/t?offset=${this.next}`);
      this.#ws = ws;
      let greeted = false;
      ws.onmessage = (e) => {
        if (!greeted) {
          greeted = true;
          return;
        }
        for (const line of (e.data as string).split("\n")) {
          const [offset] = JSON.parse(line) as [number];
          this.rows.push([offset, line.slice(line.indexOf(",") + 1, -1)]);
        }
      };
      ws.onerror = () => {};
      ws.onclose = () => resolve();
    });
  }

  async stop(): Promise<void> {
    this.#stop = true;
    this.#ws?.close();
    await this.#done;
  }
}
