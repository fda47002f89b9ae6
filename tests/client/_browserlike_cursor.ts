// Cursors on the browser path (runtime globals removed, as in a browser): a
// path string is refused before any socket opens; a LocalStorageCursor (on an
// in-memory Storage) resumes where the last subscription stopped. Prints one
// JSON line: {refused, message, runs, item}.
//
// usage: deno run -A tests/client/_browserlike_cursor.ts URL
import { D } from "./_no_runtime.ts";
const [url] = D.args;
// Imported only now, so that nothing in it can have captured Deno.
const { connect, LocalStorageCursor } = await import("../../client/mod.ts");
let refused = "";
let message = "";
try {
  await connect(url, { cursor: ".trades.cursor" });
} catch (err) {
  refused = (err as Error).name;
  message = (err as Error).message;
}
const items = new Map<string, string>();
const storage = {
  getItem: (k: string) => items.get(k) ?? null,
  setItem: (k: string, v: string) => void items.set(k, v),
};
const runs: number[][] = [];
for (let run = 0; run < 2; run++) {
  const sub = await connect(url, {
    offset: 1,
    cursor: new LocalStorageCursor("trades.cursor", { storage }),
  });
  const seen: number[] = [];
  for await (const [offset] of sub) {
    seen.push(offset as number);
    if (seen.length === 3) break;
  }
  runs.push(seen);
}
console.log(
  JSON.stringify({ refused, message, runs, item: JSON.parse(items.get("trades.cursor")!) }),
);
D.exit(0);
