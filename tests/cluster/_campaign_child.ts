// A node that campaigns for a stream's leadership in its own process, so that
// a test can SIGSTOP it. Arguments: ETCD_URLS STREAM NODE TTL_SECONDS.
// Every 20 ms it prints one JSON line with the wall time and what it believes
// on its own clock: {"t":ms,"leader":bool,"term":N|null}. It does nothing as
// leader but say so.
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { Election } from "../../cluster/election.ts";
import { Logger } from "../../common/logger.ts";

const [urls, stream, node, ttl] = Deno.args;
const etcd = new EtcdClient(urls, { timeoutMs: 1000 });
const election = new Election(etcd, {
  stream,
  node,
  url: `http://${node}.invalid`,
  ttlSeconds: Number(ttl),
  logger: new Logger({ level: "error" }),
});
let term: number | null = null;
election.onElected = (l) => (term = l.term);
election.start();
const enc = new TextEncoder();
setInterval(() => {
  const l = election.leadership; // valid on this process's clock, or null
  const line = JSON.stringify({ t: Date.now(), leader: l !== null, term: l ? l.term : term });
  Deno.stdout.writeSync(enc.encode(line + "\n"));
}, 20);
Deno.addSignalListener("SIGTERM", async () => {
  await election.close();
  Deno.exit(0);
});
