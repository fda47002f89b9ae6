// Hostile publish bodies and frames against a real server: it never crashes,
// never answers 500, and stores either a whole body (frame) or nothing of it —
// the rows stored are exactly the sum of the counts it acknowledged. Seeded
// (tests/harness/seeds.ts): a fresh seed every run plus the regression
// seeds; STREAMCAST_FUZZ_SEED=N replays seed N.
import { assert, assertEquals } from "../../harness/assert.ts";
import { caseName, caseRng, fuzzCases, replayHint, seedBanner } from "../../harness/seeds.ts";
import { endOffset, startPublishServer } from "../../harness/publish_child.ts";
import { until } from "../../harness/util.ts";

console.log(seedBanner("publish fuzz"));

const enc = new TextEncoder();

function validRows(rand: () => number, n: number): string[] {
  return Array.from(
    { length: n },
    (_, i) => JSON.stringify({ sym: `f${i}`, px: Math.round(rand() * 1e6) / 100 }),
  );
}

// One hostile change to `bytes`.
function mutate(rand: () => number, bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const b = [...bytes];
  const kind = Math.floor(rand() * 8);
  const at = Math.floor(rand() * (b.length + 1));
  switch (kind) {
    case 0: // flip bytes
      for (let i = 0; i < 1 + rand() * 4; i++) {
        b[Math.floor(rand() * b.length)] ^= 1 << Math.floor(rand() * 8);
      }
      break;
    case 1: // truncate
      b.length = at;
      break;
    case 2: // invalid UTF-8
      b.splice(at, 0, 0xff, 0xfe, 0xc0);
      break;
    case 3: // garbage
      b.splice(
        at,
        0,
        ...Array.from({ length: 1 + Math.floor(rand() * 20) }, () => Math.floor(rand() * 256)),
      );
      break;
    case 4: // a row of the wrong type
      b.splice(at, 0, ...enc.encode('\n{"sym":1,"px":"x"}\n'));
      break;
    case 5: // deep nesting
      b.splice(at, 0, ...enc.encode("[".repeat(2000)));
      break;
    case 6: // NUL and control bytes
      b.splice(at, 0, 0, 1, 0x1b, 0x7f);
      break;
    default: // valid as it is
      break;
  }
  return new Uint8Array(b);
}

Deno.test("publish fuzz: hostile bodies and frames never crash the server or store part of a body", async () => {
  const s = await startPublishServer(["--max-publish-bytes", "65536"]);
  const failures: string[] = [];
  const failedCases: { seed: number; index: number }[] = [];
  let acked = 0;
  try {
    for (const c of fuzzCases(60, "publish bodies")) {
      const rand = caseRng(c, 0x9b1);
      const rows = validRows(rand, 1 + Math.floor(rand() * 30));
      const asArray = rand() < 0.3;
      let body: Uint8Array<ArrayBuffer> = enc.encode(
        asArray ? `[${rows.join(",")}]` : rows.join("\n"),
      );
      const mutations = Math.floor(rand() * 3);
      for (let i = 0; i < mutations; i++) body = mutate(rand, body);
      const headers: Record<string, string> = {
        "content-type": asArray
          ? "application/json"
          : rand() < 0.1
          ? "image/png"
          : "application/x-ndjson",
      };
      if (rand() < 0.4) {
        headers["streamcast-producer"] = rand() < 0.1 ? "bad name" : `fz${Math.floor(rand() * 3)}`;
        headers["streamcast-seq"] = rand() < 0.1 ? "-3" : String(1 + Math.floor(rand() * 100));
      }
      const res = await fetch(`${s.http}/t`, { method: "POST", body, headers });
      const text = await res.text();
      let answer: Record<string, unknown> = {};
      try {
        answer = JSON.parse(text);
      } catch {
        failures.push(`${caseName(c)}: answer is not JSON: ${text.slice(0, 80)}`);
      }
      if (![200, 400, 409, 413, 415].includes(res.status)) {
        failedCases.push(c);
        failures.push(`${caseName(c)}: status ${res.status} ${text.slice(0, 120)}`);
      }
      if (res.status === 200 && answer.duplicate !== true) acked += answer.count as number;
      if (
        res.status === 200 &&
        answer.count !== (answer.last as number) - (answer.first as number) + 1
      ) {
        failures.push(`${caseName(c)}: count does not match first/last: ${text}`);
      }
    }
    // Frames: one socket per case, a few hostile frames on it.
    for (const c of fuzzCases(30, "publish frames")) {
      const rand = caseRng(c, 0xf7a);
      const ws = new WebSocket(`${s.ws}/t/publish?producer=fw${c.seed}-${c.index}`);
      const answers: Record<string, unknown>[] = [];
      let greeted = false;
      let closed: number | null = null;
      ws.onerror = () => {};
      ws.onclose = (e) => (closed = e.code);
      ws.onmessage = (e) => {
        if (!greeted) greeted = true;
        else answers.push(JSON.parse(e.data));
      };
      await until(() => greeted || closed !== null, 10_000, "greeting");
      const n = 1 + Math.floor(rand() * 6);
      let sent = 0;
      for (let i = 0; i < n && closed === null; i++) {
        const frame = enc.encode(
          JSON.stringify({
            seq: i + 1,
            rows: validRows(rand, 1 + Math.floor(rand() * 10)).map((r) => JSON.parse(r)),
          }),
        );
        const bytes = rand() < 0.6 ? frame : mutate(rand, frame);
        if (rand() < 0.1) ws.send(bytes);
        else ws.send(new TextDecoder().decode(bytes));
        sent++;
      }
      await until(() => answers.length >= sent || closed !== null, 10_000, "answers or a close");
      // 1008/1009: the server's refusal. 0 and 1006: Deno's client reports the
      // end that way when it kept sending after the server's close frame.
      if (closed !== null && ![1008, 1009, 1007, 1006, 0].includes(closed)) {
        failedCases.push(c);
        failures.push(
          `${
            caseName(c, "frames")
          }: closed with ${closed} after ${sent} frames, ${answers.length} answers`,
        );
      }
      for (const a of answers) {
        if (typeof a.first === "number" && a.duplicate !== true) {
          acked += (a.last as number) - a.first + 1;
        }
      }
      if (closed === null) ws.close();
      await until(() => closed !== null, 5000, "close");
    }
    const health = await fetch(`${s.http}/_/health`);
    await health.body?.cancel();
    assertEquals(health.status, 200);
    assertEquals(await endOffset(s.http), acked + 1, "rows stored = rows acknowledged");
    assert(failures.length === 0, `${failures.join("\n")}\n${replayHint(failedCases)}`);
  } finally {
    await s.stop();
  }
});
