// A real `cli.ts serve` process that checks signed tokens: an HS256 secret
// file, and PEM public keys for the asymmetric algorithms asked for, in a
// temporary folder that `stop` removes with the process. The suites that
// throw hostile tokens, admin bodies and filters at the server share it.
import { join } from "node:path";
import { rmrf, tempDir } from "./util.ts";
import { serveCli, type Served } from "./security.ts";
import { secretText, sign, type TestClaims, type TestKey, testKey } from "./jwt.ts";

/** A stream declared on the command line. */
export interface DeclaredStream {
  name: string;
  schema: Record<string, unknown>;
  /** Key columns (`--key NAME=COL,…`). */
  key?: string[];
  /** Open to network publishing (`--publish NAME`). */
  publish?: boolean;
}

/** What {@linkcode serveWithJwt} starts. */
export interface JwtServeOptions {
  /** Streams declared by flags. @default {[]} */
  streams?: DeclaredStream[];
  /** Public keys the server is given (`--jwt-keys`), one fresh key pair each. @default {[]} */
  keyAlgs?: TestKey["alg"][];
  /** `--jwt-issuer`, which `token` and `admin` then put in their claims. @default {undefined} */
  issuer?: string;
  /** More `serve` arguments (`--max-token-bytes 2048`). @default {[]} */
  args?: string[];
}

/** A `serve` that checks signed tokens, with what signs them. */
export interface JwtServe {
  readonly served: Served;
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** `ws://127.0.0.1:PORT`. */
  readonly ws: string;
  readonly port: number;
  /** The HS256 secret (the secret file's bytes less its newline). */
  readonly secret: Uint8Array;
  /** The key pairs whose public keys the server has, by algorithm. */
  readonly keys: ReadonlyMap<TestKey["alg"], TestKey>;
  /** Signs `claims` with the secret (with the server's issuer unless they name one). */
  token(claims: TestClaims): Promise<string>;
  /** A token granting everything: read and publish every stream, and admin. */
  admin(): Promise<string>;
  /** Stops the server and starts it again on the same folder (a new port). */
  restart(): Promise<void>;
  /** Stops the server (by its pid) and removes its folder. */
  stop(): Promise<void>;
}

/** Starts `serve` on a free port with a fresh secret and fresh keys (see the module doc). */
export async function serveWithJwt(options: JwtServeOptions = {}): Promise<JwtServe> {
  const dir = await tempDir("streamcast-jwt-");
  try {
    const text = secretText();
    const secretFile = join(dir, "secret");
    await Deno.writeTextFile(secretFile, text + "\n");
    const keys = new Map<TestKey["alg"], TestKey>();
    for (const alg of options.keyAlgs ?? []) keys.set(alg, await testKey(alg));
    const args = ["--root", join(dir, "data"), "--port", "0", "--jwt-secret-file", secretFile];
    if (keys.size > 0) {
      const pemFile = join(dir, "keys.pem");
      await Deno.writeTextFile(pemFile, [...keys.values()].map((k) => k.pem).join("\n"));
      args.push("--jwt-keys", pemFile);
    }
    for (const s of options.streams ?? []) {
      const file = join(dir, `${s.name}.schema.json`);
      await Deno.writeTextFile(file, JSON.stringify(s.schema));
      args.push("--stream", `${s.name}=${file}`);
      if (s.key) args.push("--key", `${s.name}=${s.key.join(",")}`);
      if (s.publish) args.push("--publish", s.name);
    }
    if (options.issuer !== undefined) args.push("--jwt-issuer", options.issuer);
    const all = [...args, ...(options.args ?? [])];
    let served = await serveCli(all);
    const secret = new TextEncoder().encode(text);
    const iss = options.issuer !== undefined ? { iss: options.issuer } : {};
    return {
      get served() {
        return served;
      },
      get url() {
        return served.url;
      },
      get ws() {
        return served.url.replace(/^http/, "ws");
      },
      get port() {
        return served.port;
      },
      secret,
      keys,
      token: (claims) => sign(secret, { ...iss, ...claims }),
      admin: () =>
        sign(secret, {
          ...iss,
          sub: "admin",
          streamcast: { read: ["*"], publish: ["*"], admin: true },
        }),
      restart: async () => {
        const code = await served.interrupt();
        if (code !== 0) throw new Error(`serve exited ${code} on SIGINT:\n${served.stderr()}`);
        await served.stop();
        served = await serveCli(all);
      },
      stop: async () => {
        await served.stop();
        await rmrf(dir);
      },
    };
  } catch (err) {
    await rmrf(dir);
    throw err;
  }
}
