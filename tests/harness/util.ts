// Helpers shared by the test suites (not part of the package).

/** A seeded PRNG (mulberry32): the same seed gives the same sequence. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A fresh temporary folder; the caller removes it (`rmrf`, in a `finally`). */
export async function tempDir(prefix = "streamcast-test-"): Promise<string> {
  return await Deno.makeTempDir({ prefix });
}

/** Removes a dir, ignoring its absence. */
export async function rmrf(path: string): Promise<void> {
  await Deno.remove(path, { recursive: true }).catch(() => {});
}

/**
 * How long a port handed out by {@link freePort} stays claimed: longer than a
 * whole test run, so no two tests in one run (or in two runs at once) are
 * given the same port while one of them holds it or will bind it again.
 */
const PORT_CLAIM_MS = 60 * 60_000;

/** The kernel's range for outgoing connections' local ports (Linux). */
function ephemeralLow(): number {
  try {
    const low = Number(
      Deno.readTextFileSync("/proc/sys/net/ipv4/ip_local_port_range").split(/\s+/)[0],
    );
    return Number.isInteger(low) && low > 2048 ? low : 32768;
  } catch {
    return 32768;
  }
}

/** Claims `port` for this caller across every test process: false if another holds it. */
function claimPort(dir: string, port: number): boolean {
  const file = `${dir}/${port}`;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      Deno.openSync(file, { write: true, createNew: true }).close();
      return true;
    } catch (err) {
      if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
      const age = Date.now() - (Deno.statSync(file).mtime?.getTime() ?? 0);
      if (age < PORT_CLAIM_MS) return false;
      Deno.removeSync(file);
    }
  }
  return false;
}

/**
 * A free TCP port on 127.0.0.1 for a server a test starts later (often in a
 * child process, often more than once). A port the kernel picks for
 * `port: 0` comes from the range it also gives outgoing connections, so by
 * the time the server binds it a connection (to etcd, to S3) may hold it;
 * ports here come from below that range, each claimed by a file under the
 * temp dir so that parallel tests never get the same one.
 */
export function freePort(): number {
  const dir = `${Deno.env.get("TMPDIR") ?? "/tmp"}/streamcast-test-ports`;
  Deno.mkdirSync(dir, { recursive: true });
  const low = 20_000;
  const span = Math.max(1000, ephemeralLow() - low);
  for (let tries = 0; tries < 200; tries++) {
    const port = low + Math.floor(Math.random() * span);
    if (!claimPort(dir, port)) continue;
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch {
      // Held by a process outside the tests: keep the claim, try another.
    }
  }
  throw new Error(`freePort: no free port claimed in ${dir} after 200 tries`);
}

/** UTF-8 bytes of a string. */
export const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
/** A string of UTF-8 bytes. */
export const text = (b: Uint8Array): string => new TextDecoder().decode(b);

/**
 * Waits until `check()` is true, polling every 100 ms, for as long as
 * `progress()` keeps changing: throws once it has stayed the same for
 * `stallMs`. For work whose length depends on the machine's load (a slow
 * machine gets the time it needs; a stuck process is still reported).
 */
export async function untilProgressing(
  check: () => boolean | Promise<boolean>,
  progress: () => unknown | Promise<unknown>,
  stallMs = 20_000,
  what = "condition",
): Promise<void> {
  let last = JSON.stringify(await progress());
  let since = Date.now();
  while (!(await check())) {
    const now = JSON.stringify(await progress());
    if (now !== last) [last, since] = [now, Date.now()];
    else if (Date.now() - since > stallMs) {
      throw new Error(`no progress for ${stallMs} ms waiting for ${what} (at ${last})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until `check()` is true, polling; throws after `ms`. */
export async function until(
  check: () => boolean | Promise<boolean>,
  ms = 10_000,
  what = "condition",
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
