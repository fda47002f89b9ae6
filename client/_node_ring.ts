// The nodes a subscription was given (one stream on several nodes) and the
// one it connects to: each attempt after a failure goes to the next, in
// turn. Private to client/. Web APIs only.

import { ConnectionClosed, NotReplayable, type SubscriptionError } from "./errors.ts";

/** The stream's URL on each node, and the one connected to (or tried). */
export class NodeRing {
  readonly #urls: readonly string[];
  #at = 0;

  constructor(urls: readonly string[]) {
    this.#urls = urls;
  }

  /** The URL connected to, or tried next. */
  get current(): string {
    return this.#urls[this.#at];
  }

  /** How many nodes there are. */
  get size(): number {
    return this.#urls.length;
  }

  /** Moves to the next node (one node: stays). */
  next(): void {
    this.#at = (this.#at + 1) % this.#urls.length;
  }

  /**
   * Whether an open that failed with `err` is tried again, or on the next
   * node: a node that cannot be reached, or (given several) one whose end is
   * still behind the position — a mirror or a cluster follower a little behind the node left.
   */
  moveOn(err: SubscriptionError): boolean {
    return err.reconnectable ||
      (this.#urls.length > 1 && err instanceof NotReplayable && err.why === "ahead");
  }

  /** The error of a start at which no node could be reached, naming what each said. */
  unreachable(failures: readonly string[]): ConnectionClosed {
    const detail = `no node could be reached: ${failures.join("; ")}`;
    return new ConnectionClosed(this.#urls.join(", "), null, "", null, detail);
  }
}
