// Starting and stopping a local nats-server with JetStream on a file store, for
// benchmarks that compare against it (Debian's `nats-server`: apt-get install
// nats-server). `startNats()` resolves null, with the reason, when the binary
// is not there — a benchmark then says so instead of inventing a figure.

import type { NatsConnection } from "nats";

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

/**
 * Starts `nats-server` with JetStream (file store in a fresh temp folder) on a
 * free port of 127.0.0.1 and waits for "Server is ready"; `{ missing }` when
 * the binary cannot be run.
 */
export async function startNats(): Promise<NatsServer | { missing: string }> {
  let version: string;
  try {
    const v = await new Deno.Command("nats-server", {
      args: ["--version"],
      stdout: "piped",
      stderr: "piped",
    })
      .output();
    version = new TextDecoder().decode(v.stdout).trim();
  } catch (err) {
    return {
      missing: `nats-server cannot be run (${
        err instanceof Error ? err.message : err
      }); apt-get install nats-server`,
    };
  }
  const dir = await Deno.makeTempDir({ prefix: "streamcast-nats-" });
  const port = freePort();
  const conf = `${dir}/nats.conf`;
  await Deno.writeTextFile(
    conf,
    `listen: 127.0.0.1:${port}\njetstream {\n  store_dir: "${dir}/store"\n}\n`,
  );
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
    url: `nats://127.0.0.1:${port}`,
    version,
    pid: child.pid,
    storeDir: `${dir}/store`,
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
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
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
