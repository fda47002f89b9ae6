// `tail` and `publish` with `--token-command`: the command (here the minting
// example, run through sh) gives a fresh signed token before each connect, so
// a token that expires mid-stream only costs a reconnect. Real processes: a
// server, the publish and the tail.
import { join } from "node:path";
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { row, SCHEMA, serveCli } from "../harness/security.ts";
import { secretText } from "../harness/jwt.ts";

const CLI = new URL("../../cli.ts", import.meta.url).pathname;
const MINT = new URL("../../examples/mint_token.ts", import.meta.url).pathname;

Deno.test("tail and publish: --token-command mints a token before each connect; an expiry costs nothing", async () => {
  const dir = await tempDir();
  const secretFile = join(dir, "secret");
  await Deno.writeTextFile(secretFile, secretText() + "\n");
  await Deno.writeTextFile(join(dir, "schema.json"), JSON.stringify(SCHEMA));
  const s = await serveCli([
    ...[
      "--root",
      join(dir, "data"),
      "--port",
      "0",
      "--stream",
      `trades=${join(dir, "schema.json")}`,
    ],
    ...["--publish", "trades", "--jwt-secret-file", secretFile],
  ]);
  const ws = `${s.url.replace("http", "ws")}/trades`;
  const mint = (grant: string) =>
    `'${Deno.execPath()}' run -A '${MINT}' --secret-file '${secretFile}' --sub cli --ttl 2 ${grant}`;
  const tail = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "tail", ws, "--offset", "0", "--token-command", mint("--read trades")],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let stderr = "";
  const drained = (async () => {
    for await (const chunk of tail.stderr.pipeThrough(new TextDecoderStream())) stderr += chunk;
  })();
  const reader = tail.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    // Rows over about 4 s, each a publish process of its own: both outlive a 2 s token.
    const N = 8;
    for (let i = 1; i <= N; i++) {
      const pub = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          CLI,
          "publish",
          ws,
          "--producer",
          `feed-${i}`,
          "--token-command",
          mint("--publish trades"),
        ],
        stdin: "piped",
        stdout: "null",
        stderr: "piped",
      }).spawn();
      const w = pub.stdin.getWriter();
      await w.write(new TextEncoder().encode(JSON.stringify(row(i)) + "\n"));
      await w.close();
      const out = await pub.output();
      assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
      await new Promise((r) => setTimeout(r, 500));
    }
    let text = "";
    while (text.split("\n").length - 1 < N) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    const offsets = text.split("\n").slice(0, N).map((l) => JSON.parse(l)[0]);
    assertEquals(offsets, Array.from({ length: N }, (_, i) => i + 1));
  } finally {
    tail.kill("SIGINT");
    await reader.cancel().catch(() => {});
    await tail.status;
    await drained;
    await s.stop();
    await rmrf(dir);
  }
  // The tail's token expired at least once, and it reconnected on a fresh one.
  assert(/token expired \(4401\)[\s\S]*reconnecting/.test(stderr), `tail stderr: ${stderr}`);
});

Deno.test("tail: --token and --token-command together are a usage error", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "tail",
      "ws://127.0.0.1:1/t",
      "--token",
      "x".repeat(16),
      "--token-command",
      "true",
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  assertEquals(out.code, 2);
  assert(/--token or --token-command, not both/.test(new TextDecoder().decode(out.stderr)));
});
