// Streams created and deleted while the Jepsen-style test's faults go on:
// one after another, a stream `cN` is created by `PUT /_/streams/cN` on one
// node (the next running one each time), seen usable on every running node
// (its /head answers, a row published to it through whichever node leads
// is shown by each), then deleted by `DELETE` on another node and seen gone
// from every running node. A request with no answer, or a 503 (etcd out of
// reach, no leader yet), is sent again; a PUT sent again answers 200 (the
// same definition), a DELETE 404 (already gone). Each step is bounded: one
// that does not happen within STEP_MS is a problem. At the end, every node
// lists the streams the churn left created, and no other created one.
import { bearer, post, rowsOf, rowsShown, SCHEMA, type ServeNode } from "../serve_nodes.ts";
import type { History } from "./nemesis.ts";

/** How long each step (created, usable everywhere, deleted, gone everywhere) may take, ms. */
export const STEP_MS = 60_000;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Answer {
  status: number;
  body: string;
}

async function request(
  node: ServeNode,
  method: string,
  path: string,
  body?: unknown,
): Promise<Answer | null> {
  try {
    const res = await fetch(`${node.url}${path}`, {
      method,
      headers: { ...bearer(node.token), "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(5000),
    });
    return { status: res.status, body: await res.text() };
  } catch {
    return null;
  }
}

/** The churn: started with the run's nodes, stopped (after its cycle) before the checks. */
export class StreamChurn {
  readonly problems: string[] = [];
  /** Streams created and not deleted, as far as the churn knows. */
  readonly live = new Set<string>();
  /** Streams created, deleted. */
  created = 0;
  deleted = 0;
  #stop = false;
  #turn = 0;
  readonly #done: Promise<void>;

  constructor(readonly nodes: ServeNode[], readonly history: History) {
    this.#done = this.#run();
  }

  // The next running node, in turn.
  #next(): ServeNode | null {
    const live = this.nodes.filter((n) => n.running);
    return live.length === 0 ? null : live[this.#turn++ % live.length];
  }

  // Sends `method path` to the nodes in turn until `done` says the answer is the
  // one wanted; a problem (and false) when another comes or STEP_MS passes.
  async #send(
    what: string,
    method: string,
    path: string,
    body: unknown,
    done: (a: Answer, again: boolean) => boolean,
  ): Promise<boolean> {
    const deadline = performance.now() + STEP_MS;
    let again = false;
    while (performance.now() < deadline) {
      const node = this.#next();
      const a = node ? await request(node, method, path, body) : null;
      if (a !== null && done(a, again)) return true;
      if (a !== null && a.status !== 503) {
        this.problems.push(`${what} on ${node!.name}: ${a.status} ${a.body.slice(0, 200)}`);
        return false;
      }
      // No answer (it may have applied), or not now: again.
      again = true;
      await pause(200);
    }
    this.problems.push(`${what}: no answer within ${STEP_MS / 1000} s`);
    return false;
  }

  // Waits until every running node says `ok` of the stream; a problem when not within STEP_MS.
  async #everywhere(what: string, ok: (n: ServeNode) => Promise<boolean>): Promise<boolean> {
    const deadline = performance.now() + STEP_MS;
    let late: string[] = [];
    while (performance.now() < deadline) {
      const running = this.nodes.filter((n) => n.running);
      const says = await Promise.all(running.map((n) => ok(n).catch(() => false)));
      late = running.filter((_, i) => !says[i]).map((n) => n.name);
      if (late.length === 0) return true;
      await pause(250);
    }
    this.problems.push(`${what}: not on ${late.join(", ")} within ${STEP_MS / 1000} s`);
    return false;
  }

  async #run(): Promise<void> {
    for (let n = 1; !this.#stop; n++) {
      const name = `c${n}`;
      const made = await this.#send(
        `PUT ${name}`,
        "PUT",
        `/_/streams/${name}`,
        { schema: SCHEMA, publish: true },
        (a, again) => a.status === 201 || (again && a.status === 200),
      );
      if (!made) return;
      this.live.add(name);
      this.created++;
      if (!await this.#usable(name)) return;
      await pause(500);
      const gone = await this.#send(
        `DELETE ${name}`,
        "DELETE",
        `/_/streams/${name}`,
        undefined,
        (a, again) => a.status === 204 || (again && a.status === 404),
      );
      if (!gone) return;
      this.live.delete(name);
      this.deleted++;
      const closed = await this.#everywhere(`${name} deleted`, async (node) => {
        const a = await request(node, "GET", `/${name}/head`);
        return a?.status === 404;
      });
      if (!closed) return;
      if (n % 5 === 0) {
        this.history.add(`stream churn: ${this.created} created, ${this.deleted} deleted`);
      }
    }
  }

  // Served by every running node, and a row published to it shown by each.
  async #usable(name: string): Promise<boolean> {
    const served = await this.#everywhere(`${name} created`, async (node) => {
      const a = await request(node, "GET", `/${name}/head`);
      return a?.status === 200;
    });
    if (!served) return false;
    const access = { stream: name, token: this.nodes[0].token };
    const deadline = performance.now() + STEP_MS;
    let stored = false;
    for (let k = 0; !stored && performance.now() < deadline; k++) {
      const node = this.#next();
      const a = node
        ? await post(node.url, rowsOf(name, 1, 1), { producer: "churn", seq: 1 }, 5000, access)
        : null;
      if (a?.status === 200) stored = true;
      else if (a && a.status !== 503 && a.status !== 507) {
        this.problems.push(`POST ${name} on ${node!.name}: ${a.status} ${JSON.stringify(a.body)}`);
        return false;
      } else await pause(200);
    }
    if (!stored) {
      this.problems.push(`POST ${name}: not stored within ${STEP_MS / 1000} s`);
      return false;
    }
    const want = JSON.stringify([[1, rowsOf(name, 1, 1).trim()]]);
    return await this.#everywhere(`${name}'s row`, async (node) => {
      const rows = await rowsShown(node.url, 2, access).catch(() => []);
      return JSON.stringify(rows.map(([o, t]) => [o, JSON.stringify(JSON.parse(t))])) === want;
    });
  }

  /** Stops after the cycle in flight. */
  async stop(): Promise<void> {
    this.#stop = true;
    await this.#done;
  }

  /** Every node lists, of the streams the churn made, exactly those it left created. */
  async checkListed(): Promise<void> {
    const want = JSON.stringify([...this.live].sort());
    for (const node of this.nodes.filter((n) => n.running)) {
      const a = await request(node, "GET", "/_/streams");
      if (a?.status !== 200) {
        this.problems.push(`GET /_/streams on ${node.name}: ${a?.status ?? "no answer"}`);
        continue;
      }
      const heads = JSON.parse(a.body) as { stream: string; declared?: boolean }[];
      const made = heads.filter((h) => /^c\d+$/.test(h.stream)).map((h) => h.stream).sort();
      if (JSON.stringify(made) !== want) {
        this.problems.push(`${node.name} lists created streams ${made.join(",")}, want ${want}`);
      }
    }
  }
}
