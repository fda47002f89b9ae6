/**
 * What the server serving a stream gives each subscriber it starts: the gate
 * catching-up reads take turns through, the logger failures go to, the send
 * buffer the server's sockets share, and the size of a zstd stream's frame.
 * A subscriber started with none ({@linkcode UNSERVED}) has no gate, a
 * logger at level "warn" on stderr and the process's send buffer.
 *
 * @module
 */

import { Logger } from "../../common/logger.ts";
import { COMPRESS_FRAME_BYTES } from "../frames/zstd_stream.ts";
import type { Gate } from "./replay_gate.ts";
import { SendBudget } from "./send_budget.ts";

/**
 * What a server gives the subscribers it starts: the gate catching-up reads
 * take turns through, the logger failures go to, and the send buffer its
 * subscribers' sockets share.
 */
export interface Serving {
  /** Catching-up subscribers' log reads take turns through it; null: no gate. */
  readonly gate: Gate | null;
  /** Where subscriber failures are reported. */
  readonly logger: Logger;
  /** The server's send buffer, shared by its subscribers' sockets. @default one per process */
  readonly sendBudget?: SendBudget;
  /** compress=zstd-stream: the text a group's frame carries before a new one starts. @default 1 MiB */
  readonly compressFrameBytes?: number;
}

/** What a subscriber started by no server gets: no gate, stderr, the process's send buffer. */
export const UNSERVED: Required<Serving> = Object.freeze({
  gate: null,
  logger: new Logger({ level: "warn" }),
  sendBudget: new SendBudget(),
  compressFrameBytes: COMPRESS_FRAME_BYTES.default,
});
