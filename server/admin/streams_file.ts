/**
 * `ROOT/streams.json`: the streams created while serving
 * (`PUT /_/streams/{name}`), each with its definition, so that a restart
 * serves them again. Written whole and atomically (temp file, fsync, rename,
 * fsync of the folder): a crash leaves the old list or the new one.
 *
 * ```json
 * {"format": 1, "streams": {"quotes": {"schema": {…}, "publish": true, …}}}
 * ```
 *
 * @module
 */

import { join } from "node:path";
import { writeFileAtomic } from "../../log/disk/atomic_write.ts";
import {
  DefinitionError,
  definitionJson,
  parseDefinition,
  type StreamDefinition,
} from "../stream_definition.ts";
import { isStreamName } from "../../wire/stream_name.ts";

/** The file's name under the server's root. */
export const STREAMS_FILE = "streams.json";

/**
 * The created streams recorded under `root`, by name (empty when there is
 * no file); a `DefinitionError` naming the file and the entry for one that
 * does not parse.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readStreamsFile, writeStreamsFile } from "./streams_file.ts";
 * import { parseDefinition } from "../stream_definition.ts";
 * const root = await Deno.makeTempDir();
 * equal((await readStreamsFile(root)).size, 0);
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * await writeStreamsFile(root, new Map([["q", parseDefinition({ schema })]]));
 * equal((await readStreamsFile(root)).get("q")?.publish, false);
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export async function readStreamsFile(root: string): Promise<Map<string, StreamDefinition>> {
  const path = join(root, STREAMS_FILE);
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return new Map();
    throw err;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new DefinitionError(`${path} is not JSON`);
  }
  const j = json as { format?: unknown; streams?: unknown } | null;
  if (typeof j !== "object" || j === null || j.format !== 1) {
    throw new DefinitionError(`${path}: not a streams file of format 1`);
  }
  if (typeof j.streams !== "object" || j.streams === null || Array.isArray(j.streams)) {
    throw new DefinitionError(`${path}: "streams" must be an object`);
  }
  const out = new Map<string, StreamDefinition>();
  for (const [name, def] of Object.entries(j.streams)) {
    if (!isStreamName(name) || name === "") {
      throw new DefinitionError(`${path}: ${JSON.stringify(name)} is not a stream name`);
    }
    try {
      out.set(name, parseDefinition(def));
    } catch (err) {
      if (!(err instanceof DefinitionError)) throw err;
      throw new DefinitionError(`${path}: stream ${JSON.stringify(name)}: ${err.message}`);
    }
  }
  return out;
}

/** Records `streams` under `root`, atomically. */
export async function writeStreamsFile(
  root: string,
  streams: ReadonlyMap<string, StreamDefinition>,
): Promise<void> {
  await Deno.mkdir(root, { recursive: true });
  const body = {
    format: 1,
    streams: Object.fromEntries([...streams].map(([n, d]) => [n, definitionJson(d)])),
  };
  await writeFileAtomic(join(root, STREAMS_FILE), JSON.stringify(body, null, 2) + "\n");
}
