// The clients of the Jepsen-style cluster test beside the plain ones of
// cluster_clients.ts: the project's own `publisher(urls)` pipelining rows
// (each resolved with its offset, or rejected `answer_lost`: stored, offsets
// unknown), the project's `connect(urls, {reconnect: true})` reading with its
// default `compress=zstd-stream` (with or without a `where=` filter), and a
// raw WebSocket subscriber (plain text frames, with or without a filter) that
// moves to another node with its cursor. Each records what it was told.
import { connect } from "../../../client/connect.ts";
import { type Publisher, publisher } from "../../../client/publisher.ts";
import type { Subscription } from "../../../client/subscription.ts";
import { type ServeNode, tokenQuery } from "../serve_nodes.ts";

/** A row of the test's schema. */
export interface Row {
  p: string;
  seq: number;
  i: number;
}

/**
 * A filter: what the server is asked for (null: nothing, the rows being
 * chosen by the subscriber's row-level grant), and the condition the rows
 * it gets meet, in plain code.
 */
export interface Filter {
  where: Record<string, unknown> | null;
  matches(row: Row): boolean;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `publisher(urls)` sending rows `{p: id, seq: k, i: 0}`, k = 1, 2, …, `window` in flight. */
export class LibraryProducer {
  /** k → the offset its send resolved with. */
  readonly resolved = new Map<number, number>();
  /** The k whose send rejected `answer_lost` (stored once, offsets unknown). */
  readonly answerLost = new Set<number>();
  /** The k whose send was refused for a full disk (not stored). */
  readonly diskFull = new Set<number>();
  /** Any other rejection. */
  readonly problems: string[] = [];
  #sent = 0;
  #stop = false;
  #pub: Publisher | null = null;
  #done: Promise<void> | null = null;

  /** `window` sends in flight; with `paceMs`, that long between sends (a steady feed). */
  constructor(readonly id: string, readonly window = 8, readonly paceMs = 0) {}

  /** Rows sent so far. */
  get sent(): number {
    return this.#sent;
  }

  /** Rows answered (resolved, answer_lost, or refused for a full disk). */
  get answered(): number {
    return this.resolved.size + this.answerLost.size + this.diskFull.size;
  }

  async start(nodes: ServeNode[]): Promise<void> {
    this.#pub = await publisher(nodes.map((n) => `${n.ws}/t`), {
      producer: this.id,
      ...(nodes[0].token ? { token: nodes[0].token } : {}),
      retryTimeoutMs: 120_000, // longer than any fault the test holds
      backoff: { minMs: 50, maxMs: 500 },
    });
    this.#done = this.#run(this.#pub);
  }

  async #run(pub: Publisher): Promise<void> {
    const inFlight: Promise<void>[] = [];
    let refused = 0;
    while (!this.#stop) {
      const k = ++this.#sent;
      inFlight.push(
        pub.send({ p: this.id, seq: k, i: 0 } satisfies Row).then(
          (offset) => void this.resolved.set(k, offset),
          (err) => {
            const why = (err as { error?: string }).error;
            if (why === "answer_lost") this.answerLost.add(k);
            else if (why === "disk_full" || (why === "write_failed" && this.diskFull.size > 0)) {
              // Not stored: its seq is the publisher's next again (no hole).
              this.diskFull.add(k);
            } else this.problems.push(`row ${k}: ${err}`);
          },
        ),
      );
      if (inFlight.length >= this.window) await inFlight.shift();
      if (this.paceMs > 0) await pause(this.paceMs);
      // Refused for a full disk: not sent again at once, or the loop spins while it lasts.
      if (this.diskFull.size > refused) await pause(50);
      refused = this.diskFull.size;
    }
    await Promise.all(inFlight);
  }

  /** Stops sending; resolves once every send is answered, and closes. */
  async stop(): Promise<void> {
    this.#stop = true;
    await this.#done;
    await this.#pub?.close();
  }
}

