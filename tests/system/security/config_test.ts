// The security and limit settings from a config file: relative paths resolve
// against the file's folder, and flags win.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { jsonLines, rawRequest, SCHEMA, serveCli, serveCliExit } from "../../harness/security.ts";

const TOKEN = "config-reader-0123456789abcdef01";

Deno.test("config: tokens, limits and log settings from the file; flags win", async () => {
  const dir = await tempDir("streamcast-config-");
  const conf = join(dir, "conf");
  const elsewhere = join(dir, "elsewhere");
  await Deno.mkdir(join(conf, "secrets"), { recursive: true });
  await Deno.mkdir(elsewhere);
  await Deno.writeTextFile(join(conf, "schema.json"), JSON.stringify(SCHEMA));
  await Deno.writeTextFile(
    join(conf, "secrets", "tokens.json"),
    JSON.stringify({ tokens: [{ name: "reader", token: TOKEN, streams: ["trades"] }] }),
  );
  const config = join(conf, "streamcast.json");
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      root: "data",
      port: 0,
      streams: { trades: { schema: "schema.json" } },
      tokens: "secrets/tokens.json",
      maxSubscribers: 1,
      maxUrlBytes: 200,
      maxConnections: 50,
      maxReplayReaders: 4,
      maxRowBytes: 4096,
      stallTimeout: 10,
      logLevel: "error",
      logFormat: "text",
    }),
  );
  try {
    const s = await serveCli(["--config", config, "--log-format", "json", "--log-level", "info"]);
    try {
      const head = await fetch(`${s.url}/trades/head`);
      await head.body?.cancel();
      assertEquals(head.status, 401);
      const ok = await fetch(`${s.url}/trades/head`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assertEquals(ok.status, 200);
      await ok.body?.cancel();
      const ws = s.url.replace("http", "ws");
      const first = await TestSub.open(`${ws}/trades?access_token=${TOKEN}`);
      assert(first.greeting !== null);
      const second = await TestSub.open(`${ws}/trades?access_token=${TOKEN}`);
      assertEquals((await second.done).code, 1013);
      assertEquals((await rawRequest(s.port, `/_/health?${"x".repeat(300)}`)).status, 414);
      await first.close();
      assertEquals(await s.interrupt(), 0);
      // The flags' json/info won over the file's text/error.
      const events = jsonLines(s.stderr());
      assert(events.some((e) => e.event === "subscribe" && e.token_name === "reader"), s.stderr());
      assert(events.some((e) => e.event === "refused" && e.limit === "max_subscribers"));
      assert(!s.stderr().includes(TOKEN));
    } finally {
      await s.stop();
    }
    // Typos and bad values in the file: one line, exit 2.
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ maxSubscriber: 1 }, /unknown key "maxSubscriber"/],
      [{ maxConnections: 0 }, /"maxConnections" must be an integer >= 1/],
      [{ logLevel: "loud" }, /"logLevel" must be error, warn, info or debug/],
      [{ tlsCert: "c.pem" }, /--tls-cert and --tls-key go together/],
      [{ tokens: "missing.json" }, /cannot read tokens file .*missing\.json/],
    ];
    for (const [extra, want] of cases) {
      const bad = join(conf, "bad.json");
      await Deno.writeTextFile(
        bad,
        JSON.stringify({ port: 0, streams: { trades: { schema: "schema.json" } }, ...extra }),
      );
      const { code, stderr } = await serveCliExit(["--config", bad, "--root", join(dir, "x")]);
      assertEquals(code, 2, stderr);
      assertEquals(stderr.trimEnd().split("\n").length, 1, stderr);
      assert(want.test(stderr), `${want}: ${stderr}`);
    }
  } finally {
    await rmrf(dir);
  }
});
