/**
 * The background thread itself (`background_thread.ts` starts it): it loads
 * each service's module with the first message for it, hands the service its
 * messages in the order they came, and wraps what the service answers with
 * the service's name. It reports its heap every few seconds — one heap for
 * every service it runs.
 *
 * An error a service does not catch stops the thread (as in any worker): the
 * main thread hears it once and tells every folder of every service.
 *
 * @module
 */

import type { ServiceEnvelope, ServiceModule } from "./background_thread.ts";
import { type MemoryMessage, reportWorkerMemory } from "./worker_memory.ts";
import { parentChannel } from "./worker_thread.ts";

interface Loaded {
  handle: ((msg: unknown) => void) | null;
  // Messages that came while its module loaded, oldest first.
  waiting: unknown[];
}

const services = new Map<string, Loaded>();

const post = parentChannel<ServiceEnvelope, ServiceEnvelope | MemoryMessage>(({ service, msg }) => {
  let s = services.get(service);
  if (!s) {
    services.set(service, s = { handle: null, waiting: [] });
    // Thrown outside the promise, so that it stops the thread as any uncaught error.
    load(service, s).catch((err) =>
      queueMicrotask(() => {
        throw err;
      })
    );
  }
  if (s.handle) s.handle(msg);
  else s.waiting.push(msg);
});

async function load(service: string, s: Loaded): Promise<void> {
  const mod: ServiceModule<unknown, unknown> = await import(service);
  const handle = mod.serve((msg) => post({ service, msg }));
  for (const msg of s.waiting.splice(0)) handle(msg);
  s.handle = handle;
}

reportWorkerMemory((memory) => post({ type: "memory", memory }));