/** What a subscriber saw: `[offset, row text]` in order of arrival. */
export interface Seen {
  readonly name: string;
  readonly filter: Filter | null;
  readonly rows: [number, string][];
  /** Why it ended before it was stopped, if it did. */
  readonly ended: string | null;
  stop(): Promise<void>;
}

/** `connect(urls, {reconnect: true})`: zstd-stream by default, optionally filtered. */
export class LibrarySub implements Seen {
  readonly rows: [number, string][] = [];
  ended: string | null = null;
  #sub: Subscription<Row> | null = null;
  #reading: Promise<void> | null = null;

  constructor(readonly name: string, readonly filter: Filter | null) {}

  async start(nodes: ServeNode[], first: ServeNode): Promise<void> {
    const urls = [first, ...nodes.filter((n) => n !== first)].map((n) => `${n.ws}/t`);
    this.#sub = await connect<Row>(urls, {
      reconnect: true,
      offset: 1,
      backoff: { minMs: 50, maxMs: 500 },
      ...(first.token ? { token: first.token } : {}),
      ...(this.filter?.where ? { where: JSON.stringify(this.filter.where) } : {}),
    });
    const sub = this.#sub;
    this.#reading = (async () => {
      try {
        for await (const [offset, row] of sub) this.rows.push([offset!, JSON.stringify(row)]);
        this.ended ??= "the subscription ended";
      } catch (err) {
        this.ended = `the subscription failed: ${err}`;
      }
    })();
  }

  async stop(): Promise<void> {
    const ended = this.ended;
    this.#sub?.close();
    await this.#reading;
    this.ended = ended; // closing it is not an ending of its own
  }
}

/** A raw WebSocket subscriber (plain text frames) that moves node to node with its cursor. */
export class RawSub implements Seen {
  readonly rows: [number, string][] = [];
  readonly ended: string | null = null;
  /** The close codes and reasons it was given, for the history. */
  readonly closes: string[] = [];
  #stop = false;
  #ws: WebSocket | null = null;
  #done: Promise<void>;

  readonly #stream: string;
  readonly #token: string | null;

  /** Reads stream `t` (or `access.stream`) with the nodes' token (or `access.token`). */
  constructor(
    readonly name: string,
    readonly filter: Filter | null,
    nodes: ServeNode[],
    first: ServeNode,
    access: { stream?: string; token?: string | null } = {},
  ) {
    this.#stream = access.stream ?? "t";
    this.#token = access.token !== undefined ? access.token : first.token;
    this.#done = this.#run(nodes, first);
  }

  // The next offset to ask for: one past the last row seen.
  get #next(): number {
    return this.rows.length === 0 ? 1 : this.rows[this.rows.length - 1][0] + 1;
  }

  async #run(nodes: ServeNode[], first: ServeNode): Promise<void> {
    let at = nodes.indexOf(first);
    while (!this.#stop) {
      const node = nodes[at % nodes.length];
      if (node.running) await this.#session(node);
      if (this.#stop) return;
      await pause(100);
      at++;
    }
  }

  #session(node: ServeNode): Promise<void> {
    const where = this.filter?.where
      ? `&where=${encodeURIComponent(JSON.stringify(this.filter.where))}`
      : "";
    return new Promise((resolve) => {
      const ws = new WebSocket(
        `${node.ws}/${this.#stream}?offset=${this.#next}${where}${tokenQuery(this.#token)}`,
      );
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
      ws.onclose = (e) => {
        if (!this.#stop) this.closes.push(`${node.name} ${e.code} ${e.reason}`);
        resolve();
      };
    });
  }

  /** Leaves: closes the socket; it comes back on the next node from where it was. */
  drop(): void {
    this.#ws?.close();
  }

  async stop(): Promise<void> {
    this.#stop = true;
    this.#ws?.close();
    await this.#done;
  }
}
