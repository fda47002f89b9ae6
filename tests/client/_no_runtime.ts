// Removes the runtime-specific globals (Deno, process, Buffer, setImmediate, …)
// as soon as it is imported, so that what is imported after it runs as in a
// browser. `D` keeps the Deno namespace for the script itself (args, exit).
export const D: typeof Deno = Deno;
const g = globalThis as Record<string, unknown>;
for (
  const name of ["Deno", "process", "Buffer", "global", "setImmediate", "clearImmediate", "require"]
) {
  delete g[name];
}
if (typeof g.Deno !== "undefined" || typeof g.process !== "undefined") {
  throw new Error("could not remove the runtime globals");
}
