// An HTTP publisher's one frame, the way a client that wants exactly-once
// sends it: `POST /{name}` with `Streamcast-Producer` and `Streamcast-Seq`,
// and the same body with the same seq again until the server answers — a
// refused connection, a response cut off and a 503 are retried. Used by the
// kill loop (publish) and the mirrors' soak.
import { sleep } from "./workload.ts";

/** The server's answer to a frame. */
export interface PostAnswer {
  first: number;
  last: number;
  count: number;
  duplicate: boolean;
}

/** How {@linkcode postFrame} retries. */
export interface PostFrameOptions {
  /** Attempts at the most (then it throws). @default Infinity */
  attempts?: number;
  /** Wait between attempts, ms. @default 30 */
  retryMs?: number;
  /** Each request's timeout, ms. @default 10000 */
  timeoutMs?: number;
  /** Checked before each attempt: true gives up (null). */
  stopped?: () => boolean;
  /** Told of each retry and why. */
  onRetry?: (why: string) => void;
}

/**
 * POSTs `rows` (as NDJSON) to `url` as frame `seq` of `producer` until
 * answered; resolves with the answer, or null once `stopped()`. Throws on
 * any other status, or an answer that does not hold exactly the frame's rows.
 */
export async function postFrame(
  url: string,
  producer: string,
  seq: number,
  rows: readonly unknown[],
  o: PostFrameOptions = {},
): Promise<PostAnswer | null> {
  const body = rows.map((r) => JSON.stringify(r)).join("\n") + "\n";
  const attempts = o.attempts ?? Infinity;
  for (let attempt = 1;; attempt++) {
    if (o.stopped?.()) return null;
    if (attempt > attempts) {
      throw new Error(`${producer} seq ${seq}: no answer in ${attempts} attempts`);
    }
    let status: number;
    let text: string;
    try {
      const res = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/x-ndjson",
          "streamcast-producer": producer,
          "streamcast-seq": String(seq),
        },
        body,
        signal: AbortSignal.timeout(o.timeoutMs ?? 10_000),
      });
      status = res.status;
      text = await res.text();
    } catch (err) {
      // The server is gone, or the answer was cut: the same seq again.
      o.onRetry?.((err as Error).message);
      await sleep(o.retryMs ?? 30);
      continue;
    }
    if (status === 503) {
      o.onRetry?.("503");
      await sleep(o.retryMs ?? 30);
      continue;
    }
    if (status !== 200) throw new Error(`${producer} seq ${seq}: ${status} ${text}`);
    const a = JSON.parse(text) as Omit<PostAnswer, "duplicate"> & { duplicate?: boolean };
    if (a.count !== rows.length || a.last - a.first + 1 !== rows.length) {
      throw new Error(`${producer} seq ${seq}: answer ${text} for ${rows.length} rows`);
    }
    return { first: a.first, last: a.last, count: a.count, duplicate: a.duplicate === true };
  }
}
