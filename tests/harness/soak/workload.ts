// Shared pieces of the reliability tests: a workspace with a schema, the rows
// fed (reproducible from their sequence number), `cli.ts serve` as a child
// process, and what /proc says about that child (RSS, open descriptors).
import { join } from "node:path";
import { rmrf, tempDir } from "../util.ts";
import { CLI, type ServeProc, startServe } from "../serve.ts";

export { CLI };

/** The schema of the test stream: keys in this order on the wire. */
export const SCHEMA = {
  type: "object",
  properties: {
    seq: { type: "integer" },
    ts: { type: "number" },
    pad: { type: "string" },
  },
  required: ["seq", "ts", "pad"],
  additionalProperties: false,
};

/** The stream's name in every reliability test. */
export const NAME = "rel";

/** A row's JSON text as fed and as stored (keys in schema order). */
export function rowText(seq: number, ts = 0): string {
  const pad = "abcdefghij".repeat(1 + (seq * 7919) % 23).slice(0, (seq * 31) % 211);
  return JSON.stringify({ seq, ts, pad });
}

/** A temp dir holding `schema.json` and a `data` root. */
export interface Workspace {
  dir: string;
  root: string;
  schema: string;
  /** The stream's log folder. */
  logDir: string;
  rm(): Promise<void>;
}

/** Makes a workspace. */
export async function workspace(): Promise<Workspace> {
  const dir = await tempDir("streamcast-rel-");
  const schema = join(dir, "schema.json");
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  const root = join(dir, "data");
  return { dir, root, schema, logDir: join(root, NAME), rm: () => rmrf(dir) };
}

/** Starts `cli.ts serve` on a free port with the test stream and `extra` flags. */
export async function serveChild(
  w: Workspace,
  extra: string[] = [],
  stdin = true,
): Promise<ServeProc> {
  const args = ["--root", w.root, "--stream", `${NAME}=${w.schema}`, "--port", "0", ...extra];
  if (stdin) args.push("--stdin", NAME);
  return await startServe(args, { stdin });
}

/** The port of a served URL. */
export function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** Resident set size of process `pid` in MiB (VmRSS), or NaN once it is gone. */
export function rssMiB(pid: number): number {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    return Number(/VmRSS:\s+(\d+)\s*kB/.exec(status)?.[1] ?? NaN) / 1024;
  } catch {
    return NaN;
  }
}

/** Open file descriptors of process `pid` (sockets included), or NaN once it is gone. */
export function fdCount(pid: number): number {
  try {
    let n = 0;
    for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) n++;
    return n;
  } catch {
    return NaN;
  }
}

/** Runs `cli.ts verify DIR`; returns its exit code and output. */
export async function verifyCli(dir: string): Promise<{ code: number; out: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "verify", dir],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, out: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

/** The offset of a data line `[offset,msg]`. */
export function lineOffset(line: string): number {
  return Number(line.slice(1, line.indexOf(",")));
}

/** The message part of a data line `[offset,msg]`. */
export function lineMsg(line: string): string {
  return line.slice(line.indexOf(",") + 1, -1);
}

/** Quantile `q` (0..1) of `xs` (sorted in place). */
export function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  xs.sort((a, b) => a - b);
  return xs[Math.min(xs.length - 1, Math.floor(q * xs.length))];
}

/** Sleeps `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
