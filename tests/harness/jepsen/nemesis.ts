// The faults of the Jepsen-style cluster test, one at a time, each healed
// before the next: a node SIGKILLed and restarted, a node SIGSTOPped past its
// lease and SIGCONTed, etcd SIGSTOPped or SIGKILLed and restarted, one node
// cut from etcd (its proxy closed or stalled), one node's etcd answers lost
// (its answer-loss proxy lets etcd apply a request and drops the answer, to
// every call, to each call or each write with a drawn probability, or to one
// write of the window; sometimes with another node SIGSTOPped meanwhile, so
// that the target writes to etcd), one node's disk wiped (stopped by SIGKILL
// or SIGTERM, its root emptied, started again with the same name and flags),
// one node's disk filled (its root a small tmpfs of its own, filled to the
// last byte by a file of the test's, which is removed to heal it) — the target the leader or a follower, as the nodes' heads say at that
// moment. What happens, when and for how long comes from the run's seeded
// generator; the history is kept with times since the start, to be printed
// when a check fails.
import { join } from "node:path";
import type { EtcdProc } from "../etcd.ts";
import { rng } from "../util.ts";
import type { EtcdAnswerLoss, EtcdCall } from "./etcd_answer_loss.ts";
import type { EtcdProxy } from "./etcd_proxy.ts";
import type { ServeNode } from "../serve_nodes.ts";
import type { SmallDisk } from "../small_disk.ts";

/**
 * The first kinds of fault. A run drawing from these alone draws, for a
 * seed, the faults it drew before the two below existed: the seeds that
 * found bugs then replay as they did.
 */
export const CLASSIC_FAULTS = [
  "kill-node",
  "pause-node",
  "pause-etcd",
  "kill-etcd",
  "cut-etcd",
  "stall-etcd",
] as const;

/**
 * What a run drawing from every kind draws from: the classic ones once, and
 * lost etcd answers and a wiped disk twice each, so that a 40 s run (about
 * ten faults) seldom misses either.
 */
export const FAULTS = [
  ...CLASSIC_FAULTS,
  "lose-etcd-answers",
  "lose-etcd-answers",
  "wipe-node",
  "wipe-node",
] as const;

/**
 * What a run of the fourth kind draws from: every kind above, and a full
 * disk twice, so that a 40 s run seldom misses it.
 */
export const FOURTH_FAULTS = [...FAULTS, "fill-disk", "fill-disk"] as const;
export type Fault = typeof FOURTH_FAULTS[number];

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
  /** Each node's TCP proxy to etcd (cut, stall). */
  proxies: EtcdProxy[];
  /**
   * Each node's answer-loss proxy, in front of its TCP proxy (the node's
   * `--cluster`); null when the run draws from {@linkcode CLASSIC_FAULTS}.
   */
  losses: EtcdAnswerLoss[] | null;
  /** The kinds drawn from: {@linkcode CLASSIC_FAULTS}, {@linkcode FAULTS} or {@linkcode FOURTH_FAULTS}. */
  kinds: readonly Fault[];
  /** Each node's disk, its root (null unless the run draws from {@linkcode FOURTH_FAULTS}). */
  disks: SmallDisk[] | null;
  etcd: EtcdProc;
  leaseMs: number;
}

// The calls that change what etcd holds, whose lost answer leaves the caller
// unsure whether they applied (range reads and lease renewals are not).
const WRITES = new Set([
  "/v3/kv/put",
  "/v3/kv/txn",
  "/v3/kv/deleterange",
  "/v3/lease/grant",
  "/v3/lease/revoke",
]);

/** Which answers a lost-answers fault drops, and how to say so. */
interface Loss {
  select: (c: EtcdCall) => boolean;
  what: string;
}

/**
 * Draws which answers to lose: every one, each with a probability, each
 * write's with a probability, or the answer to the k-th write of the window
 * alone. Whether a given call is picked comes from a generator seeded from
 * `rand`, so the choices are the seed's in the order the calls come.
 */
