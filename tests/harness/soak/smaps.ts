// Where a process's anonymous memory is, from /proc/PID/smaps: glibc's main
// malloc heap (the `[heap]` mapping), its other arenas (each thread that
// mallocs may get one: a 64 MiB-aligned reservation, the used part
// read-write and the rest `---p`, 64 MiB in all), and the rest of the
// anonymous mappings (V8's heap pages, WebAssembly memories, large mallocs
// mapped on their own, thread stacks). RSS and the JavaScript heap figures
// cannot tell these apart; a soak that sees RSS grow needs to.

/** Resident MiB of one process by kind of anonymous mapping. */
export interface SmapsSummary {
  /** The main malloc arena (`[heap]`). */
  heap: number;
  /** glibc's other malloc arenas, all of them. */
  arenas: number;
  /** How many other arenas there are. */
  arenaCount: number;
  /** Every other anonymous mapping. */
  otherAnon: number;
}

const ARENA = 64 * 1024 * 1024;

interface Mapping {
  start: number;
  end: number;
  perms: string;
  path: string;
  rssKiB: number;
}

/** The mappings of an smaps text, in address order. */
export function parseSmaps(text: string): Mapping[] {
  const out: Mapping[] = [];
  for (const line of text.split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      out.push({
        start: parseInt(head[1], 16),
        end: parseInt(head[2], 16),
        perms: head[3],
        path: head[4].trim(),
        rssKiB: 0,
      });
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && out.length > 0) out[out.length - 1].rssKiB = Number(rss[1]);
  }
  return out;
}

/** Sums an smaps text by kind (see {@linkcode SmapsSummary}). */
export function summarizeSmaps(text: string): SmapsSummary {
  const maps = parseSmaps(text);
  const s: SmapsSummary = { heap: 0, arenas: 0, arenaCount: 0, otherAnon: 0 };
  for (let i = 0; i < maps.length; i++) {
    const m = maps[i];
    const mib = m.rssKiB / 1024;
    if (m.path === "[heap]") {
      s.heap += mib;
      continue;
    }
    if (m.path !== "" && !m.path.startsWith("[anon:")) continue; // files, the stack, vdso
    const next = maps[i + 1];
    const whole = m.start % ARENA === 0 && m.perms === "rw-p" && (
      m.end - m.start === ARENA ||
      (next !== undefined && next.path === "" && next.perms === "---p" && next.start === m.end &&
        next.end - m.start === ARENA)
    );
    if (whole) {
      s.arenas += mib;
      s.arenaCount++;
    } else s.otherAnon += mib;
  }
  return s;
}

/** The summary of process `pid` now (null once it is gone). */
export function smapsOf(pid: number): SmapsSummary | null {
  try {
    return summarizeSmaps(Deno.readTextFileSync(`/proc/${pid}/smaps`));
  } catch {
    return null;
  }
}
