// Publish fuzz, the families tests/server/publish/fuzz_test.ts lacks (issue 22):
// encodings (BOMs, UTF-16, overlong and surrogate UTF-8, CRLF), sizes (empty,
// exactly the limit, one over, many tiny rows), shapes (rows that are not
// objects, an object body, nested values), seq sequences per producer
// (duplicates, gaps, going back, non-integers, "1e3", "01", huge) and
// producer names (empty, 128 and 129 characters, non-ASCII, spaces), over
// HTTP and WebSocket. Every valid row carries a unique tag; at the end the
// stream is read back from the start: exactly the acknowledged rows are
// there, once each, at the offsets their acknowledgement gave. Seeded
// (tests/harness/seeds.ts).
import { assert, assertEquals } from "../../harness/assert.ts";
import { caseName, caseRng, fuzzCases, replayHint, seedBanner } from "../../harness/seeds.ts";
import { endOffset, readAll, startPublishServer } from "../../harness/publish_child.ts";
import { until } from "../../harness/util.ts";

const SUITE = "publish_families";
const LIMIT = 65536;
const enc = new TextEncoder();

type Rng = () => number;
const int = (r: Rng, n: number) => Math.floor(r() * n);
const pick = <T>(r: Rng, xs: readonly T[]): T => xs[int(r, xs.length)];

let tagSeq = 0;
const tag = (c: string) => `${c}-${tagSeq++}`;
const row = (t: string, extra: Record<string, unknown> = {}) => ({ sym: t, px: 1.5, ...extra });

function utf16(text: string, le: boolean, bom: boolean): Uint8Array {
  const out: number[] = bom ? (le ? [0xff, 0xfe] : [0xfe, 0xff]) : [];
  for (let i = 0; i < text.length; i++) {
    const u = text.charCodeAt(i);
    if (le) out.push(u & 255, u >> 8);
    else out.push(u >> 8, u & 255);
  }
  return new Uint8Array(out);
}

/** One HTTP body: its bytes, content type and the tags of its rows (in order). */
interface Body {
  what: string;
  bytes: Uint8Array;
  type: string;
  tags: string[];
}

function body(r: Rng, id: string): Body {
  const n = 1 + int(r, 5);
  const tags = Array.from({ length: n }, () => tag(id));
  const nd = tags.map((t) => JSON.stringify(row(t))).join("\n");
  const kind = pick(
    r,
    [
      "utf8_bom",
      "utf16le",
      "utf16le_bom",
      "utf16be_bom",
      "overlong",
      "surrogate",
      "latin1",
      "crlf",
      "blank_lines",
      "empty",
      "at_limit",
      "over_limit",
      "many_tiny",
      "not_objects",
      "array_of_not_objects",
      "object_body",
      "nested",
      "plain",
    ] as const,
  );
  const b = (bytes: Uint8Array, type = "application/x-ndjson") => ({
    what: kind,
    bytes,
    type,
    tags,
  });
  switch (kind) {
    case "utf8_bom":
      return b(new Uint8Array([0xef, 0xbb, 0xbf, ...enc.encode(nd)]));
    case "utf16le":
      return b(utf16(nd, true, false));
    case "utf16le_bom":
      return b(utf16(nd, true, true));
    case "utf16be_bom":
      return b(utf16(nd, false, true), "application/json");
    case "overlong": // "/" as an overlong two-byte sequence inside a string
      return b(enc.encode(nd).map((x, i, a) => (i === a.indexOf(0x73) ? 0xc0 : x)));
    case "surrogate": {
      const at = enc.encode(nd).indexOf(0x2d); // the "-" of the first tag
      const bytes = [...enc.encode(nd)];
      bytes.splice(at, 1, 0xed, 0xa0, 0x80);
      return b(new Uint8Array(bytes));
    }
    case "latin1":
      return b(enc.encode(nd).map((x, i) => (i === 9 ? 0xe9 : x)));
    case "crlf":
      return b(enc.encode(nd.replaceAll("\n", "\r\n") + "\r\n"));
    case "blank_lines":
      return b(enc.encode("\n\n" + nd.replaceAll("\n", "\n\n") + "\n\n"));
    case "empty":
      return { what: kind, bytes: new Uint8Array(0), type: "application/x-ndjson", tags: [] };
    case "at_limit":
    case "over_limit": {
      // One row padded so that the body is exactly the limit (or one byte more).
      const t = tag(id);
      const base = JSON.stringify(row(t, { pad: "" }));
      const size = LIMIT + (kind === "over_limit" ? 1 : 0);
      const text = JSON.stringify(row(t, { pad: "x".repeat(size - base.length) }));
      return { what: kind, bytes: enc.encode(text), type: "application/x-ndjson", tags: [t] };
    }
    case "many_tiny": {
      const ts = Array.from({ length: 1500 + int(r, 500) }, () => tag(id));
      return {
        what: kind,
        bytes: enc.encode(ts.map((t) => JSON.stringify({ sym: t, px: 0 })).join("\n")),
        type: "application/x-ndjson",
        tags: ts,
      };
    }
    case "not_objects": {
      const lines = tags.map((t) => JSON.stringify(row(t)));
      lines.splice(int(r, lines.length + 1), 0, pick(r, ["42", '"s"', "null", "[1,2]", "true"]));
      return b(enc.encode(lines.join("\n")));
    }
    case "array_of_not_objects":
      return b(
        enc.encode(
          `[${tags.map((t) => JSON.stringify(row(t))).join(",")},${pick(r, ["1", "[]", "null"])}]`,
        ),
        "application/json",
      );
    case "object_body":
      return b(enc.encode(JSON.stringify(row(tags[0]))), "application/json");
    case "nested":
      return b(
        enc.encode(
          tags.map((t) => JSON.stringify(row(t, { x: { y: [1, { z: null }] } }))).join("\n"),
        ),
      );
    default:
      return b(enc.encode(nd));
  }
}

