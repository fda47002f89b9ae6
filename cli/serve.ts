// `cli.ts serve`: not built yet (being written).
/** Runs `serve` with its arguments; resolves with the exit code. */
export function cmdServe(_args: string[]): Promise<number> {
  console.error("streamcast: serve is not built yet");
  return Promise.resolve(1);
}
