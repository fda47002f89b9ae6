// A real `cli.ts serve` with stream "t" opened for publishing, restartable on
// the same port and root (for the kill tests), and a reader of the whole log.
import { freePort, tempDir } from "./util.ts";
import { type ServeProc, startServe } from "./serve.ts";
import { TestSub } from "./subscriber.ts";
import { SCHEMA } from "./publish_in_process.ts";

export interface PublishServer {
  root: string;
  port: number;
  http: string;
  ws: string;
  proc: ServeProc;
  /** SIGKILLs the server (if it runs) and starts it again on the same port and root. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startPublishServer(
  extra: string[] = [],
  stdin = false,
  /** More arguments, made once the temporary root exists (e.g. other streams' schema files). */
  more: (root: string) => Promise<string[]> = () => Promise.resolve([]),
): Promise<PublishServer> {
  const root = await tempDir();
  extra = [...extra, ...await more(root)];
  const schema = `${root}/t.schema.json`;
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  const port = freePort();
  const args = [
    "--stream",
    `t=${schema}`,
    "--root",
    `${root}/data`,
    "--publish",
    "t",
    "--port",
    String(port),
    "--log-level",
    "warn",
    ...extra,
  ];
  const s: PublishServer = {
    root,
    port,
    http: `http://127.0.0.1:${port}`,
    ws: `ws://127.0.0.1:${port}`,
    proc: await startServe(args, { stdin }),
    async restart() {
      await s.proc.stop();
      s.proc = await startServe(
        args.filter((a, i) => a !== "--stdin" && args[i - 1] !== "--stdin"),
        {},
      );
    },
    async stop() {
      await s.proc.stop();
      await Deno.remove(root, { recursive: true }).catch(() => {});
    },
  };
  return s;
}

/** Every row of stream t from offset 1: [offset, raw line] pairs, as a subscriber receives them. */
export async function readAll(
  ws: string,
  expect: number,
): Promise<{ offset: number; line: string }[]> {
  const sub = await TestSub.open(`${ws}/t?offset=0&frames=batch`);
  try {
    await sub.waitLines(expect, 30_000);
    return sub.lines.map((line) => ({ offset: JSON.parse(line)[0], line }));
  } finally {
    await sub.close();
  }
}

/** The stream's end offset, from /head. */
export async function endOffset(http: string): Promise<number> {
  const res = await fetch(`${http}/t/head`);
  const head = await res.json();
  return head.end_offset;
}
