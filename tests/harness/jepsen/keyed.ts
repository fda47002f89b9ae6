// The keyed stream of the Jepsen-style test's fourth kind, on nodes that
// check HS256 signed tokens: stream `k` (the test's schema, keyed by `p`)
// fed over HTTP by one producer whose seq S carries key KEYS[S % 4], read by
// raw subscribers moving node to node whose tokens grant only some rows
// (a row-level grant, one of them ANDed with its own `where=`). Checked on
// the final log of `k`: every acknowledged seq once at its offset and none
// missing, each subscriber saw exactly the rows its grant (and filter)
// allows, in order, no gap, none twice; every node's `/k/latest` is the
// latest row of each key of that log, and a granted holder's is the part
// its grant allows; the grant's holder reads no other stream.
import { join } from "node:path";
import { secretText, sign } from "../jwt.ts";
import {
  bearer,
  converged,
  post,
  rowsShown,
  type ServeNode,
  type StreamAccess,
} from "../serve_nodes.ts";
import { checkSeen, type Log, logOf } from "./checks.ts";
import { type Filter, RawSub, type Row } from "./clients.ts";
import type { Ack } from "./cluster_clients.ts";

/** The keyed stream. */
export const KEYED = "k";
/** Its keys, the values of column `p`. */
export const KEYS = ["ka", "kb", "kc", "kd"] as const;
/** The producer's id. */
const PRODUCER = "kp";

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The row of seq `seq`: one row, of key KEYS[seq % 4]. */
export const keyedRow = (seq: number): Row => ({ p: KEYS[seq % KEYS.length], seq, i: 0 });

/** What the nodes are given and the tokens the test holds. */
export interface KeyedSetup {
  /** Flags of every node: the secret, the cluster's credential, the keyed stream. */
  flags: string[];
  /** Reads and publishes every stream, and is an admin (the test's own requests). */
  adminToken: string;
  /** Row-level grants: each reads `k` alone, only the rows its filter allows. */
  grants: { name: string; token: string; filter: Filter }[];
}

/** Writes the HS256 secret beside `schemaPath` under `root` and mints the tokens. */
export async function keyedSetup(root: string, schemaPath: string): Promise<KeyedSetup> {
  const text = secretText();
  const secretPath = join(root, "jwt.secret");
  await Deno.writeTextFile(secretPath, text + "\n");
  const key = new TextEncoder().encode(text);
  const day = 24 * 3600;
  const adminToken = await sign(key, {
    sub: "jepsen",
    expIn: day,
    streamcast: { read: ["*"], publish: ["*"], admin: true },
  });
  const ab = ["ka", "kb"];
  const grantAb = await sign(key, {
    sub: "reader-ab",
    expIn: day,
    streamcast: { read: [KEYED], where: { [KEYED]: { p: ab } } },
  });
  const grantC = await sign(key, {
    sub: "reader-c",
    expIn: day,
    streamcast: { read: [KEYED], where: { [KEYED]: { p: ["kc"] } } },
  });
  const clusterToken = text.slice(0, 32);
  return {
    flags: [
      "--jwt-secret-file",
      secretPath,
      "--cluster-token",
      clusterToken,
      "--stream",
      `${KEYED}=${schemaPath}`,
      "--publish",
      KEYED,
      "--key",
      `${KEYED}=p`,
    ],
    adminToken,
    grants: [
      {
        name: "grant(p in ka,kb)",
        token: grantAb,
        filter: { where: null, matches: (r) => ab.includes(r.p) },
      },
      {
        name: "grant(p = kc)+where(seq >= 20)",
        token: grantC,
        filter: { where: { seq: { gte: 20 } }, matches: (r) => r.p === "kc" && r.seq >= 20 },
      },
    ],
  };
}

/** The keyed stream's producer: one row a seq over HTTP, a seq until it is acknowledged. */
export class KeyedProducer {
  readonly id = PRODUCER;
  readonly acks: Ack[] = [];
  readonly problems: string[] = [];
  diskFull = 0;
  #stop = false;
  readonly #done: Promise<void>;

  constructor(readonly nodes: ServeNode[], readonly paceMs = 0) {
    this.#done = this.#run();
  }

