/**
 * The URLs of a stream on several nodes (a cluster, or a primary and its
 * mirrors), as {@linkcode connect} and {@linkcode publisher} take them:
 * one URL, several in one string separated by commas, or an array of either.
 * Browser-safe.
 *
 * @module
 */

/**
 * One URL, a comma-separated list of URLs, or an array of either.
 */
export type NodeUrls = string | URL | readonly (string | URL)[];

// A comma that begins another URL (`,scheme://`): a comma inside one URL stays.
const SEPARATOR = /\s*,\s*(?=[A-Za-z][A-Za-z0-9+.-]*:\/\/)/;

/**
 * The URLs in `urls`, each checked to be a URL, in the order given, with
 * repeats dropped. Commas split a string only where the next URL begins
 * (`,ws://…`), so a comma inside a URL's path or query stays. Throws a
 * `TypeError` naming `who` and the piece that is not a URL, or saying that
 * none was given.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, throws } from "node:assert/strict";
 * import { nodeUrls } from "./node_urls.ts";
 * deepStrictEqual(nodeUrls("ws://a:1/t, ws://b:1/t"), ["ws://a:1/t", "ws://b:1/t"]);
 * deepStrictEqual(nodeUrls(["ws://a:1/t", new URL("ws://b:1/t"), "ws://a:1/t"]), [
 *   "ws://a:1/t",
 *   "ws://b:1/t",
 * ]);
 * deepStrictEqual(nodeUrls("ws://a:1/x,y"), ["ws://a:1/x,y"]);
 * throws(() => nodeUrls(["ws://a:1/t", "a.example"]), /connect: not a URL: "a.example"/);
 * throws(() => nodeUrls([], "publisher"), /publisher: no URL given/);
 * ```
 */
export function nodeUrls(urls: NodeUrls, who = "connect"): string[] {
  const pieces: string[] = [];
  const add = (u: string | URL): void => {
    if (u instanceof URL) pieces.push(u.toString());
    else if (typeof u === "string") pieces.push(...u.trim().split(SEPARATOR));
    else throw new TypeError(`${who}: a URL must be a string or URL, got ${typeof u}`);
  };
  if (Array.isArray(urls)) { for (const u of urls) add(u); }
  else add(urls as string | URL);
  const out: string[] = [];
  for (const p of pieces) {
    if (p === "") continue;
    let u: URL;
    try {
      u = new URL(p);
    } catch {
      throw new TypeError(`${who}: not a URL: ${JSON.stringify(p)}`);
    }
    const s = u.toString();
    if (!out.includes(s)) out.push(s);
  }
  if (out.length === 0) throw new TypeError(`${who}: no URL given`);
  return out;
}
