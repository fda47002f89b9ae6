// A server's JS heap after a full garbage collection, read through the V8
// inspector of a process started with `--inspect=127.0.0.1:0`: the process
// prints its inspector's WebSocket URL on stderr ("Debugger listening on
// ws://…"), and `heapAfterGc(url)` connects to it, asks for a collection
// (HeapProfiler.collectGarbage) and then for the heap's size
// (Runtime.getHeapUsage). It works on any Deno program, without a command
// channel of its own and without --expose-gc.

/** The inspector URL a process printed on stderr, or null. */
export function inspectorUrl(stderr: string): string | null {
  return /Debugger listening on (ws:\/\/\S+)/.exec(stderr)?.[1] ?? null;
}

/** The JS heap, bytes, after a full collection. */
export interface HeapAfterGc {
  /** Bytes in use. */
  used: number;
  /** Bytes the heap has reserved. */
  total: number;
}

/** Collects garbage in the inspected process and reads its heap. */
export async function heapAfterGc(url: string, timeoutMs = 60_000): Promise<HeapAfterGc> {
  const ws = new WebSocket(url);
  const pending = new Map<number, (v: Record<string, unknown>) => void>();
  let id = 0;
  ws.onmessage = (e) => {
    const m = JSON.parse(String(e.data));
    if (typeof m.id === "number") pending.get(m.id)?.(m);
  };
  const call = (method: string): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const n = ++id;
      const t = setTimeout(() => reject(new Error(`inspector: ${method} timed out`)), timeoutMs);
      pending.set(n, (m) => {
        clearTimeout(t);
        if (m.error) reject(new Error(`inspector: ${method}: ${JSON.stringify(m.error)}`));
        else resolve((m.result ?? {}) as Record<string, unknown>);
      });
      ws.send(JSON.stringify({ id: n, method }));
    });
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error(`inspector: cannot connect to ${url}`));
  });
  try {
    // Twice: a collection frees what finalizers of the first let go.
    await call("HeapProfiler.collectGarbage");
    await call("HeapProfiler.collectGarbage");
    const h = await call("Runtime.getHeapUsage");
    return { used: Number(h.usedSize), total: Number(h.totalSize) };
  } finally {
    ws.close();
  }
}
