// TLS: serve --tls-cert/--tls-key answers https:// and wss:// with a
// certificate made here by openssl; clients trust it through an HttpClient
// with caCerts (in process) or `deno run --cert` (a child).
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { connect } from "../../../mod.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { CLI, makeCert, row, SCHEMA, serveCli, serveCliExit } from "../../harness/security.ts";

const TOKEN = "tls-reader-0123456789abcdef0123";

Deno.test("tls serves https and wss with --tls-cert/--tls-key, tokens included", async () => {
  const dir = await tempDir("streamcast-tls-");
  try {
    const { cert, key } = await makeCert(dir);
    const pem = await Deno.readTextFile(cert);
    const schema = join(dir, "schema.json");
    await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
    const tokens = join(dir, "tokens.json");
    await Deno.writeTextFile(
      tokens,
      JSON.stringify({ tokens: [{ name: "reader", token: TOKEN, streams: ["trades"] }] }),
    );
    const s = await serveCli(
      [
        ...["--root", join(dir, "data"), "--port", "0", "--stream", `trades=${schema}`],
        ...["--stdin", "trades", "--tls-cert", cert, "--tls-key", key, "--tokens", tokens],
      ],
      { stdin: true },
    );
    const client = Deno.createHttpClient({ caCerts: [pem] });
    try {
      assert(s.url.startsWith("https://127.0.0.1:"), s.url);
      assert(/^listening on https:\/\/127\.0\.0\.1:\d+$/m.test(s.stderr()), s.stderr());
      await s.write([1, 2, 3].map((i) => JSON.stringify(row(i)) + "\n").join(""));
      await s.closeStdin();
      await s.waitStderr(/end of stdin/);
      // HTTPS, trusting the certificate.
      const head = await fetch(`${s.url}/trades/head`, {
        client,
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assertEquals(head.status, 200);
      assertEquals((await head.json()).end_offset, 4);
      // Plain http on the TLS port is not served.
      const plain = await fetch(s.url.replace("https", "http") + "/_/health").then(
        async (r) => {
          await r.body?.cancel();
          return r.status;
        },
        () => "refused",
      );
      assert(plain !== 200, `plain http answered ${plain}`);
      // An untrusted client fails the handshake; the server keeps serving.
      const untrusted = await fetch(`${s.url}/_/health`).then(
        () => "answered",
        (err) => String(err),
      );
      assert(untrusted !== "answered", "a client that does not trust the certificate got through");
      // wss with the client library and a token: a WebSocket that trusts the certificate.
      class TrustingWebSocket extends WebSocket {
        constructor(url: string | URL, protocols?: string | string[]) {
          super(url, { protocols, client } as unknown as string[]);
        }
      }
      const sub = await connect<{ seq: number }>(`${s.url.replace("https", "wss")}/trades`, {
        offset: 1,
        token: TOKEN,
        WebSocket: TrustingWebSocket,
      });
      const seen: number[] = [];
      for await (const [offset, msg] of sub) {
        seen.push(msg.seq);
        if (offset === 3) break;
      }
      assertEquals(seen, [1, 2, 3]);
      assertEquals(await s.interrupt(), 0);
    } finally {
      client.close();
      await s.stop();
    }
  } finally {
    await rmrf(dir);
  }
});

Deno.test("tls: a stock deno client trusting the certificate with --cert tails over wss", async () => {
  const dir = await tempDir("streamcast-tls-");
  try {
    const { cert, key } = await makeCert(dir);
    const schema = join(dir, "schema.json");
    await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
    const s = await serveCli(
      [
        ...["--root", join(dir, "data"), "--port", "0", "--stream", `trades=${schema}`],
        ...["--stdin", "trades", "--tls-cert", cert, "--tls-key", key],
      ],
      { stdin: true },
    );
    try {
      await s.write([1, 2].map((i) => JSON.stringify(row(i)) + "\n").join(""));
      await s.waitStderr(/subscribe|end of stdin|listening/);
      const wss = `${s.url.replace("https", "wss")}/trades`;
      const tail = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "--cert", cert, CLI, "tail", wss, "--offset", "1"],
        stdout: "piped",
        stderr: "piped",
        env: { NO_COLOR: "1" },
      }).spawn();
      let out = "";
      const reading = (async () => {
        for await (const c of tail.stdout) out += new TextDecoder().decode(c);
      })();
      const errText = new Response(tail.stderr).text();
      try {
        await until(() => out.split("\n").length > 2, 20_000, "two rows from tail over wss");
      } finally {
        tail.kill("SIGKILL");
        await tail.status;
        await reading;
        await errText;
      }
      const lines = out.trim().split("\n").map((l) => JSON.parse(l));
      assertEquals(lines.slice(0, 2), [[1, row(1)], [2, row(2)]]);
    } finally {
      await s.stop();
    }
  } finally {
    await rmrf(dir);
  }
});

Deno.test("tls refuses a start with one plain line: a missing key, a key that is not PEM", async () => {
  const dir = await tempDir("streamcast-tls-");
  try {
    const { cert, key } = await makeCert(dir);
    const schema = join(dir, "schema.json");
    await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
    const junk = join(dir, "junk.pem");
    await Deno.writeTextFile(junk, "not a key\n");
    const base = ["--root", join(dir, "data"), "--port", "0", "--stream", `trades=${schema}`];
    const cases: [string[], RegExp][] = [
      [[...base, "--tls-cert", cert], /--tls-cert and --tls-key go together/],
      [[...base, "--tls-cert", cert, "--tls-key", join(dir, "nope.pem")], /cannot read --tls-key/],
      [[...base, "--tls-cert", cert, "--tls-key", junk], /--tls-key .*junk\.pem/],
      [[...base, "--tls-cert", key, "--tls-key", key], /--tls-cert .*key\.pem/],
    ];
    for (const [args, want] of cases) {
      const { code, stderr } = await serveCliExit(args);
      assertEquals(code, 2, stderr);
      const lines = stderr.trimEnd().split("\n");
      assertEquals(lines.length, 1, stderr);
      assert(lines[0].startsWith("streamcast serve: ") && want.test(lines[0]), stderr);
    }
  } finally {
    await rmrf(dir);
  }
});
