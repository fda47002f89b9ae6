// Stops the process's background thread (`common/background_thread.ts`) the
// way a bug in one of its services would: a service of the test's throws an
// error it does not catch, on the thread the chunk and Iceberg workers of
// this test module's logs run on. Every folder routed there hears the
// failure; the next user starts a new thread.
import { BackgroundService } from "../../common/background_thread.ts";

type Msg = { dir: string; failure?: string };

/** Stops the running background thread; resolves once its users were told. */
export async function stopBackgroundThread(): Promise<void> {
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(
      file,
      `export function serve() {
         return (m: { dir: string }) => { throw new Error("a service failed on " + m.dir); };
       }`,
    );
    const port = BackgroundService.acquire<Msg, Msg>(
      new URL(`file://${file}`),
      (dir, failure) => ({ dir, failure }),
    );
    const told = Promise.withResolvers<Msg>();
    port.register("/stop-background-thread", told.resolve);
    port.post({ dir: "/stop-background-thread" });
    await told.promise;
    // Its own users are told in the same turn; theirs run before this resumes.
    await new Promise((r) => setTimeout(r, 0));
    port.release();
  } finally {
    await Deno.remove(file);
  }
}
