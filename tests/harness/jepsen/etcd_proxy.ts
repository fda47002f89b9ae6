// A TCP proxy between one node and etcd, in the test process, so that a test
// can cut that node alone from etcd while the others keep their quorum. Two
// ways to cut: `cut()` closes every connection and closes new ones at once (a
// refused connection, seen at once), `stall()` keeps the connections open and
// forwards nothing (a partition that drops packets: seen only as timeouts).
// `heal()` forwards again; what a stalled connection buffered is delivered
// then, as TCP retransmits after a partition heals.
import { freePort } from "../util.ts";

type Mode = "open" | "cut" | "stall";

/** One node's way to etcd: `url` is what the node is given as `--cluster`. */
export class EtcdProxy {
  readonly url: string;
  readonly #listener: Deno.TcpListener;
  readonly #conns = new Set<Deno.Conn>();
  #mode: Mode = "open";
  #healed: Promise<void> = Promise.resolve();
  #heal: () => void = () => {};
  #closed = false;
  readonly #accepting: Promise<void>;

  constructor(readonly target: { hostname: string; port: number }) {
    const port = freePort();
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port });
    this.url = `http://127.0.0.1:${port}`;
    this.#accepting = this.#accept();
  }

  get mode(): Mode {
    return this.#mode;
  }

  async #accept(): Promise<void> {
    for (;;) {
      let conn: Deno.Conn;
      try {
        conn = await this.#listener.accept();
      } catch {
        return; // closed
      }
      if (this.#mode === "cut" || this.#closed) {
        conn.close();
        continue;
      }
      this.#pipe(conn);
    }
  }

  async #pipe(client: Deno.Conn): Promise<void> {
    let server: Deno.Conn;
    try {
      server = await Deno.connect(this.target);
    } catch {
      client.close(); // etcd is down: the node sees its connection end
      return;
    }
    this.#conns.add(client).add(server);
    const end = () => {
      for (const c of [client, server]) {
        this.#conns.delete(c);
        try {
          c.close();
        } catch {
          // closed already
        }
      }
    };
    await Promise.allSettled([this.#pump(client, server), this.#pump(server, client)]);
    end();
  }

  // Copies `from` to `to`, holding each chunk while the proxy is stalled.
  async #pump(from: Deno.Conn, to: Deno.Conn): Promise<void> {
    const buf = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await from.read(buf);
        if (n === null) break;
        while (this.#mode === "stall") await this.#healed;
        if (this.#mode === "cut" || this.#closed) break;
        let off = 0;
        while (off < n) off += await to.write(buf.subarray(off, n));
      }
    } finally {
      // Half-close is not worth modelling: either side ending ends both.
      for (const c of [from, to]) {
        try {
          c.close();
        } catch {
          // closed already
        }
      }
    }
  }

  /** Closes every connection and refuses new ones until {@linkcode heal}. */
  cut(): void {
    this.#hold("cut");
    for (const c of [...this.#conns]) {
      try {
        c.close();
      } catch {
        // closed already
      }
    }
    this.#conns.clear();
  }

  /** Forwards nothing, keeping the connections open, until {@linkcode heal}. */
  stall(): void {
    this.#hold("stall");
  }

  #hold(mode: Mode): void {
    if (this.#mode === "open") this.#healed = new Promise((r) => (this.#heal = r));
    this.#mode = mode;
  }

  /** Forwards again. */
  heal(): void {
    this.#mode = "open";
    this.#heal();
  }

  /** Stops listening and closes every connection. */
  async close(): Promise<void> {
    this.#closed = true;
    this.heal();
    this.#listener.close();
    for (const c of [...this.#conns]) {
      try {
        c.close();
      } catch {
        // closed already
      }
    }
    this.#conns.clear();
    await this.#accepting;
  }
}
