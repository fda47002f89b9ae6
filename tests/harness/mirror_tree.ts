// Real server processes for the mirror tests: a primary fed on stdin, and
// mirrors (of it, or of each other), each a `cli.ts serve` child on a free
// port of 127.0.0.1, stopped by PID.
import { join } from "node:path";
import { freePort, until } from "./util.ts";
import { getJson, type ServeProc, startServe } from "./serve.ts";
import { TestSub } from "./subscriber.ts";

export const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, sym: { type: "string" }, px: { type: "number" } },
  required: ["i", "sym", "px"],
};

/** NDJSON rows `from..to` (inclusive). */
export function rows(from: number, to: number): string {
  let out = "";
  for (let i = from; i <= to; i++) {
    out += JSON.stringify({ i, sym: i % 3 === 0 ? "ETH" : "BTC", px: i + 0.5 }) + "\n";
  }
  return out;
}

/** Starts a primary with stream `trades` fed from stdin (rows sealed into chunks within ~0.3 s). */
export async function startPrimary(
  root: string,
  port = freePort(),
  extra: string[] = [],
): Promise<ServeProc> {
  const schema = join(root, "..", `schema-${port}.json`);
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  return await startServe([
    "--root",
    root,
    "--port",
    String(port),
    "--stream",
    `trades=${schema}`,
    "--stdin",
    "trades",
    "--seal-every",
    "0.3",
    "--log-format",
    "json",
    ...extra,
  ], { stdin: true });
}

/** Starts a mirror of `of` (a `ws://HOST:PORT` base) for stream `trades`. */
export async function startMirror(
  root: string,
  of: string,
  port = freePort(),
  extra: string[] = [],
  env: Record<string, string> = {},
): Promise<ServeProc> {
  return await startServe([
    "--root",
    root,
    "--port",
    String(port),
    "--follow",
    `trades=${of}/trades`,
    "--follow-poll",
    "0.2",
    "--follow-retry-max",
    "0.5",
    "--seal-every",
    "0.3",
    "--log-format",
    "json",
    ...extra,
  ], { env });
}

export async function head(p: ServeProc): Promise<Record<string, unknown>> {
  return await getJson(`${p.url}/trades/head`);
}

/** Waits until `p`'s end offset is `end`. */
export async function untilEnd(p: ServeProc, end: number, ms = 30_000): Promise<void> {
  await until(
    async () => (await head(p).catch((): Record<string, unknown> => ({}))).end_offset === end,
    ms,
    `end ${end}`,
  );
}

/** Waits until `p`'s manifest covers through `through`. */
export async function untilChunked(p: ServeProc, through: number, ms = 30_000): Promise<void> {
  await until(
    async () =>
      ((await getJson(`${p.url}/trades/manifest`).catch((): Record<string, unknown> => ({})))
        .through ?? 0) as number >=
        through,
    ms,
    `chunks through ${through}`,
  );
}

/** Every data line from `offset` up to `end` (exclusive), over a batched subscription. */
export async function readAll(
  p: ServeProc,
  offset: number,
  end: number,
  query = "",
): Promise<string[]> {
  const sub = await TestSub.open(`${p.ws}/trades?offset=${offset}&frames=batch${query}`);
  try {
    await until(
      () =>
        sub.closed !== null ||
        (sub.lines.length > 0 && JSON.parse(sub.lines.at(-1)!)[0] >= end - 1),
      30_000,
      `rows up to ${end - 1} from ${p.url}`,
    );
    if (sub.closed) throw new Error(`closed: ${JSON.stringify(sub.closed)}`);
    return sub.lines;
  } finally {
    await sub.close();
  }
}

/** The chunk names a server lists. */
export async function chunkNames(p: ServeProc): Promise<string[]> {
  const m = await getJson(`${p.url}/trades/manifest`);
  return (m.chunks as { sha256: string }[]).map((c) => c.sha256);
}

/** Asserts `text` matches `re`, showing the text otherwise. */
export function assertMatch(text: string, re: RegExp): void {
  if (!re.test(text)) throw new Error(`expected ${re} to match:\n${text.slice(0, 2000)}`);
}
