// Clients on HS256 signed tokens that expire during a long run: a mint that
// signs short-lived tokens (each with a lifetime drawn from a range, so the
// clients' expiries do not line up) and counts them, and a producer — the
// project's `publisher(urls)` with a producer id and a token function —
// whose socket the server closes at each token's `exp` (4401) and which
// reconnects on a fresh token and goes on, resending what was not answered.
// Each send is recorded with the offset it was acknowledged at, for the
// check against the final log.
import { type Publisher, publisher } from "../../../client/mod.ts";
import { sign } from "../jwt.ts";

/** A soak row: `sym` is the stream's key, `src`/`seq` name the send. */
export interface SoakRow {
  sym: string;
  src: string;
  seq: number;
  px: number;
}

/** The soak stream's schema: `sym` its key column. */
export const SOAK_SCHEMA = {
  type: "object",
  properties: {
    sym: { type: "string" },
    src: { type: "string" },
    seq: { type: "integer" },
    px: { type: "integer" },
  },
  required: ["sym", "src", "seq", "px"],
};

/** Signs short-lived HS256 tokens for the clients, and counts them. */
export class TokenMint {
  /** Tokens minted, by holder. */
  readonly minted = new Map<string, number>();

  /**
   * `secret`: the server's --jwt-secret-file bytes; each token lives a
   * whole number of seconds in [minS, maxS], drawn with `random`.
   */
  constructor(
    readonly secret: Uint8Array,
    readonly minS: number,
    readonly maxS: number,
    readonly random: () => number,
  ) {}

  /** A token for `sub` with `grant` (the `streamcast` claim), expiring within the range. */
  async token(sub: string, grant: Record<string, unknown>): Promise<string> {
    this.minted.set(sub, (this.minted.get(sub) ?? 0) + 1);
    const expIn = this.minS + Math.floor(this.random() * (this.maxS - this.minS + 1));
    return await sign(this.secret, { sub, expIn, streamcast: grant });
  }

  /** A function minting a fresh token for `sub` at each call: a client's `token` option. */
  source(sub: string, grant: Record<string, unknown>): () => Promise<string> {
    return () => this.token(sub, grant);
  }

  /** Every token minted. */
  get total(): number {
    let n = 0;
    for (const v of this.minted.values()) n += v;
    return n;
  }
}

/**
 * `publisher(urls)` with producer id `id`, on tokens from `mint`, sending
 * rows `{sym, src: id, seq, px}` (seq = 1, 2, …; sym and px drawn with
 * `random`), `window` in flight, pausing `paceMs` between sends.
 */
export class SignedProducer {
  /** seq → the offset it was acknowledged at. */
  readonly acked = new Map<number, number>();
  /** seq → the row sent. */
  readonly sent = new Map<number, SoakRow>();
  /** The seqs whose send rejected `answer_lost` (stored once, offset unknown). */
  readonly answerLost = new Set<number>();
  /** Any other rejection. */
  readonly problems: string[] = [];
  /** Reconnects so far (each token's expiry is one). */
  reconnects = 0;
  #stop = false;
  #pub: Publisher | null = null;
  #done: Promise<void> | null = null;

  constructor(
    readonly id: string,
    readonly syms: readonly string[],
    readonly random: () => number,
    readonly window = 4,
    readonly paceMs = 20,
  ) {}

  /** Connects to `urls` (the first that takes it; the leader's answer redirects). */
  async start(urls: string[], mint: TokenMint): Promise<void> {
    this.#pub = await publisher(urls, {
      producer: this.id,
      token: mint.source(this.id, { publish: ["t"] }),
      retryTimeoutMs: 120_000,
      backoff: { minMs: 50, maxMs: 1000 },
      onReconnect: () => void this.reconnects++,
    });
    this.#done = this.#run(this.#pub);
  }

  async #run(pub: Publisher): Promise<void> {
    const inFlight: Promise<void>[] = [];
    for (let seq = 1; !this.#stop; seq++) {
      const row: SoakRow = {
        sym: this.syms[Math.floor(this.random() * this.syms.length)],
        src: this.id,
        seq,
        px: Math.floor(this.random() * 100),
      };
      this.sent.set(seq, row);
      inFlight.push(
        pub.send(row).then(
          (offset) => void this.acked.set(seq, offset),
          (err) => {
            if ((err as { error?: string }).error === "answer_lost") this.answerLost.add(seq);
            else this.problems.push(`${this.id} seq ${seq}: ${err}`);
          },
        ),
      );
      if (inFlight.length >= this.window) await inFlight.shift();
      if (this.paceMs > 0) await new Promise((r) => setTimeout(r, this.paceMs));
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
