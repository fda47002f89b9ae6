// A consumer process for the cursor crash test: subscribes with a file cursor
// and prints each offset it handles, one per line; at offset UNTIL it commits
// and exits 0.
//
// usage: deno run -A tests/client/_consumer.ts URL CURSOR_FILE UNTIL SAVE_EVERY_ROWS
import { connect } from "../../client/connect.ts";
import { FileCursor } from "../../client/file_cursor.ts";

const [url, path, until, saveEveryRows] = Deno.args;
const sub = await connect(url, {
  offset: 1, // used only on the first run; the cursor wins afterwards
  cursor: new FileCursor(path),
  saveEveryRows: Number(saveEveryRows),
  saveEveryMs: 200,
});
const utf8 = new TextEncoder();
for await (const [offset] of sub) {
  // Handling a row = printing it (synchronously, so a kill cannot reorder it).
  Deno.stdout.writeSync(utf8.encode(`${offset}\n`));
  if (offset! >= Number(until)) {
    await sub.commit();
    break;
  }
}
