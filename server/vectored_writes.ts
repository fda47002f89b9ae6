/**
 * Turning on the runtime's vectored socket writes (`DENO_USE_WRITEV`), so
 * that a WebSocket does not keep a buffer the size of the biggest frame it
 * ever sent.
 *
 * Why: Deno's WebSocket (fastwebsockets) writes a frame either with one
 * vectored write of its header and payload, or — the default — by copying
 * both into the socket's own write buffer first. That buffer is cleared but
 * never shrunk, so after a flat-out fan-out of ~175–350 KB commits every one
 * of 1000 sockets holds that much for good: 350 MB that neither the send
 * buffer (`sendBufferBytes`) nor pacing bounds (bench/e2e/memory.ts: a server with
 * 1000 reading subscribers at 377 MiB RSS with 24 MiB of JavaScript heap and
 * 59 MiB handed to `send`). Vectored writes take the payload from the copy
 * `send` made, freed once written.
 *
 * The runtime reads the variable once, when the process makes its first
 * WebSocket or HTTP connection, so this must run before `Deno.serve` (serve()
 * calls it). An operator's own setting of `DENO_USE_WRITEV` (even empty,
 * which means off) wins.
 *
 * @module
 */

/**
 * Sets `DENO_USE_WRITEV=1` for this process unless it is set already. Does
 * nothing, and returns false, without the `env` permission for it already
 * granted (it never prompts) or when the variable is set; true once set.
 * Effective only before the process's first connection (see the module doc).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { useVectoredWrites } from "./vectored_writes.ts";
 * useVectoredWrites();
 * equal(useVectoredWrites(), false); // set by the first call (or not allowed): never twice
 * ```
 */
export function useVectoredWrites(): boolean {
  try {
    if (
      Deno.permissions.querySync({ name: "env", variable: "DENO_USE_WRITEV" }).state !== "granted"
    ) {
      return false;
    }
    if (Deno.env.get("DENO_USE_WRITEV") !== undefined) return false;
    Deno.env.set("DENO_USE_WRITEV", "1");
    return true;
  } catch {
    // No permission API here (a worker without env access): leave it.
    return false;
  }
}
