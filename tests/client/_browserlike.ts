// Runs the client with the runtime-specific globals removed (Deno, process,
// Buffer, setImmediate, …), as in a browser: connects to URL at offset 1, prints
// the first N rows as JSON lines, closes, and exits.
//
// usage: deno run -A tests/client/_browserlike.ts URL N
const D = Deno;
const [url, n] = D.args;
const g = globalThis as Record<string, unknown>;
for (
  const name of ["Deno", "process", "Buffer", "global", "setImmediate", "clearImmediate", "require"]
) {
  delete g[name];
}
if (typeof g.Deno !== "undefined" || typeof g.process !== "undefined") {
  throw new Error("could not remove the runtime globals");
}
// Imported only now, so that nothing in it can have captured Deno.
const { connect } = await import("../../client/mod.ts");
const sub = await connect(url, { offset: 1 });
let count = 0;
for await (const [offset, msg] of sub) {
  console.log(JSON.stringify([offset, msg]));
  if (++count >= Number(n)) break;
}
D.exit(0);