function drawLoss(rand: () => number): Loss {
  const mode = rand();
  const coin = rng(Math.floor(rand() * 2 ** 32));
  if (mode < 0.2) return { select: () => true, what: "every answer" };
  if (mode < 0.5) {
    const p = 0.1 + rand() * 0.6;
    return { select: () => coin() < p, what: `each answer with probability ${p.toFixed(2)}` };
  }
  if (mode < 0.75) {
    const p = 0.3 + rand() * 0.7;
    return {
      select: (c) => WRITES.has(c.path) && coin() < p,
      what: `each write's answer with probability ${p.toFixed(2)}`,
    };
  }
  const k = 1 + Math.floor(rand() * 6);
  let writes = 0;
  return {
    select: (c) => WRITES.has(c.path) && ++writes === k,
    what: `the answer to write ${k} of the window`,
  };
}

// The lost calls, counted by path: "kv/txn ×3, lease/keepalive ×1".
function lostSummary(lost: EtcdCall[]): string {
  const by = new Map<string, number>();
  for (const c of lost) {
    const p = c.path.replace(/^\/v3\//, "");
    by.set(p, (by.get(p) ?? 0) + 1);
  }
  return [...by].map(([p, n]) => `${p} ×${n}`).join(", ") || "none";
}

// How far into a lost-answers window another node is stopped, ms.
const LEAD_IN_MS = 200;

/** Removes everything in `dir`, keeping the folder. */
async function emptyDir(dir: string): Promise<void> {
  for await (const e of Deno.readDir(dir)) {
    await Deno.remove(join(dir, e.name), { recursive: true });
  }
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
  const fault = c.kinds[Math.floor(rand() * c.kinds.length)];
  const onLeader = rand() < 0.5;
  // Held for: past the lease for pauses, cuts and losses (so leadership moves), shorter
  // sometimes for kills and wipes.
  const holdMs = Math.round(
    fault === "kill-node" || fault === "wipe-node"
      ? 200 + rand() * 3000
      : c.leaseMs * (0.5 + rand() * 2),
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
    case "lose-etcd-answers": {
      const loss = c.losses![c.nodes.indexOf(pick!)];
      const { select, what } = drawLoss(rand);
      // A quiet node calls etcd only to renew its lease. Half the time another node is
      // SIGSTOPped within the window, so that the target writes under the losses: a leader
      // drops the stopped follower from the in-sync set and adds it back, a follower
      // campaigns once the stopped leader's lease runs out.
      const other = rand() < 0.5 ? (pick === leader ? follower : leader) : null;
      const otherMs = Math.round(c.leaseMs * (0.75 + rand() * 0.75));
      const stop = other?.running ? other : null;
      const windowMs = stop ? Math.max(holdMs, LEAD_IN_MS + otherMs + c.leaseMs) : holdMs;
      history.add(
        `lose ${pick!.name}${role}'s etcd answers (${what}) for ${windowMs} ms` +
          (stop ? `, ${stop.name} SIGSTOPped for ${otherMs} ms within` : ""),
      );
      const [calls, lost] = [loss.calls.length, loss.lost.length];
      loss.loseWhen(select);
      try {
        if (stop) {
          await pause(LEAD_IN_MS);
          stop.pause();
          try {
            await pause(otherMs);
          } finally {
            stop.resume();
          }
          history.add(`SIGCONT ${stop.name}`);
          await pause(windowMs - LEAD_IN_MS - otherMs);
        } else {
          await pause(windowMs);
        }
      } finally {
        loss.loseWhen(null);
      }
      history.add(
        `${pick!.name} gets etcd's answers again; ${loss.calls.length - calls} calls, lost: ` +
          lostSummary(loss.lost.slice(lost)),
      );
      break;
    }
    case "fill-disk": {
      const disk = c.disks![c.nodes.indexOf(pick!)];
      history.add(`fill ${pick!.name}${role}'s disk for ${holdMs} ms`);
      try {
        await disk.fill(0);
        history.add(`${pick!.name}'s disk full (${await disk.freeBytes()} bytes free)`);
        await pause(holdMs);
      } finally {
        await disk.free();
      }
      history.add(`${pick!.name}'s disk has room again`);
      break;
    }
    case "wipe-node": {
      const graceful = rand() < 0.5;
      history.add(
        `${graceful ? "SIGTERM" : "SIGKILL"} ${pick!.name}${role}, empty its root, ` +
          `restart in ${holdMs} ms`,
      );
      await (graceful ? pick!.stop() : pick!.kill());
      try {
        await emptyDir(pick!.root);
        await pause(holdMs);
      } finally {
        await pick!.start();
      }
      history.add(`${pick!.name} restarted with an empty root`);
      break;
    }
  }
}
