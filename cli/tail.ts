// `cli.ts tail` and `cli.ts head`: not built yet (being written).
/** Runs `tail`; resolves with the exit code. */
export function cmdTail(_args: string[]): Promise<number> {
  console.error("streamcast: tail is not built yet");
  return Promise.resolve(1);
}
/** Runs `head`; resolves with the exit code. */
export function cmdHead(_args: string[]): Promise<number> {
  console.error("streamcast: head is not built yet");
  return Promise.resolve(1);
}
