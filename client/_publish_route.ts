// Finding the node that takes a publish (docs/SPEC.md §9.5): the nodes a
// publisher was given, the one it tries first, what each answered, and what
// a refused upgrade said. A follower answers a publish upgrade with HTTP 307
// to the leader, or 503 `no_leader` / `not_enough_replicas`; a WebSocket
// constructor shows neither the status nor `Location`, so when the runtime's
// error names a status (Deno: "Invalid status code: 307") the same upgrade
// is asked again with fetch, which can read them. A browser's error names
// none: there the publisher moves on to the next URL. Private to client/.
// Web APIs only.

/** A refused upgrade's status in the runtime's error message, or null. */
export function refusedStatus(message: string): number | null {
  const m = /invalid status code:? (\d{3})/i.exec(message);
  return m ? Number(m[1]) : null;
}

/** What a node answered a publish upgrade, read over HTTP. */
export interface UpgradeAnswer {
  status: number;
  /** `Location` of a redirect. */
  location: string | null;
  /** The JSON body's `error`. */
  error: string | null;
  /** What to say about the answer (status, error and detail). */
  said: string;
}

/**
 * Asks for the publish upgrade at `wsUrl` with fetch and reads the answer
 * (a redirect is not followed). A node that upgrades after all answers 101
 * and the socket is dropped at once (no frame is sent on it). Resolves with
 * what it answered, or with text saying why it did not.
 */
export async function askUpgrade(
  wsUrl: string,
  token: string | undefined,
  timeoutMs: number,
): Promise<UpgradeAnswer | string> {
  const u = new URL(wsUrl);
  u.protocol = u.protocol === "wss:" ? "https:" : "http:";
  const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
  const headers: Record<string, string> = {
    upgrade: "websocket",
    connection: "Upgrade",
    "sec-websocket-version": "13",
    "sec-websocket-key": key,
    "sec-websocket-protocol": token === undefined ? "streamcast" : `streamcast, bearer.${token}`,
  };
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  try {
    const res = await fetch(u, { headers, redirect: "manual", signal: ac.signal });
    const body = res.status === 101 ? "" : await res.text().catch(() => "");
    if (res.status === 101) await res.body?.cancel().catch(() => {});
    let error: string | null = null;
    let detail = "";
    try {
      const j = JSON.parse(body) as { error?: unknown; detail?: unknown };
      if (typeof j.error === "string") error = j.error;
      if (typeof j.detail === "string") detail = j.detail;
    } catch {
      detail = body.slice(0, 120);
    }
    const location = res.headers.get("location");
    const said = [String(res.status), error, detail].filter((x) => x).join(" ") +
      (location ? ` to ${location}` : "");
    return { status: res.status, location, error, said };
  } catch (err) {
    return ac.signal.aborted ? `no answer within ${timeoutMs} ms` : String(err);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Where a redirect from `from` leads, as a publish socket URL (`http:` →
 * `ws:`), or text saying what is wrong with `location`.
 */
export function redirectTarget(location: string, from: string): string | { bad: string } {
  let u: URL;
  try {
    const base = new URL(from);
    base.protocol = base.protocol === "wss:" ? "https:" : "http:";
    u = new URL(location, base);
  } catch {
    return { bad: `Location ${JSON.stringify(location)} is not a URL` };
  }
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  else if (u.protocol !== "ws:" && u.protocol !== "wss:") {
    return { bad: `Location ${JSON.stringify(location)} is not an http(s) or ws(s) URL` };
  }
  return u.toString();
}

/** The nodes of a publisher, the one tried first, and what each answered last. */
export class PublishRoute {
  readonly #urls: readonly string[];
  #at = 0;
  // Where the last redirect led, tried first until it fails.
  #leader: string | null = null;
  readonly #answers = new Map<string, string>();
  // Whether a node answered in the last pass that it waits for a leader (503, a redirect).
  waiting = false;

  constructor(urls: readonly string[]) {
    this.#urls = urls;
  }

  /** The URL tried first. */
  get current(): string {
    return this.#leader ?? this.#urls[this.#at];
  }

  /** One pass: the node tried first, then the others in the order given. */
  order(): string[] {
    const out = this.#leader === null ? [] : [this.#leader];
    for (let i = 0; i < this.#urls.length; i++) {
      const u = this.#urls[(this.#at + i) % this.#urls.length];
      if (!out.includes(u)) out.push(u);
    }
    this.waiting = false;
    return out;
  }

  /** `url` answered `what` (and did not take the publish). */
  answered(url: string, what: string): void {
    this.#answers.delete(url);
    this.#answers.set(url, what);
    if (url === this.#leader) this.#leader = null;
  }

  /** `url` took the publish: it is tried first from now on. */
  took(url: string): void {
    this.#answers.delete(url);
    const i = this.#urls.indexOf(url);
    if (i === -1) this.#leader = url;
    else {
      this.#at = i;
      this.#leader = null;
    }
  }

  /** What each node answered last: `cannot connect to URL: what; to URL: what`. */
  summary(): string {
    const parts = [...this.#answers].map(([u, what]) => `${u}: ${what}`);
    return `cannot connect to ${parts.join("; to ")}`;
  }
}
