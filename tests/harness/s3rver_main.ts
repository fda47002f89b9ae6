// Runs a real S3 HTTP server (s3rver) on 127.0.0.1 for the archive tests.
// usage: deno run -A tests/harness/s3rver_main.ts DIR PORT
import S3rver from "s3rver";

const [dir, port] = Deno.args;
const server = new S3rver({
  address: "127.0.0.1",
  port: Number(port),
  directory: dir,
  silent: true,
  configureBuckets: [{ name: "archive", configs: [] }],
});
await server.run();
console.log("READY");
Deno.addSignalListener("SIGTERM", async () => {
  await server.close();
  Deno.exit(0);
});