  async #run(): Promise<void> {
    let at = 0;
    for (let seq = 1; !this.#stop; seq++) {
      for (;;) {
        const live = this.nodes.filter((n) => n.running);
        const node = live.length > 0 ? live[at % live.length] : null;
        const access: StreamAccess = { stream: KEYED, token: node?.token };
        const body = JSON.stringify(keyedRow(seq)) + "\n";
        const a = node
          ? await post(node.url, body, { producer: PRODUCER, seq }, 5000, access)
          : null;
        if (a?.status === 200) {
          const b = a.body as { first: number; last: number; duplicate?: boolean };
          this.acks.push({ seq, first: b.first, last: b.last, duplicate: b.duplicate === true });
          if (this.paceMs > 0) await pause(this.paceMs);
          break;
        }
        if (a?.status === 507) this.diskFull++;
        else if (a && a.status !== 503) {
          this.problems.push(`${KEYED} seq ${seq}: ${a.status} ${JSON.stringify(a.body)}`);
        }
        at++;
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

/** The granted subscribers: each grant's, one starting on each node in turn. */
export function grantedSubs(nodes: ServeNode[], setup: KeyedSetup): RawSub[] {
  return nodes.map((node, i) => {
    const g = setup.grants[i % setup.grants.length];
    return new RawSub(`${g.name}@${node.name}`, g.filter, nodes, node, {
      stream: KEYED,
      token: g.token,
    });
  });
}

async function latest(node: ServeNode, token: string): Promise<string[] | null> {
  try {
    const res = await fetch(`${node.url}/${KEYED}/latest`, { headers: bearer(token) });
    if (res.status !== 200) {
      await res.body?.cancel();
      return null;
    }
    return (await res.text()).split("\n").filter((l) => l !== "").map((l) => {
      const [o, r] = JSON.parse(l);
      return JSON.stringify([o, r]);
    });
  } catch {
    return null;
  }
}

/** What a run found of the keyed stream, with the nodes converged. */
export async function checkKeyed(
  nodes: ServeNode[],
  setup: KeyedSetup,
  producer: KeyedProducer,
  subs: RawSub[],
  problems: string[],
): Promise<{ rows: number }> {
  const end = await converged(nodes, 30_000, KEYED);
  const access = { stream: KEYED, token: setup.adminToken };
  const shown = await Promise.all(nodes.map((n) => rowsShown(n.url, end, access)));
  for (const [i, s] of shown.entries()) {
    if (JSON.stringify(s) !== JSON.stringify(shown[0])) {
      problems.push(`${KEYED}: ${nodes[i].name}'s log differs from ${nodes[0].name}'s`);
    }
  }
  const local: string[] = [];
  const log: Log = logOf(shown[0], local);
  for (const p of local) problems.push(`${KEYED}: ${p}`);
  if (log.size !== end - 1) problems.push(`${KEYED}: final log of ${log.size} rows, end ${end}`);
  // The producer: each acknowledged seq at its offset; seqs 1..max each once.
  for (const a of producer.acks) {
    const r = log.get(a.first);
    if (a.last !== a.first || JSON.stringify(r) !== JSON.stringify(keyedRow(a.seq))) {
      problems.push(
        `${KEYED} seq ${a.seq} acknowledged at ${a.first}..${a.last}, the log has ${
          JSON.stringify(r)
        }`,
      );
    }
  }
  const seen = new Map<number, number>();
  let max = 0;
  for (const [o, r] of log) {
    if (seen.has(r.seq)) {
      problems.push(`${KEYED} seq ${r.seq} twice: at ${seen.get(r.seq)} and ${o}`);
    }
    seen.set(r.seq, o);
    max = Math.max(max, r.seq);
  }
  for (const a of producer.acks) max = Math.max(max, a.seq);
  for (let s = 1; s <= max; s++) {
    if (!seen.has(s)) problems.push(`${KEYED} seq ${s} missing from the log (max ${max})`);
  }
  // The granted subscribers: exactly what each grant allows.
  for (const s of subs) {
    await waitFor(() => s.rows.length >= [...log.values()].filter(s.filter!.matches).length);
  }
  await Promise.allSettled(subs.map((s) => s.stop()));
  for (const s of subs) checkSeen(s, log, problems);
  // The snapshot: each key's latest row, on every node; a grant's holder gets its part.
  const last = new Map<string, [number, Row]>();
  for (const [o, r] of log) last.set(r.p, [o, r]);
  const all = [...last.values()].sort((a, b) => a[0] - b[0]).map((x) => JSON.stringify(x));
  for (const node of nodes) {
    const got = await latest(node, setup.adminToken);
    if (JSON.stringify(got) !== JSON.stringify(all)) {
      problems.push(
        `${node.name} /${KEYED}/latest: ${JSON.stringify(got)}, want ${JSON.stringify(all)}`,
      );
    }
    const g = setup.grants[0];
    const part = [...last.values()].filter(([, r]) => g.filter.matches(r))
      .sort((a, b) => a[0] - b[0]).map((x) => JSON.stringify(x));
    const gotPart = await latest(node, g.token);
    if (JSON.stringify(gotPart) !== JSON.stringify(part)) {
      problems.push(
        `${node.name} /${KEYED}/latest for ${g.name}: ${JSON.stringify(gotPart)}, want ${
          JSON.stringify(part)
        }`,
      );
    }
  }
  // A grant of k alone reads no other stream.
  const other = await fetch(`${nodes[0].url}/t/head`, { headers: bearer(setup.grants[0].token) });
  await other.body?.cancel();
  if (other.status !== 403) problems.push(`${setup.grants[0].name} read /t/head: ${other.status}`);
  return { rows: log.size };
}

async function waitFor(ok: () => boolean, ms = 30_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!ok() && performance.now() < deadline) await pause(100);
}
