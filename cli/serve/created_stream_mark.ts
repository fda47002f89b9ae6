/**
 * The mark a cluster node leaves in the folder of each stream it opens as a
 * created stream (`ROOT/NAME/created_stream.json`: the stream's name, its
 * `stream_id` and the cluster's prefix), and what it does with marked folders
 * at start. A node that was down when such a stream was deleted missed the
 * deletion; at its next start a folder is removed when all of these hold:
 *
 * - the name is not declared (flags or config);
 * - the folder carries the mark, for this cluster's prefix, and its log's
 *   `stream_id` (`log.json`) is the one the mark names — so a folder the node
 *   did not open as a created stream (an operator's own data) is never removed;
 * - the stream is not defined in etcd now, or it is defined anew: etcd holds
 *   no `stream_id` for it, or another one (deleted and created again while the
 *   node was down; the new stream then starts here from an empty folder).
 *
 * @module
 */

import { join } from "node:path";
import { readCheckedJson, writeCheckedJson } from "../../log/disk/meta_file.ts";
import { readMeta } from "../../log/log_meta.ts";
import type { Logger } from "../../common/logger.ts";

/** The mark's file name in a created stream's folder. */
export const CREATED_STREAM_MARK = "created_stream.json";

/** What the mark says. */
export interface CreatedStreamMark {
  /** The stream's name. */
  stream: string;
  /** The `stream_id` of the log the node opened. */
  stream_id: string;
  /** The cluster's etcd prefix. */
  prefix: string;
}

const MEMBERS = ["stream", "stream_id", "prefix"] as const;

/** Writes the mark in `dir` (atomically), replacing one there. */
export async function writeCreatedStreamMark(dir: string, mark: CreatedStreamMark): Promise<void> {
  await writeCheckedJson(join(dir, CREATED_STREAM_MARK), mark);
}

/** The mark in `dir`; `null` when there is none or it is not one. */
export async function readCreatedStreamMark(dir: string): Promise<CreatedStreamMark | null> {
  try {
    const r = await readCheckedJson<CreatedStreamMark>(join(dir, CREATED_STREAM_MARK), MEMBERS);
    const v = r?.value;
    if (
      v === undefined || typeof v.stream !== "string" || typeof v.stream_id !== "string" ||
      typeof v.prefix !== "string"
    ) {
      return null;
    }
    return v;
  } catch {
    return null;
  }
}

/** Why a folder was removed: its stream was deleted, or deleted and created again. */
export type RemovedWhy = "deleted" | "created_again";

/** What {@linkcode removeDeletedStreamFolders} needs to know of the cluster. */
export interface ClusterView {
  /** The cluster's etcd prefix. */
  prefix: string;
  /** Whether `name` is declared on this node (never removed). */
  declared(name: string): boolean;
  /** Whether `name` is defined in etcd now. */
  defined(name: string): boolean;
  /** The `stream_id` etcd holds for `name` (null: none yet). */
  clusterStreamId(name: string): Promise<string | null>;
}

/**
 * Removes the folders under `root` of created streams deleted (or deleted
 * and created again) while this node was down, as the module says; logs
 * `stream_folder_removed` for each. Returns the names removed.
 */
export async function removeDeletedStreamFolders(
  root: string,
  cluster: ClusterView,
  logger: Logger,
): Promise<string[]> {
  const removed: string[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(root));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return removed;
    throw err;
  }
  for (const e of entries) {
    if (!e.isDirectory || cluster.declared(e.name)) continue;
    const dir = join(root, e.name);
    const mark = await readCreatedStreamMark(dir);
    if (mark === null || mark.stream !== e.name || mark.prefix !== cluster.prefix) continue;
    const log = await readMeta(dir).catch(() => null);
    if (log === null || log.meta.stream_id !== mark.stream_id) continue;
    let why: RemovedWhy;
    if (!cluster.defined(e.name)) {
      why = "deleted";
    } else {
      const now = await cluster.clusterStreamId(e.name);
      if (now === mark.stream_id) continue;
      why = "created_again";
    }
    await Deno.remove(dir, { recursive: true });
    removed.push(e.name);
    logger.info("stream_folder_removed", {
      stream: e.name,
      stream_id: mark.stream_id,
      why,
      detail: why === "deleted"
        ? "deleted from the cluster while this node was down"
        : "deleted and created again (another stream_id) while this node was down",
    });
  }
  return removed;
}
