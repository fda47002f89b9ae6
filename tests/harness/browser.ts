// Headless Chromium for the browser tests: Debian's /usr/bin/chromium driven
// by playwright-core, with a fresh profile. A browser is never downloaded; if
// Chromium cannot start, the test fails (it does not skip).
import { type BrowserContext, chromium } from "playwright-core";
import { CHROMIUM } from "./chromium_path.ts";

export { CHROMIUM };

const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A running browser and how to close it (the profile folder included). */
export interface Browser {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/** Starts Chromium with a fresh `--user-data-dir`, within `timeoutMs`. */
export async function launchChromium(
  options: { viewport?: { width: number; height: number }; timeoutMs?: number } = {},
): Promise<Browser> {
  try {
    await Deno.stat(CHROMIUM);
  } catch {
    throw new Error(
      `${CHROMIUM} is missing: the browser tests need Debian's chromium (apt-get install chromium)`,
    );
  }
  const profile = await Deno.makeTempDir({ prefix: "streamcast-chromium-" });
  let context: BrowserContext;
  try {
    // playwright wants the profile here rather than as --user-data-dir.
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      viewport: options.viewport ?? { width: 1280, height: 900 },
      timeout: options.timeoutMs ?? 30_000,
      offline: false,
    });
  } catch (err) {
    await Deno.remove(profile, { recursive: true }).catch(() => {});
    throw new Error(`Chromium did not start: ${(err as Error).message}`);
  }
  return {
    context,
    async close() {
      await context.close().catch(() => {});
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    },
  };
}
