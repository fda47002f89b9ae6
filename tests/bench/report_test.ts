// bench/harness/report.ts renders each row's `note`: a marker on the row's case and
// the note as a footnote under the table — for a section made here, and for
// a real bench section (bench/micro/nested.ts, quick) that sets notes.
import { assert, assertEquals } from "../harness/assert.ts";
import { type BenchRow, renderSection } from "../../bench/harness/report.ts";
import { run as nested } from "../../bench/micro/nested.ts";

const row = (c: string, note?: string): BenchRow => ({
  case: c,
  ours: 2000,
  baseline: 1000,
  unit: "rows/s",
  ratio: 2,
  target: "",
  met: null,
  ...(note === undefined ? {} : { note }),
});

Deno.test("bench report renders a row's note as a footnote marked on its case", () => {
  const md = renderSection({
    title: "T",
    baseline: "B",
    rows: [row("a", "first note"), row("b"), row("c", "third | note")],
    notes: ["after"],
  });
  const lines = md.split("\n");
  assert(lines.some((l) => l.startsWith("| a [1] | 2000 rows/s |")), md);
  assert(lines.some((l) => l.startsWith("| b | 2000 rows/s |")), md);
  assert(lines.some((l) => l.startsWith("| c [2] |")), md);
  const tableEnd = lines.findLastIndex((l) => l.startsWith("|"));
  assertEquals(lines.slice(tableEnd + 1, tableEnd + 4), [
    "",
    "- [1] first note",
    "- [2] third | note",
  ]);
  assert(md.indexOf("- [2] third | note") < md.indexOf("after"), "footnotes come before the notes");
  // No note, no footnote.
  const plain = renderSection({ title: "T", baseline: "B", rows: [row("a")] });
  assert(!plain.includes("[1]"), plain);
});

Deno.test("bench report prints the notes of a real bench section (nested, quick)", async () => {
  const section = await nested(true);
  const noted = section.rows.filter((r) => r.note);
  assert(noted.length > 0, "bench/micro/nested.ts sets notes on its rows");
  const md = renderSection(section);
  noted.forEach((r, i) => {
    assert(md.includes(`| ${r.case} [${i + 1}] |`), md);
    assert(md.includes(`- [${i + 1}] ${r.note}`), md);
  });
});
