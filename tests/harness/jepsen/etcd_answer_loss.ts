// An HTTP proxy in the test process between a node (or an EtcdClient) and
// etcd's JSON gateway that loses answers: every request is forwarded to etcd
// and applied there; for a request the selector picks, etcd's answer is read
// and then dropped — the client sees its response end with an error (the
// connection reset after the head), never the answer. Watch streams
// (`/v3/watch`, long-lived streaming answers) pass through untouched and are
// neither counted nor lost.
//
//   const proxy = new EtcdAnswerLoss(etcd.url);
//   proxy.loseWhen((c) => c.path === "/v3/kv/txn" && c.body.includes(b64("/x")));
//   const client = new EtcdClient(proxy.url);   // or: a node's --cluster
//   ...
//   proxy.lost;   // the calls whose answer was dropped
//   await proxy.close();
import { freePort } from "../util.ts";

/** One request seen by the proxy: `n` counts from 1 in the order they came. */
export interface EtcdCall {
  n: number;
  path: string;
  body: string;
}

/** etcd's answer to a call the proxy forwarded (lost or not). */
export interface EtcdAnswer {
  call: EtcdCall;
  status: number;
  body: string;
  lost: boolean;
}

/** A proxy to etcd at `target` that drops the answers of the calls a selector picks. */
export class EtcdAnswerLoss {
  /** What the node is given as `--cluster` (or the client as its endpoint). */
  readonly url: string;
  /** Every request seen (not watches), in order. */
  readonly calls: EtcdCall[] = [];
  /** The calls whose answer was dropped. */
  readonly lost: EtcdCall[] = [];
  /** Told each answer etcd gave (before it is dropped or forwarded). */
  onAnswer: ((answer: EtcdAnswer) => void) | null = null;
  readonly #target: string;
  readonly #server: Deno.HttpServer;
  readonly #inflight = new Set<AbortController>();
  #select: ((c: EtcdCall) => boolean) | null = null;

  /** A proxy (listening at once on a free port of 127.0.0.1) to etcd's base URL `target`. */
  constructor(target: string) {
    this.#target = target.replace(/\/$/, "");
    const port = freePort();
    this.url = `http://127.0.0.1:${port}`;
    this.#server = Deno.serve({
      hostname: "127.0.0.1",
      port,
      onListen: () => {},
      onError: () => new Response("proxy error", { status: 502 }),
    }, (req) => this.#handle(req));
  }

  /** From now on, drops the answer of each call `select` picks (null: none). */
  loseWhen(select: ((c: EtcdCall) => boolean) | null): void {
    this.#select = select;
  }

  async #handle(req: Request): Promise<Response> {
    const path = new URL(req.url).pathname;
    const body = await req.text();
    const stop = new AbortController();
    this.#inflight.add(stop);
    const init = {
      method: req.method,
      headers: { "content-type": req.headers.get("content-type") ?? "application/json" },
      body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
      signal: stop.signal, // a client gone cancels the answer's body, and so the fetch
    };
    if (path === "/v3/watch") {
      // A stream: passed through as it comes, for as long as both ends keep it.
      try {
        const res = await fetch(`${this.#target}${path}`, init);
        return new Response(res.body, { status: res.status, headers: res.headers });
      } catch {
        this.#inflight.delete(stop);
        return new Response("etcd unreachable", { status: 502 });
      }
    }
    const call: EtcdCall = { n: this.calls.length + 1, path, body };
    this.calls.push(call);
    const lose = this.#select?.(call) ?? false;
    let status: number;
    let text: string;
    let headers: Headers;
    try {
      const res = await fetch(`${this.#target}${path}`, init);
      text = await res.text(); // applied by etcd once it answered
      status = res.status;
      headers = res.headers;
    } catch {
      return new Response("etcd unreachable", { status: 502 });
    } finally {
      this.#inflight.delete(stop);
    }
    if (lose) this.lost.push(call);
    this.onAnswer?.({ call, status, body: text, lost: lose });
    if (!lose) return new Response(text, { status, headers });
    // The head goes out, the body fails: the client's read of the answer
    // ends with an error, as when the connection is reset mid-answer.
    return new Response(
      new ReadableStream({ pull: (c) => c.error(new Error("answer lost by the test proxy")) }),
      { status: 200, headers: { "content-type": "application/json" } },
    );
  }

  /** Stops listening and ends every forwarded request (watches too). */
  async close(): Promise<void> {
    for (const c of this.#inflight) c.abort();
    this.#inflight.clear();
    await this.#server.shutdown();
  }
}
