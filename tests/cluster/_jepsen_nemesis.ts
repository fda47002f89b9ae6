// The faults of the Jepsen-style cluster test, one at a time, each healed
// before the next: a node SIGKILLed and restarted, a node SIGSTOPped past its
// lease and SIGCONTed, etcd SIGSTOPped or SIGKILLed and restarted, one node
// cut from etcd (its proxy closed or stalled) — the target the leader or a
// follower, as the nodes' heads say at that moment. What happens, when and
// for how long comes from the run's seeded generator; the history is kept
// with times since the start, to be printed when a check fails.
import type { EtcdProc } from "../_etcd.ts";
import type { EtcdProxy } from "./_etcd_proxy.ts";
import type { ServeNode } from "./_serve_nodes.ts";

/** The kinds of fault. */
export const FAULTS = [
  "kill-node",
  "pause-node",
  "pause-etcd",
  "kill-etcd",
  "cut-etcd",
  "stall-etcd",
] as const;
export type Fault = typeof FAULTS[number];

/** One line of the history. */
export interface Event {
  /** ms since the run began. */
  at: number;
  what: string;
}

/** The run's history: what was done and seen, in order. */
export class History {
  readonly events: Event[] = [];
  readonly #t0 = performance.now();

  now(): number {
    return Math.round(performance.now() - this.#t0);
  }

  /** Records an event and prints it at once (a run that hangs shows how far it got). */
  add(what: string): void {
    const e = { at: this.now(), what };
    this.events.push(e);
    console.log(`jepsen ${line(e)}`);
  }

  /** One line an event, `  12.345s  what`. */
  toString(): string {
    return this.events.map(line).join("\n");
  }
}

const line = (e: Event) => `${(e.at / 1000).toFixed(3).padStart(9)}s  ${e.what}`;

/** What the nemesis acts on. */
export interface Cluster {
  nodes: ServeNode[];
  proxies: EtcdProxy[];
  etcd: EtcdProc;
  leaseMs: number;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Which node leads now, as the running nodes' heads say (null when none or unclear). */
export async function currentLeader(nodes: ServeNode[]): Promise<ServeNode | null> {
  const heads = await Promise.all(nodes.map((n) => n.running ? n.head(500) : null));
  const leaders = nodes.filter((_, i) => heads[i]?.role === "leader");
  return leaders.length === 1 ? leaders[0] : null;
}

/**
 * Applies one fault drawn from `rand`, holds it, and heals it; records each
 * step in `history`. Every process it stops it resumes or restarts before it
 * returns (and on a throw, so far as it can).
 */
export async function faultAndHeal(
  c: Cluster,
  rand: () => number,
  history: History,
): Promise<void> {
  const fault = FAULTS[Math.floor(rand() * FAULTS.length)];
  const onLeader = rand() < 0.5;
  // Held for: past the lease for pauses and cuts (so leadership moves), shorter sometimes for kills.
  const holdMs = Math.round(
    fault === "kill-node" ? 200 + rand() * 3000 : c.leaseMs * (0.5 + rand() * 2),
  );
  const leader = await currentLeader(c.nodes);
  const followers = c.nodes.filter((n) => n !== leader);
  const onNode = fault !== "pause-etcd" && fault !== "kill-etcd";
  const follower = followers[Math.floor(rand() * followers.length)];
  const pick = onNode ? (onLeader && leader ? leader : follower) : null;
  const role = pick === null ? "" : pick === leader ? " (the leader)" : " (a follower)";
  const proxy = pick ? c.proxies[c.nodes.indexOf(pick)] : null;
  switch (fault) {
    case "kill-node":
      history.add(`SIGKILL ${pick!.name}${role}; restart in ${holdMs} ms`);
      await pick!.kill();
      await pause(holdMs);
      await pick!.start();
      history.add(`${pick!.name} restarted`);
      break;
    case "pause-node":
      history.add(`SIGSTOP ${pick!.name}${role} for ${holdMs} ms`);
      pick!.pause();
      try {
        await pause(holdMs);
      } finally {
        pick!.resume();
      }
      history.add(`SIGCONT ${pick!.name}`);
      break;
    case "pause-etcd":
      history.add(`SIGSTOP etcd for ${holdMs} ms`);
      c.etcd.pause();
      try {
        await pause(holdMs);
      } finally {
        c.etcd.resume();
      }
      history.add(`SIGCONT etcd`);
      break;
    case "kill-etcd":
      history.add(`SIGKILL etcd; restart in ${holdMs} ms`);
      await c.etcd.kill();
      await pause(holdMs);
      await c.etcd.start();
      history.add(`etcd restarted`);
      break;
    case "cut-etcd":
    case "stall-etcd":
      history.add(
        `${fault === "cut-etcd" ? "cut" : "stall"} ${pick!.name}${role} from etcd for ${holdMs} ms`,
      );
      if (fault === "cut-etcd") proxy!.cut();
      else proxy!.stall();
      try {
        await pause(holdMs);
      } finally {
        proxy!.heal();
      }
      history.add(`${pick!.name} reaches etcd again`);
      break;
  }
}
