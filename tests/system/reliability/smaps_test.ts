// The smaps summary the soaks use to tell malloc's arenas from the rest of a
// process's anonymous memory: on a made-up smaps text with one of each
// kind, and on this process's own smaps.
import { assert, assertEquals } from "../../harness/assert.ts";
import { smapsOf, summarizeSmaps } from "../../harness/soak/smaps.ts";

// One mapping's lines: the head and its Rss (the other fields are skipped).
const map = (range: string, perms: string, path: string, rssKiB: number) =>
  `${range} ${perms} 00000000 00:00 0          ${path}\nSize: 4 kB\nRss:   ${rssKiB} kB\nPss: 1 kB\n`;

Deno.test("smaps: the main heap, the other arenas and the rest of the anonymous memory", () => {
  const text = [
    map("55d000000000-55d000100000", "r-xp", "/usr/bin/deno", 900), // the binary: not counted
    map("55d001000000-55d003000000", "rw-p", "[heap]", 20480),
    // An arena: 64 MiB-aligned, 16 MiB used, the rest reserved.
    map("7f0004000000-7f0005000000", "rw-p", "", 10240),
    map("7f0005000000-7f0008000000", "---p", "", 0),
    // A full arena, one mapping of 64 MiB.
    map("7f0008000000-7f000c000000", "rw-p", "", 65536),
    // Aligned but not 64 MiB in all with what follows: not an arena (V8's pages).
    map("7f0010000000-7f0010400000", "rw-p", "", 4096),
    map("7f0010400000-7f0010500000", "---p", "", 0),
    // Not aligned.
    map("7f0014001000-7f0014101000", "rw-p", "", 1024),
    map("7ffc00000000-7ffc00021000", "rw-p", "[stack]", 132), // the stack: not counted
  ].join("");
  assertEquals(summarizeSmaps(text), {
    heap: 20,
    arenas: 10 + 64,
    arenaCount: 2,
    otherAnon: 4 + 1,
  });
});

Deno.test("smaps: this process", () => {
  const s = smapsOf(Deno.pid);
  assert(s !== null);
  const status = Deno.readTextFileSync(`/proc/${Deno.pid}/status`);
  const anonMiB = Number(/RssAnon:\s+(\d+) kB/.exec(status)![1]) / 1024;
  const total = s.heap + s.arenas + s.otherAnon;
  // What the summary counts is anonymous memory: about RssAnon (read a moment apart).
  assert(total > 0.5 * anonMiB && total < 1.5 * anonMiB, `${total} MiB against RssAnon ${anonMiB}`);
  assert(s.arenaCount >= 1, "a process with threads that malloc has arenas besides the main heap");
  assertEquals(smapsOf(2 ** 22 + 1), null, "a process that does not exist");
});
