// One cluster node for one stream in its own process, so that a test can
// SIGKILL or SIGSTOP it: a replicated log, a ClusterNode, and an HTTP port on
// 127.0.0.1 standing in for the server's touch points (the publish route asks
// publishable() and acknowledges once the log's promise resolves, i.e. once
// committed; the replicate route hands the socket to the node).
//
// Arguments: ETCD_URLS STREAM NODE PORT DIR REPLICAS LEASE_SECONDS LAG_MS
// Prints {"ready":true} on stdout once listening.
//
// Routes:
//   POST /publish?producer=P&seq=S   NDJSON rows → 200 {"first","last","duplicate"?}
//                                    | 503 {"error","leader"} | 409 {"error":"stale_seq"}
//   GET  /state                      role, term, leader, ends, in-sync set, counters
//   GET  /rows                       every durable row: [offset, time µs, payload] per line
//   GET  /producer?p=P               the producer's state, or null
//   POST /syncs?hold=1 | ?hold=0     hold this node's segment syncs, or let them go
//        | ?hold=0&fail=1            (failing the held ones; tests/harness/held_syncs.ts)
//   GET  /STREAM/replicate?node=N    the replication socket
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { ClusterNode } from "../../cluster/cluster_node.ts";
import { Log } from "../../log/log.ts";
import { NotLeaderError } from "../../log/errors.ts";
import { Logger } from "../../common/logger.ts";
import { readMeta } from "../../log/log_meta.ts";
import { heldSyncs } from "../harness/held_syncs.ts";
import {
  claimCopy,
  claimStreamId,
  newStreamId,
  recordCopy,
  streamIdRefusal,
} from "../../cluster/stream_identity.ts";

const [urls, stream, node, port, dir, replicas, lease, lag] = Deno.args;
const logger = new Logger({ level: "info", format: "json" });
const etcd = new EtcdClient(urls, { timeoutMs: 1000 });
// Every node's log has the cluster's stream id.
const local = (await readMeta(dir).catch(() => null))?.meta.stream_id ?? null;
const id = await claimStreamId(etcd, stream, node, local ?? newStreamId());
if (local !== null && local !== id.streamId) {
  console.error(streamIdRefusal(stream, local, id));
  Deno.exit(1);
}
const syncs = heldSyncs();
const log = await Log.open(dir, { replicated: true, logger, streamId: id.streamId, io: syncs.io });
// A copy that may lack committed rows (made now, or not the one recorded) joins.
const createdUs = (await readMeta(dir))!.meta.created_us;
const standing = await claimCopy(etcd, stream, node, {
  createdUs,
  madeNow: local === null,
  end: log.replication!.durableEnd,
  committed: log.replication!.commitIndex,
});
const cluster = new ClusterNode(etcd, log, {
  stream,
  node,
  url: `http://127.0.0.1:${port}`,
  replicas: Number(replicas),
  leaseSeconds: Number(lease),
  replicaLagMs: Number(lag),
  pollMs: 500,
  // No campaign before catching up.
  joining: standing.joining,
  joined: () => recordCopy(etcd, stream, node, createdUs),
  logger,
});
const rep = log.replication!;
const dec = new TextDecoder();

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}

async function publish(req: Request, url: URL): Promise<Response> {
  const refusal = cluster.publishable();
  if (refusal) return json(refusal, 503);
  const rows = (await req.text()).split("\n").filter((l) => l !== "");
  const producer = url.searchParams.get("producer");
  const seq = Number(url.searchParams.get("seq"));
  let r;
  try {
    r = log.publish(rows, producer ? { producer, seq } : null);
  } catch (err) {
    if (err instanceof NotLeaderError) return json({ error: "not_leader", leader: null }, 503);
    throw err;
  }
  if (r.status === "stale") return json({ error: "stale_seq", last_seq: r.lastSeq }, 409);
  if (r.status !== "stored" && r.status !== "duplicate") return json({ error: r.status }, 409);
  try {
    await r.done;
  } catch (err) {
    if (err instanceof NotLeaderError) {
      return json({ error: "not_leader", leader: err.leader }, 503);
    }
    return json({ error: "write_failed", detail: String(err) }, 503);
  }
  return json({ first: r.first, last: r.last, duplicate: r.status === "duplicate" });
}

async function rows(): Promise<Response> {
  const reader = rep.reader(1);
  const out: string[] = [];
  try {
    for (;;) {
      const b = await reader.read();
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) {
        const p = dec.decode(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]));
        out.push(JSON.stringify([b.offsets[i], b.times[i], p]));
      }
    }
  } finally {
    reader.close();
  }
  return new Response(out.join("\n"));
}

const server = Deno.serve(
  { hostname: "127.0.0.1", port: Number(port), onListen: () => {} },
  (req) => {
    const url = new URL(req.url);
    if (url.pathname === `/${stream}/replicate`) {
      const { socket, response } = Deno.upgradeWebSocket(req);
      cluster.accept(socket, url.searchParams.get("node") ?? "?");
      return response;
    }
    if (req.method === "POST" && url.pathname === "/publish") return publish(req, url);
    if (url.pathname === "/state") {
      return json({
        ...cluster.view,
        end: log.endOffset,
        durable: rep.durableEnd,
        commit: rep.commitIndex,
        terms: rep.terms,
        counters: cluster.counters,
        publishable: cluster.publishable(),
      });
    }
    if (url.pathname === "/rows") return rows();
    if (req.method === "POST" && url.pathname === "/syncs") {
      if (url.searchParams.get("hold") === "1") syncs.hold();
      else syncs.release(url.searchParams.get("fail") === "1");
      return json({ held: syncs.held });
    }
    if (url.pathname === "/producer") return json(log.producers.state(url.searchParams.get("p")!));
    return new Response("not found", { status: 404 });
  },
);

cluster.start();
console.log(JSON.stringify({ ready: true }));

Deno.addSignalListener("SIGTERM", async () => {
  await cluster.close();
  await server.shutdown();
  await log.close();
  Deno.exit(0);
});
