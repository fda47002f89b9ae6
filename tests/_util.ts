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

/** A fresh temp dir, removed by the returned disposer. */
export async function tempDir(prefix = "streamcast-test-"): Promise<string> {
  return await Deno.makeTempDir({ prefix });
}

/** Removes a dir, ignoring its absence. */
export async function rmrf(path: string): Promise<void> {
  await Deno.remove(path, { recursive: true }).catch(() => {});
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
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
