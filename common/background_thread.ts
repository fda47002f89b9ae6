/**
 * The process's one background thread, which runs the server's services off
 * the writer's thread — the chunk worker for every log keeping chunks, the
 * Iceberg worker for every table. One thread rather than one per service:
 * each thread is its own V8 isolate, with a heap that reserves and settles on
 * its own, so one fewer is some 40 MiB less resident memory and one fewer
 * heap whose size drifts while it settles.
 *
 * A service is a module exporting `serve` ({@linkcode ServiceModule}); the
 * thread (`background_worker.ts`) loads it with the first message for it.
 * Messages go both ways as structured copies, in order per service, and name
 * the folder they are about: the main side routes each to the handler that
 * registered that folder. The thread starts with the first
 * {@linkcode BackgroundService.acquire} and stops with the last `release`; its
 * memory reports are kept for the process's metrics.
 *
 * @module
 */

import type { MemoryMessage, WorkerMemory } from "./worker_memory.ts";
import { WorkerThread } from "./worker_thread.ts";

/**
 * What a service module exports: `serve` is called once, on the background
 * thread, with the function that answers the main thread, and returns the
 * handler of the main thread's messages.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { ServiceModule } from "./background_thread.ts";
 * type Msg = { dir: string; n: number };
 * const doubler: ServiceModule<Msg, Msg> = { serve: (post) => (m) => post({ dir: m.dir, n: m.n * 2 }) };
 * const said: Msg[] = [];
 * doubler.serve((m) => said.push(m))({ dir: "/a", n: 21 });
 * equal(said[0].n, 42);
 * ```
 */
export interface ServiceModule<In, Out> {
  /** Starts the service; returns its message handler. */
  serve(post: (msg: Out) => void): (msg: In) => void;
}

/**
 * A message between the main thread and a service on the background thread:
 * the service's module URL, and the message.
 */
export interface ServiceEnvelope {
  service: string;
  msg: unknown;
}

const BACKGROUND_WORKER = new URL("./background_worker.ts", import.meta.url);

// A folder's handler, as the thread sees it: messages arrive untyped (they
// crossed a structured copy); the port that registered it gives them its type.
interface Route {
  hear(msg: { dir: string }): void;
  fail(message: string): void;
}

// The running thread: its worker, the routes by service and folder, and the
// number of ports not yet released.
class Thread {
  static current: Thread | null = null;
  readonly #worker: WorkerThread<ServiceEnvelope, ServiceEnvelope | MemoryMessage>;
  readonly routes = new Map<string, Map<string, Route>>();
  memory: WorkerMemory | null = null;
  refs = 0;

  constructor() {
    this.#worker = new WorkerThread<ServiceEnvelope, ServiceEnvelope | MemoryMessage>(
      BACKGROUND_WORKER,
      (m) => "type" in m ? (this.memory = m.memory) : this.#route(m),
      (message) => {
        // The thread has stopped, and with it every service: the next user starts another.
        this.#forget();
        for (const folders of this.routes.values()) {
          for (const route of folders.values()) route.fail(message);
        }
      },
    );
  }

  // Hands a service's message to the handler of the folder it names.
  #route({ service, msg }: ServiceEnvelope): void {
    const about = msg as { dir: string };
    this.routes.get(service)?.get(about.dir)?.hear(about);
  }

  post(service: string, msg: unknown): void {
    this.#worker.post({ service, msg });
  }

  unref(): void {
    if (--this.refs > 0) return;
    void this.#worker.terminate();
    this.#forget();
  }

  #forget(): void {
    if (Thread.current === this) Thread.current = null;
  }
}

/**
 * One user's port to a service on the process's background thread (one
 * reference to the thread: {@linkcode BackgroundService.release} drops it,
 * and the last stops the thread). `failed` turns an error the thread did not
 * catch into the message each folder's handler hears (the thread has stopped;
 * it held every service; the next `acquire` starts another).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { BackgroundService } from "./background_thread.ts";
 * const file = await Deno.makeTempFile({ suffix: ".ts" });
 * await Deno.writeTextFile(file, `type Msg = { dir: string; n: number };
 *   export const serve = (post: (m: Msg) => void) => (m: Msg) => post({ dir: m.dir, n: m.n * 2 });`);
 * type Msg = { dir: string; n: number };
 * const port = BackgroundService.acquire<Msg, Msg>(new URL(`file://${file}`), (dir) => ({ dir, n: -1 }));
 * const heard = Promise.withResolvers<number>();
 * port.register("/a", (m) => heard.resolve(m.n));
 * port.post({ dir: "/a", n: 21 });
 * equal(await heard.promise, 42);
 * port.release(); // the last reference: the thread stops
 * equal(BackgroundService.memory(), null);
 * await Deno.remove(file);
 * ```
 */
export class BackgroundService<In, Out extends { dir: string }> {
  readonly #thread: Thread;
  readonly #service: string;
  readonly #failed: (dir: string, message: string) => Out;
  // This port's routes, by folder.
  readonly #mine = new Map<string, Route>();
  #released = false;

  private constructor(thread: Thread, url: URL, failed: (dir: string, message: string) => Out) {
    this.#thread = thread;
    this.#service = url.href;
    this.#failed = failed;
  }

  /** A port to the service at `url`, starting the background thread if none runs. */
  static acquire<In, Out extends { dir: string }>(
    url: URL,
    failed: (dir: string, message: string) => Out,
  ): BackgroundService<In, Out> {
    const thread = Thread.current ??= new Thread();
    thread.refs++;
    return new BackgroundService<In, Out>(thread, url, failed);
  }

  /** The background thread's last memory report (null: it does not run, or has not reported yet). */
  static memory(): WorkerMemory | null {
    return Thread.current?.memory ?? null;
  }

  /** Routes the service's messages about `dir` to `handler` (replacing any other port's route). */
  register(dir: string, handler: (msg: Out) => void): void {
    const route: Route = {
      hear: (msg) => handler(msg as Out),
      fail: (message) => handler(this.#failed(dir, message)),
    };
    let folders = this.#thread.routes.get(this.#service);
    if (!folders) this.#thread.routes.set(this.#service, folders = new Map());
    folders.set(dir, route);
    this.#mine.set(dir, route);
  }

  /** Sends a message to the service (a structured copy). */
  post(msg: In): void {
    this.#thread.post(this.#service, msg);
  }

  /**
   * Drops this port's routes — each unless another port has registered its
   * folder since (the folder's next user) — and its reference to the thread.
   * Once: a second call does nothing.
   */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    const folders = this.#thread.routes.get(this.#service);
    for (const [dir, route] of this.#mine) {
      if (folders?.get(dir) === route) folders.delete(dir);
    }
    if (folders?.size === 0) this.#thread.routes.delete(this.#service);
    this.#thread.unref();
  }
}
