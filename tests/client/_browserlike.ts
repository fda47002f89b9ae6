// Runs the client with the runtime-specific globals removed (Deno, process,
// Buffer, setImmediate, …), as in a browser: connects to URL at offset 1, prints
// the first N rows as JSON lines, closes, and exits.
//
// usage: deno run -A tests/client/_browserlike.ts URL N
import { D } from "./_no_runtime.ts";
const [url, n] = D.args;
// Imported only now, so that nothing in it can have captured Deno.
const { connect } = await import("../../client/mod.ts");
const sub = await connect(url, { offset: 1 });
let count = 0;
for await (const [offset, msg] of sub) {
  console.log(JSON.stringify([offset, msg]));
  if (++count >= Number(n)) break;
}
D.exit(0);
