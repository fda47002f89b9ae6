// Command-line parsing shared by the commands of cli.ts.
import { parseArgs } from "node:util";

/** Thrown for a bad command line: printed as one line, exit code 2. */
export class UsageError extends Error {
  /** Makes the error. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** Most URLs `tail` and `publish` take (the stream's nodes). */
export const MAX_URLS = 64;

/** Parses `args` strictly against `options` (plus `--help`); at most `positionals` positionals. */
export function parse(
  args: string[],
  options: Record<string, { type: "string" | "boolean"; multiple?: boolean; short?: string }>,
  positionals: number,
): { values: Record<string, unknown>; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: { ...options, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    // node:util's messages can run to several lines; the first says what is wrong.
    throw new UsageError((err as Error).message.split("\n")[0].trim());
  }
  if (!parsed.values.help && parsed.positionals.length > positionals) {
    throw new UsageError(`unexpected argument ${parsed.positionals[positionals]}`);
  }
  return parsed as { values: Record<string, unknown>; positionals: string[] };
}

/** The bearer token from --token or STREAMCAST_TOKEN (never printed). */
export function tokenOf(values: Record<string, unknown>): string | undefined {
  if (typeof values.token === "string") return values.token;
  try {
    return Deno.env.get("STREAMCAST_TOKEN") || undefined;
  } catch {
    return undefined; // no env permission
  }
}

/**
 * The bearer token of `tail` and `publish`: `--token-command CMD` (run with
 * `sh -c` before each connect; its standard output, trimmed, is the token:
 * a short-lived signed token minted afresh each time), else `--token` or
 * STREAMCAST_TOKEN. Both flags at once is a usage error.
 */
export function tokenSourceOf(
  values: Record<string, unknown>,
): string | (() => Promise<string>) | undefined {
  const cmd = values["token-command"];
  if (typeof cmd !== "string") return tokenOf(values);
  if (typeof values.token === "string") {
    throw new UsageError("give --token or --token-command, not both");
  }
  if (cmd.trim() === "") throw new UsageError("--token-command must not be empty");
  return async () => {
    const out = await new Deno.Command("sh", {
      args: ["-c", cmd],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      const said = new TextDecoder().decode(out.stderr).trim().split("\n")[0].slice(0, 200);
      throw new Error(`--token-command exited with ${out.code}${said ? `: ${said}` : ""}`);
    }
    const token = new TextDecoder().decode(out.stdout).trim();
    if (token === "") throw new Error("--token-command printed no token");
    return token;
  };
}
