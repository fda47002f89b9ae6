// Starting and stopping local nats-servers with JetStream on a file store, for
// benchmarks that compare against them (Debian's `nats-server`: apt-get install
// nats-server): one server, or a cluster of them joined by routes.
// `startNats()` resolves `{ missing }`, with the reason, when the binary is not
// there — a benchmark then says so instead of inventing a figure.

import { connect as natsConnect, type NatsConnection } from "nats";

/** A running nats-server. */
export interface NatsServer {
  /** `nats://127.0.0.1:PORT`. */
  url: string;
  /** The server's version line (`nats-server: v2.9.10`). */
  version: string;
  /** The nats-server process's id. */
  pid: number;
  /** The JetStream store folder. */
  storeDir: string;
  /** Stops it (SIGTERM, then SIGKILL after 5 s) and removes the store. */
  stop(): Promise<void>;
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const p = (l.addr as Deno.NetAddr).port;
  l.close();
  return p;
}

// The `nats-server --version` line, or why the binary cannot be run.
async function natsVersion(): Promise<{ version: string } | { missing: string }> {
  try {
    const v = await new Deno.Command("nats-server", {
      args: ["--version"],
      stdout: "piped",
      stderr: "piped",
    })
      .output();
    return { version: new TextDecoder().decode(v.stdout).trim() };
  } catch (err) {
    return {
      missing: `nats-server cannot be run (${
        err instanceof Error ? err.message : err
      }); apt-get install nats-server`,
    };
  }
}

// One nats-server process started with config file `conf`, ready once it
// printed "Server is ready"; `stop()` ends it by its PID (SIGTERM, then SIGKILL
// after 5 s).
async function spawnNats(
  conf: string,
): Promise<{ pid: number; stop(): Promise<void>; log(): string }> {
  const child = new Deno.Command("nats-server", {
    args: ["-c", conf],
    stdout: "null",
    stderr: "piped",
  })
    .spawn();
  let log = "";
  const reader = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) log += chunk;
  })();
  const deadline = Date.now() + 10_000;
  while (!log.includes("Server is ready")) {
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      await child.status;
      throw new Error(`nats-server did not start:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    pid: child.pid,
    log: () => log,
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch {
        // already gone
      }
      const t = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch {
          // gone
        }
      }, 5000);
      await child.status;
      clearTimeout(t);
      await reader.catch(() => {});
    },
  };
}

/**
 * Starts `nats-server` with JetStream (file store in a fresh temp folder) on a
 * free port of 127.0.0.1 and waits for "Server is ready"; `{ missing }` when
 * the binary cannot be run.
 */
export async function startNats(): Promise<NatsServer | { missing: string }> {
  const v = await natsVersion();
  if ("missing" in v) return v;
  const dir = await Deno.makeTempDir({ prefix: "streamcast-nats-" });
  const port = freePort();
  const conf = `${dir}/nats.conf`;
  await Deno.writeTextFile(
    conf,
    `listen: 127.0.0.1:${port}\njetstream {\n  store_dir: "${dir}/store"\n}\n`,
  );
  const proc = await spawnNats(conf).catch(async (err) => {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw err;
  });
  return {
    url: `nats://127.0.0.1:${port}`,
    version: v.version,
    pid: proc.pid,
    storeDir: `${dir}/store`,
    async stop() {
      await proc.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** A running cluster of nats-servers with JetStream, routed to each other. */
export interface NatsCluster {
  /** Each server's `nats://127.0.0.1:PORT`, in the order of `names`. */
  urls: string[];
  /** Each server's `server_name` (what JetStream's stream info names as leader). */
  names: string[];
  /** Each server's process id. */
  pids: number[];
  /** The servers' version line (`nats-server: v2.9.10`). */
  version: string;
  /** Stops every server (by PID) and removes their stores. */
  stop(): Promise<void>;
}

/**
 * Starts `size` nats-servers on free ports of 127.0.0.1, each with JetStream
 * on a file store of its own, joined by cluster routes (every server lists
 * every route), and waits until JetStream answers a request for its account
 * — its meta group has a leader — so that streams with `num_replicas` up to
 * `size` can be added. Throws when the binary cannot be run.
 */
export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  const v = await natsVersion();
  if ("missing" in v) throw new Error(v.missing);
  const dir = await Deno.makeTempDir({ prefix: "streamcast-nats-cluster-" });
  const names = Array.from({ length: size }, (_, i) => `n${i + 1}`);
  const ports = names.map(() => freePort());
  const routePorts = names.map(() => freePort());
  const routes = routePorts.map((p) => `nats-route://127.0.0.1:${p}`).join(", ");
  const procs: Awaited<ReturnType<typeof spawnNats>>[] = [];
  const stop = async () => {
    await Promise.all(procs.map((p) => p.stop()));
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    const started = await Promise.allSettled(names.map(async (name, i) => {
      const conf = `${dir}/${name}.conf`;
      await Deno.writeTextFile(
        conf,
        `server_name: ${name}\nlisten: 127.0.0.1:${ports[i]}\n` +
          `jetstream {\n  store_dir: "${dir}/${name}"\n}\n` +
          `cluster {\n  name: bench\n  listen: 127.0.0.1:${routePorts[i]}\n` +
          `  routes: [${routes}]\n}\n`,
      );
      return await spawnNats(conf);
    }));
    for (const s of started) if (s.status === "fulfilled") procs.push(s.value);
    const failed = started.find((s) => s.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const urls = ports.map((p) => `nats://127.0.0.1:${p}`);
    const nc = await natsConnect({ servers: urls[0] });
    try {
      const deadline = Date.now() + 30_000;
      for (;;) {
        try {
          await (await nc.jetstreamManager({ timeout: 1000 })).getAccountInfo();
          break;
        } catch (err) {
          if (Date.now() > deadline) throw new Error(`JetStream cluster not ready: ${err}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    } finally {
      await nc.close();
    }
    return { urls, names, pids: procs.map((p) => p.pid), version: v.version, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Publishes `payloads` to `subject` with core publishes (no acks, a flush
 * every `flushEvery`) and waits until JetStream stream `stream` holds them
 * all — the fastest way into JetStream; throws after `timeoutMs`.
 */
export async function publishUnacked(
  nc: NatsConnection,
  stream: string,
  subject: string,
  payloads: readonly Uint8Array[],
  flushEvery = 1024,
  timeoutMs = 120_000,
): Promise<void> {
  const jsm = await nc.jetstreamManager();
  const t0 = performance.now();
  for (let i = 0; i < payloads.length; i++) {
    nc.publish(subject, payloads[i]);
    if (i % flushEvery === flushEvery - 1) await nc.flush();
  }
  await nc.flush();
  while ((await jsm.streams.info(stream)).state.messages < payloads.length) {
    if (performance.now() - t0 > timeoutMs) {
      throw new Error(`JetStream did not store every row in ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}
