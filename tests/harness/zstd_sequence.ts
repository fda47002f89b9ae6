// Message sequences of compress=zstd-stream, as subscribers of one group see
// them: a member from the group's first frame gets every shared message; a
// joiner that arrives mid-frame gets self-contained frames of each commit
// until the group starts its next frame, then the shared messages. Shared by
// the round-trip tests, the fuzz and the Chromium test.
import { ZstdStream } from "../../server/frames/zstd_stream.ts";
import { tradeRows } from "./trades.ts";

/** What one subscriber received: its messages and the text each stands for. */
export interface Received {
  messages: Uint8Array[];
  texts: string[];
}

/** The batched texts of `rows` trade rows at offsets from `first`, `perCommit(i)` rows per commit. */
export function tradeCommits(
  rows: number,
  perCommit: (commit: number) => number,
  first = 1,
): string[] {
  const make = tradeRows(7);
  const out: string[] = [];
  let at = 0;
  for (let c = 0; at < rows; c++) {
    const n = Math.max(1, Math.min(perCommit(c), rows - at));
    const lines: string[] = [];
    for (let k = 0; k < n; k++, at++) lines.push(`[${first + at},${JSON.stringify(make(at))}]`);
    out.push(lines.join("\n"));
  }
  return out;
}

/**
 * Runs `commits` through one group's context: the member's messages, and
 * those of a joiner arriving before commit `joinAt` (self-contained frames
 * until the group's next frame starts, then the shared messages).
 */
export function groupOf(
  commits: readonly string[],
  options: { frameBytes?: number; joinAt?: number; finishAt?: ReadonlySet<number> } = {},
): { member: Received; joiner: Received; frames: number } {
  const group = ZstdStream.create({ frameBytes: options.frameBytes });
  if (group === null) {
    throw new Error("libzstd did not load: these tests need --allow-ffi and libzstd");
  }
  const member: Received = { messages: [], texts: [] };
  const joiner: Received = { messages: [], texts: [] };
  const joinAt = options.joinAt ?? Infinity;
  let shared = false;
  try {
    commits.forEach((text, i) => {
      if (options.finishAt?.has(i)) group.finishFrame();
      const startsFrame = !group.inFrame;
      const message = group.compressCommit(text);
      member.messages.push(message);
      member.texts.push(text);
      if (i < joinAt) return;
      if (!shared && startsFrame) shared = true;
      joiner.messages.push(shared ? message : group.selfContained(text));
      joiner.texts.push(text);
    });
    return { member, joiner, frames: group.frames };
  } finally {
    group.close();
  }
}

/** Splits a member's messages into frames (a frame starts at each message with the magic number). */
export function framesOf(r: Received): Received[] {
  const out: Received[] = [];
  r.messages.forEach((m, i) => {
    if (m[0] === 0x28 && m[1] === 0xb5 && m[2] === 0x2f && m[3] === 0xfd) {
      out.push({ messages: [], texts: [] });
    }
    out[out.length - 1].messages.push(m);
    out[out.length - 1].texts.push(r.texts[i]);
  });
  return out;
}

/** The bytes of `parts` one after another. */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