const SEQ_TEXT = [
  "1.5",
  "1e3",
  "01",
  " 5",
  "",
  "0",
  "-1",
  "9007199254740993",
  "99999999999999999999",
  "abc",
];
const PRODUCERS = [
  "",
  "a".repeat(128),
  "a".repeat(129),
  "ü-prod",
  "a b",
  "tab\there",
  "x/y?z",
  "%00",
];

Deno.test("publish fuzz (families): encodings, sizes, shapes, seq sequences, producer names; exactly the acknowledged rows stored, once", async () => {
  console.log(seedBanner(SUITE));
  const s = await startPublishServer(["--max-publish-bytes", String(LIMIT)]);
  const failures: string[] = [];
  const cases = fuzzCases(24, SUITE);
  // What the server acknowledged: offset → tag (and no offset twice).
  const acked = new Map<number, string>();
  const ack = (first: number, last: number, tags: string[], where: string) => {
    if (last - first + 1 !== tags.length) {
      failures.push(`${where}: acknowledged ${first}..${last} for ${tags.length} rows`);
      return;
    }
    for (let k = 0; k < tags.length; k++) {
      if (acked.has(first + k)) failures.push(`${where}: offset ${first + k} acknowledged twice`);
      acked.set(first + k, tags[k]);
    }
  };
  try {
    for (const c of cases) {
      const r = caseRng(c, 0x51f);
      const id = `${c.seed}.${c.index}`;
      const name = caseName(c);
      // HTTP bodies, some under a producer with a seq sequence.
      const producer = r() < 0.3 ? pick(r, PRODUCERS) : `p${id}`;
      const seqs: string[] = [];
      let seq = 0;
      const sent = new Map<string, { first: number; last: number }>();
      for (let k = 0; k < 4; k++) {
        const b = body(r, id);
        const headers: Record<string, string> = { "content-type": b.type };
        const useSeq = r() < 0.6;
        let seqText = "";
        if (useSeq) {
          const step = pick(r, ["next", "next", "gap", "same", "back", "odd"] as const);
          seqText = step === "odd" ? pick(r, SEQ_TEXT) : String(
            step === "next"
              ? ++seq
              : step === "gap"
              ? (seq += 2 + int(r, 5))
              : step === "same"
              ? Math.max(seq, 1)
              : Math.max(1, seq - 1 - int(r, 2)),
          );
          headers["streamcast-producer"] = producer;
          headers["streamcast-seq"] = seqText;
          seqs.push(seqText);
        }
        let res: Response;
        try {
          res = await fetch(`${s.http}/t`, {
            method: "POST",
            body: b.bytes as Uint8Array<ArrayBuffer>,
            headers,
          });
        } catch (err) {
          // A header value fetch itself refuses (non-ASCII, a tab): nothing was sent.
          if (err instanceof TypeError && /header/i.test(err.message)) continue;
          throw err;
        }
        const text = await res.text();
        const where = `${name} http ${b.what} seq ${JSON.stringify(seqText)} producer ${
          JSON.stringify(producer.slice(0, 20))
        }`;
        let a: Record<string, unknown> = {};
        try {
          a = JSON.parse(text);
        } catch {
          failures.push(`${where}: answer is not JSON: ${text.slice(0, 80)}`);
          continue;
        }
        if (![200, 400, 409, 413, 415].includes(res.status)) {
          failures.push(`${where}: status ${res.status} ${text.slice(0, 160)}`);
          continue;
        }
        if (res.status !== 200) {
          if (typeof a.error !== "string") {
            failures.push(`${where}: refusal without error: ${text}`);
          }
          continue;
        }
        const first = a.first as number, last = a.last as number;
        if (a.duplicate === true) {
          // The same seq again: the original answer, nothing stored.
          const was = sent.get(seqText);
          if (was && (was.first !== first || was.last !== last)) {
            failures.push(
              `${where}: duplicate answered ${first}..${last}, first ${was.first}..${was.last}`,
            );
          }
          continue;
        }
        if (
          [
            "over_limit",
            "not_objects",
            "array_of_not_objects",
            "utf16le",
            "utf16le_bom",
            "utf16be_bom",
            "latin1",
            "overlong",
            "surrogate",
          ].includes(b.what)
        ) {
          failures.push(`${where}: accepted a body that must be refused: ${text}`);
        }
        if (useSeq) sent.set(seqText, { first, last });
        ack(first, last, b.what === "object_body" ? b.tags.slice(0, 1) : b.tags, where);
      }
      // WebSocket frames, odd producer names and seq sequences.
      const wsProducer = r() < 0.4 ? pick(r, PRODUCERS) : `w${id}`;
      const ws = new WebSocket(`${s.ws}/t/publish?producer=${encodeURIComponent(wsProducer)}`);
      const answers: Record<string, unknown>[] = [];
      let greeting: Record<string, unknown> | null = null;
      let closed: number | null = null;
      ws.onerror = () => {};
      ws.onclose = (e) => (closed = e.code);
      ws.onmessage = (e) => {
        const m = JSON.parse(e.data);
        if (greeting === null) greeting = m;
        else answers.push(m);
      };
      await until(() => greeting !== null || closed !== null, 10_000, "publish greeting");
      const frames: { seq: unknown; tags: string[] }[] = []; // in the order sent: answers come in it
      let wseq = 0;
      let expect = 0;
      for (let k = 0; k < 5 && closed === null && greeting !== null; k++) {
        const tags = Array.from({ length: 1 + int(r, 4) }, () => tag(id));
        const rows: unknown[] = tags.map((t) => row(t));
        const shape = pick(
          r,
          ["ok", "ok", "ok", "gap", "same", "back", "seq_odd", "rows_odd", "frame_odd"] as const,
        );
        let frame: unknown;
        let sq: unknown = shape === "gap"
          ? (wseq += 2)
          : shape === "same"
          ? Math.max(1, wseq)
          : shape === "back"
          ? Math.max(1, wseq - 1)
          : ++wseq;
        if (shape === "seq_odd") sq = pick(r, [1.5, "3", -1, 0, 2 ** 53, 1e300, null]);
        frame = { seq: sq, rows };
        if (shape === "rows_odd") {
          frame = { seq: sq, rows: pick(r, [[], null, "rows", [1, 2], [...rows, 7], { a: 1 }]) };
        }
        if (shape === "frame_odd") frame = pick(r, [null, [1], "x", { rows }, { seq: sq }]);
        frames.push({ seq: sq, tags });
        ws.send(JSON.stringify(frame));
        expect++;
        if (shape === "frame_odd" || shape === "seq_odd") break; // may close the socket
      }
      await until(() => answers.length >= expect || closed !== null, 10_000, "answers or a close");
      answers.forEach((a, i) => {
        const where = `${name} ws producer ${JSON.stringify(wsProducer.slice(0, 20))} answer ${
          JSON.stringify(a)
        }`;
        const f = frames[i];
        if (!f || a.seq !== f.seq) {
          failures.push(`${where}: not the answer of frame ${i} (seq ${f?.seq})`);
        } else if (typeof a.first === "number" && a.duplicate !== true) {
          ack(a.first, a.last as number, f.tags, where);
        }
      });
      // A producer name refused: 4400 before any greeting (the reason names it).
      const refusedName = greeting === null && closed === 4400;
      if (refusedName && /^[\x21-\x7e]{1,128}$/.test(wsProducer)) {
        failures.push(`${name} ws: a valid producer name was refused: ${wsProducer}`);
      }
      if (closed !== null && !refusedName && ![1008, 1009, 1007, 1006, 0].includes(closed)) {
        failures.push(`${name} ws: closed with ${closed}`);
      }
      if (closed === null) ws.close();
      await until(() => closed !== null, 5000, "close");
    }
    const health = await fetch(`${s.http}/_/health`);
    await health.body?.cancel();
    assertEquals(health.status, 200, "the server is alive");
    const end = await endOffset(s.http);
    if (end - 1 !== acked.size) {
      failures.push(`rows stored ${end - 1} != rows acknowledged ${acked.size}`);
    }
    const lines = await readAll(s.ws, end - 1);
    for (const { offset, line } of lines) {
      const msg = JSON.parse(line)[1];
      if (acked.get(offset) !== msg.sym) {
        failures.push(
          `offset ${offset} holds ${JSON.stringify(msg).slice(0, 70)}, acknowledged ${
            acked.get(offset)
          }`,
        );
      }
    }
    assertEquals(
      new Set(lines.map((l) => JSON.parse(l.line)[1].sym)).size,
      lines.length,
      "each row once",
    );
    assert(failures.length === 0, `${failures.slice(0, 30).join("\n")}\n${replayHint(cases)}`);
  } finally {
    await s.stop();
  }
});
