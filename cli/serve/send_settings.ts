/**
 * The rows of `serve`'s settings table for how the server hands frames to
 * its subscribers' sockets (the send buffer, the fan-out's turn), kept in a
 * file of their own and spliced into `SETTINGS` (`settings.ts`),
 * which types them.
 *
 * @module
 */

import {
  DEFAULT_FANOUT_TURN_BYTES,
  DEFAULT_SEND_BUFFER_BYTES,
  MIN_SEND_BUFFER_BYTES,
} from "../../server/limits.ts";
import { COMPRESS_FRAME_BYTES } from "../../server/frames/zstd_stream.ts";
import { integer, LIMITS_GROUP } from "./values.ts";

/**
 * The send limits, in the order of `--help`.
 */
export const SEND_SETTINGS = [
  {
    flag: "send-buffer-bytes",
    key: "sendBufferBytes",
    type: "string" as const,
    read: integer(MIN_SEND_BUFFER_BYTES),
    group: LIMITS_GROUP,
    usage: [
      ["--send-buffer-bytes N", "bytes all subscribers' sockets may hold unsent"],
      ["", "together (an equal share each, 16 KiB to 1 MiB); one"],
      ["", `over its share falls behind [${DEFAULT_SEND_BUFFER_BYTES}]`],
    ] as [string, string][],
    docs: "bytes all subscribers' sockets may hold together, handed to `send` and not yet " +
      "written; see [Limits](#limits).",
  },
  {
    flag: "fanout-turn-bytes",
    key: "fanoutTurnBytes",
    type: "string" as const,
    read: integer(0),
    group: LIMITS_GROUP,
    usage: [
      ["--fanout-turn-bytes N", "bytes of live frames handed to sockets per turn of"],
      ["", "the event loop; the rest of a fan-out waits a turn"],
      ["", `(0: one pass) [${DEFAULT_FANOUT_TURN_BYTES}]`],
    ] as [string, string][],
    docs: "bytes of live frames handed to the subscribers' sockets in one turn of the event " +
      "loop, the rest of the fan-out waiting for the next turn (0: one synchronous pass); " +
      "see [Limits](#limits).",
  },
  {
    flag: "compress-frame-bytes",
    key: "compressFrameBytes",
    type: "string" as const,
    read: integer(COMPRESS_FRAME_BYTES.min, COMPRESS_FRAME_BYTES.max),
    group: LIMITS_GROUP,
    usage: [
      ["--compress-frame-bytes N", "text a compress=zstd-stream frame carries before"],
      ["", "a new one starts (4 KiB to 64 MiB); a subscriber"],
      ["", `joining mid-frame waits for it [${COMPRESS_FRAME_BYTES.default}]`],
    ] as [string, string][],
    docs: "text one group's `compress=zstd-stream` frame carries before the next commit starts " +
      "a new frame; see [Limits](#limits).",
  },
];
