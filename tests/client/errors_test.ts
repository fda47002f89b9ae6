import { assert, assertEquals } from "../harness/assert.ts";
import { closeError } from "../../client/errors.ts";
import { encodeCloseReason } from "../../wire/close_reason.ts";
import {
  ConnectionClosed,
  NOT_REPLAYABLE_WHYS,
  NotReplayable,
  type NotReplayableReason,
  ProtocolError,
  StreamNotFound,
  TooSlow,
} from "../../client/mod.ts";

const URL_ = "ws://127.0.0.1:8765/trades";

// The reasons the server sends (encoded as it encodes them), and what each
// message must say: the numbers, and the next step.
const CASES: [NotReplayableReason, string[]][] = [
  [{ error: "not_replayable", why: "not_durable" }, ["ephemeral", "Subscribe live"]],
  [
    { error: "not_replayable", why: "other_stream" },
    ["ab".repeat(16), "delete the saved cursor", '"earliest"'],
  ],
  [
    { error: "not_replayable", why: "ahead", offset: 12, end_offset: 11 },
    ["offset 12", "end is 11", "subscribe at 11", "stream_id"],
  ],
  [
    { error: "not_replayable", why: "empty", offset: 3, end_offset: 11 },
    ["offset 3", "below its end 11", "Subscribe at 11", "archive"],
  ],
  [
    { error: "not_replayable", why: "evicted", offset: 100, earliest: 5000 },
    ["offset 100", "earliest offset it still serves is 5000", "100..4999", "gap of 4900"],
  ],
  [
    {
      error: "not_replayable",
      why: "too_old",
      offset: 2,
      rows: 9,
      max_replay: 5,
      end_offset: 11,
    },
    ["offset 2", "9 rows", "end 11", "max_replay of 5", "about offset 6", "--max-replay"],
  ],
];

Deno.test("errors: each not_replayable why names its numbers and the next step", () => {
  assertEquals(CASES.map(([r]) => r.why), [...NOT_REPLAYABLE_WHYS]);
  for (const [reason, want] of CASES) {
    const err = closeError(4416, encodeCloseReason(reason), {
      url: URL_,
      offset: reason.offset ?? 5,
      streamId: "ab".repeat(16),
    });
    assert(err instanceof NotReplayable);
    assertEquals(err.why, reason.why);
    assertEquals(err.code, 4416);
    assertEquals(err.reconnectable, false);
    for (const s of want) {
      assert(err.message.includes(s), `${reason.why}: "${s}" in ${err.message}`);
    }
  }
});

Deno.test("errors: the close code decides the class; a missing or non-JSON reason keeps it", () => {
  for (const reason of ["", "not json", '{"error":"something_else"}', "[1,2]"]) {
    const ctx = { url: URL_, offset: 7 };
    assert(closeError(4400, reason, ctx) instanceof ProtocolError);
    const nf = closeError(4404, reason, ctx);
    assert(nf instanceof StreamNotFound && nf.stream === "trades", nf.message);
    const nr = closeError(4416, reason, ctx);
    assert(nr instanceof NotReplayable && nr.why === null && nr.offset === 7, nr.message);
    const ts = closeError(4429, reason, ctx, 42);
    assert(ts instanceof TooSlow && ts.resume === 42 && ts.reconnectable, ts.message);
    for (const code of [1000, 1001, 1006, 1011, 4401]) {
      const cc = closeError(code, reason, ctx);
      assert(cc instanceof ConnectionClosed && cc.code === code, cc.message);
      assertEquals(cc.reconnectable, code !== 4401, `code ${code}`);
    }
  }
  // A reason that says another class than the code does not change the class.
  const mixed = closeError(4429, '{"error":"not_replayable","why":"ahead"}', { url: URL_ });
  assert(mixed instanceof TooSlow);
});

Deno.test("errors: TooSlow and ConnectionClosed say where to resume", () => {
  const durable = closeError(4429, encodeCloseReason({ error: "too_slow", resume: 20481 }), {
    url: URL_,
  });
  assert(durable instanceof TooSlow && durable.resume === 20481);
  assert(durable.message.includes("Resume at offset 20481"), durable.message);
  const eph = closeError(4429, encodeCloseReason({ error: "too_slow", resume: null }), {
    url: URL_,
  });
  assert(eph instanceof TooSlow && eph.resume === null);
  assert(eph.message.includes("ephemeral") && eph.message.includes("lost"), eph.message);
  const gone = closeError(1001, "", { url: URL_ }, 58);
  assert(
    gone.message.includes("shutting down") && gone.message.includes("offset 58"),
    gone.message,
  );
  const unnamed = closeError(4416, "", { url: "ws://127.0.0.1:8765/" });
  assert(unnamed.message.includes("the unnamed stream"), unnamed.message);
});
