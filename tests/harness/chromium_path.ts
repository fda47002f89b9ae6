// Where the browser tests find Chromium: Debian's package `chromium`, or the
// binary STREAMCAST_CHROMIUM names. Kept apart from browser.ts so that
// tests/harness/prepare.ts can read it without loading playwright-core.

/** The Chromium binary the browser tests drive. */
export const CHROMIUM: string = Deno.env.get("STREAMCAST_CHROMIUM") || "/usr/bin/chromium";
