/**
 * What `serve` runs with: the config file read and checked against the
 * settings table, then the flags merged over it ({@linkcode settingsFrom}).
 *
 * @module
 */

import { dirname, resolve } from "node:path";
import { isStreamName } from "../../wire/stream_name.ts";
import { UsageError } from "../_args.ts";
import { Fatal, fileError, oneLine, show } from "./fatal.ts";
import { CONFIG_KEYS, READ_SETTINGS } from "./settings.ts";
import type { SchemaSource, Settings, StreamDecl, UpstreamDecl } from "./run_settings.ts";
import { nonEmpty, streamName, upstreamUrl } from "./values.ts";
import { mirrorUrl } from "../../server/mirror/mirror.ts";
import { checkClusterSettings, CLUSTER_SETTINGS } from "./cluster_settings.ts";
import { keyColumns } from "./key_settings.ts";
import { retainAge, retainBytes } from "./disk_settings.ts";

// The keys of one stream in the config's "streams".
const STREAM_KEYS = new Set([
  "schema",
  "ephemeral",
  "publish",
  "iceberg",
  "retainAge",
  "retainBytes",
  "key",
]);

/** Settings as a config file gives them. */
interface FileSettings {
  /** The values of the table's settings, by config key. */
  values: Record<string, unknown>;
  streams: Map<string, StreamDecl>;
  upstreams: Map<string, UpstreamDecl>;
  follow: Map<string, string>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Splits `NAME=VALUE` at the first `=`; null when there is none. */
function split(spec: string): [string, string] | null {
  const at = spec.indexOf("=");
  return at === -1 ? null : [spec.slice(0, at), spec.slice(at + 1)];
}

/** Reads and checks a config file; relative paths in it resolve against its folder. */
async function readConfig(path: string): Promise<FileSettings> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new Fatal(`cannot read config file ${path}: ${fileError(err)}`, 2);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Fatal(`config file ${path} is not JSON: ${oneLine(err)}`, 2);
  }
  try {
    return configSettings(json, dirname(resolve(path)));
  } catch (err) {
    throw new Fatal(`config file ${path}: ${oneLine(err)}`, 2);
  }
}

function configSettings(json: unknown, base: string): FileSettings {
  if (!isObject(json)) throw new TypeError("the top level must be a JSON object");
  for (const key of Object.keys(json)) {
    if (!CONFIG_KEYS.has(key)) throw new TypeError(`unknown key "${key}"`);
  }
  const out: FileSettings = {
    values: {},
    streams: new Map(),
    upstreams: new Map(),
    follow: new Map(),
  };
  for (const s of READ_SETTINGS) {
    if (json[s.key] !== undefined) out.values[s.key] = s.read(json[s.key], `"${s.key}"`, base);
  }
  if (json.streams !== undefined) {
    if (!isObject(json.streams)) {
      throw new TypeError(`"streams" must be an object of streams by name`);
    }
    for (const [name, decl] of Object.entries(json.streams)) {
      const key = `streams.${name}`;
      streamName(name, `"streams"`);
      if (!isObject(decl)) {
        throw new TypeError(`"${key}" must be an object like {"schema": "x.json"}`);
      }
      for (const k of Object.keys(decl)) {
        if (!STREAM_KEYS.has(k)) throw new TypeError(`unknown key "${key}.${k}"`);
      }
      let schema: SchemaSource;
      if (typeof decl.schema === "string" && decl.schema !== "") {
        schema = { path: resolve(base, decl.schema) };
      } else if (isObject(decl.schema)) {
        schema = { inline: decl.schema, where: `"${key}.schema"` };
      } else {
        throw new TypeError(`"${key}.schema" must be a file path or an inline JSON Schema object`);
      }
      if (decl.ephemeral !== undefined && typeof decl.ephemeral !== "boolean") {
        throw new TypeError(`"${key}.ephemeral" must be true or false`);
      }
      for (const flag of ["publish", "iceberg"] as const) {
        if (decl[flag] !== undefined && typeof decl[flag] !== "boolean") {
          throw new TypeError(`"${key}.${flag}" must be true or false`);
        }
      }
      out.streams.set(name, {
        schema,
        ephemeral: decl.ephemeral === true,
        publish: decl.publish === true,
        iceberg: decl.iceberg === true,
        ...(decl.key !== undefined ? { key: keyColumns(decl.key, `"${key}.key"`) } : {}),
        // A stream's own retention wins over the server's.
        ...(decl.retainAge !== undefined
          ? { retainAge: retainAge(decl.retainAge, `"${key}.retainAge"`, base) as number }
          : {}),
        ...(decl.retainBytes !== undefined
          ? { retainBytes: retainBytes(decl.retainBytes, `"${key}.retainBytes"`, base) as number }
          : {}),
      });
    }
  }
  if (json.upstreams !== undefined) {
    if (!isObject(json.upstreams)) {
      throw new TypeError(`"upstreams" must be an object of URLs by stream name`);
    }
    for (const [name, decl] of Object.entries(json.upstreams)) {
      const key = `upstreams.${name}`;
      streamName(name, `"upstreams"`);
      if (typeof decl === "string") {
        out.upstreams.set(name, { url: upstreamUrl(decl, `"${key}"`), handler: null });
        continue;
      }
      if (!isObject(decl)) {
        throw new TypeError(`"${key}" must be a URL or {"url": …, "handler": …}`);
      }
      for (const k of Object.keys(decl)) {
        if (k !== "url" && k !== "handler") throw new TypeError(`unknown key "${key}.${k}"`);
      }
      out.upstreams.set(name, {
        url: upstreamUrl(nonEmpty(decl.url, `"${key}.url"`), `"${key}.url"`),
        handler: decl.handler === undefined
          ? null
          : resolve(base, nonEmpty(decl.handler, `"${key}.handler"`)),
      });
    }
  }
  if (json.follow !== undefined) {
    // Mirrors (docs/SPEC.md §10): {"NAME": "ws://primary/NAME"}.
    if (!isObject(json.follow)) {
      throw new TypeError(`"follow" must be an object of primary URLs by stream name`);
    }
    for (const [name, url] of Object.entries(json.follow)) {
      streamName(name, `"follow"`);
      out.follow.set(name, followSpec(nonEmpty(url, `"follow.${name}"`), `"follow.${name}"`));
    }
  }
  return out;
}

// A follow URL, checked as the mirror reads it.
function followSpec(url: string, what: string): string {
  try {
    mirrorUrl(url);
  } catch (err) {
    throw new RangeError(`${what}: ${(err as Error).message}`);
  }
  return url;
}

/**
 * The settings `serve` runs with: the config file's (`--config`), with the
 * flags `values` (from `parseArgs`) over them. Throws {@linkcode UsageError}
 * for a bad flag or combination, {@linkcode Fatal} for a bad config file.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { settingsFrom } from "./config.ts";
 * const s = await settingsFrom({ stream: ["trades=trades.json"], port: "0" });
 * equal(s.port, 0);
 * equal(s.root, "./data");
 * deepStrictEqual([...s.streams.keys()], ["trades"]);
 * ```
 */
export async function settingsFrom(values: Record<string, unknown>): Promise<Settings> {
  const config = values.config as string | undefined;
  const file: FileSettings = config !== undefined
    ? await readConfig(config)
    : { values: {}, streams: new Map(), upstreams: new Map(), follow: new Map() };
  try {
    return mergeFlags(file, values);
  } catch (err) {
    if (err instanceof RangeError || err instanceof TypeError) throw new UsageError(err.message);
    throw err;
  }
}

function mergeFlags(file: FileSettings, values: Record<string, unknown>): Settings {
  const list = (key: string) => (values[key] as string[] | undefined) ?? [];
  // A flag wins over the file, the file over the default.
  const merged: Record<string, unknown> = {};
  for (const s of READ_SETTINGS) {
    const given = s.multiple ? undefined : values[s.flag];
    if (given !== undefined) {
      merged[s.key] = s.flagValue !== undefined ? s.flagValue : s.read(given, `--${s.flag}`, null);
    } else if (s.key in file.values) merged[s.key] = file.values[s.key];
    else merged[s.key] = s.default;
  }
  const {
    archive: uri,
    s3Endpoint: endpoint,
    s3PathStyle: pathStyle,
    s3Timeout: timeoutS,
    ...rest
  } = merged;
  const s = {
    ...rest,
    streams: new Map(file.streams),
    upstreams: new Map(file.upstreams),
    archive: null,
  } as unknown as Settings;
  if ((s.tlsCert === null) !== (s.tlsKey === null)) {
    throw new RangeError("--tls-cert and --tls-key go together: give both or neither");
  }
  if (s.host === "") throw new RangeError("--host must not be empty");
  if (s.jwtKeys === null && s.jwtSecretFile === null) {
    for (const [flag, v] of [["--jwt-issuer", s.jwtIssuer], ["--jwt-audience", s.jwtAudience]]) {
      if (v !== null) throw new RangeError(`${flag} needs --jwt-keys or --jwt-secret-file`);
    }
  }
  const declared = new Set<string>();
  for (const spec of list("stream")) {
    const kv = split(spec);
    if (!kv || kv[1] === "") {
      throw new RangeError(`--stream wants NAME=SCHEMA.json, got ${JSON.stringify(spec)}`);
    }
    const name = streamName(kv[0], "--stream");
    if (declared.has(name)) throw new RangeError(`--stream declares ${show(name)} twice`);
    declared.add(name);
    // A flag replaces the config's declaration, ephemeral included.
    s.streams.set(name, { schema: { path: kv[1] }, ephemeral: false, publish: false });
  }
  // Mirrors: NAME=URL; a followed stream is not declared and takes no rows.
  s.follow = new Map(file.follow);
  for (const spec of list("follow")) {
    const kv = split(spec);
    if (!kv || !isStreamName(kv[0]) || kv[1] === "") {
      throw new RangeError(`--follow wants NAME=URL, got ${JSON.stringify(spec)}`);
    }
    s.follow.set(kv[0], followSpec(kv[1], "--follow"));
  }
  for (const name of s.follow.keys()) {
    if (s.streams.has(name)) {
      throw new RangeError(
        `${show(name)} is both declared (--stream) and followed (--follow): a mirror takes ` +
          `the schema from its primary; give one of them`,
      );
    }
  }
  const followed = (name: string, what: string, why = "a mirror takes no rows for it") => {
    if (s.follow.has(name)) {
      throw new RangeError(
        `${what} names ${show(name)}, which is followed from ${
          mirrorUrl(s.follow.get(name)!).shown
        }: ${why}`,
      );
    }
  };
  if (s.stdin !== null) followed(s.stdin, values.stdin !== undefined ? "--stdin" : '"stdin"');
  for (const spec of list("upstream")) followed(split(spec)?.[0] ?? "", "--upstream");
  for (const name of file.upstreams.keys()) followed(name, `"upstreams"`);
  const undeclared = (name: string, what: string) => {
    if (!s.streams.has(name)) {
      const known = [...s.streams.keys()].map((n) => JSON.stringify(n)).join(", ");
      throw new RangeError(
        `${what} names ${show(name)}, which is not declared (declared: ${known})`,
      );
    }
  };
  for (const name of list("ephemeral")) {
    streamName(name, "--ephemeral");
    undeclared(name, "--ephemeral");
    s.streams.get(name)!.ephemeral = true;
  }
  if (s.stdin !== null) undeclared(s.stdin, values.stdin !== undefined ? "--stdin" : '"stdin"');
  for (const name of list("publish")) {
    streamName(name, "--publish");
    followed(name, "--publish");
    undeclared(name, "--publish");
    s.streams.get(name)!.publish = true;
  }
  for (const name of list("iceberg")) {
    streamName(name, "--iceberg");
    followed(name, "--iceberg", "only the stream's writer (its primary) commits to its table");
    undeclared(name, "--iceberg");
    s.streams.get(name)!.iceberg = true;
  }
  const keyed = new Set<string>();
  s.followKeys = new Map();
  for (const spec of list("key")) {
    const kv = split(spec);
    if (!kv || !isStreamName(kv[0]) || kv[1] === "") {
      throw new RangeError(`--key wants NAME=COL[,COL…], got ${JSON.stringify(spec)}`);
    }
    if (keyed.has(kv[0])) throw new RangeError(`--key names ${show(kv[0])} twice`);
    keyed.add(kv[0]);
    // A mirror keeps its own index, from the rows it makes durable.
    if (s.follow.has(kv[0])) {
      s.followKeys.set(kv[0], keyColumns(kv[1], "--key"));
      continue;
    }
    undeclared(kv[0], "--key");
    s.streams.get(kv[0])!.key = keyColumns(kv[1], "--key");
  }
  for (const [name, decl] of s.streams) {
    if (decl.key && decl.ephemeral) {
      throw new RangeError(
        `${show(name)} has a key and is ephemeral: the latest row per key is kept from ` +
          "committed rows, so it needs a durable stream",
      );
    }
    if (decl.publish && decl.ephemeral) {
      throw new RangeError(
        `${show(name)} is opened for publishing and ephemeral: publishing acknowledges offsets, ` +
          "so it needs a durable stream",
      );
    }
    if (decl.iceberg && decl.ephemeral) {
      throw new RangeError(
        `${show(name)} keeps an Iceberg table and is ephemeral: the table holds the log's ` +
          "sealed rows, so it needs a durable stream",
      );
    }
  }
  for (const spec of list("upstream")) {
    const kv = split(spec);
    if (!kv || !isStreamName(kv[0]) || kv[1] === "") {
      throw new RangeError(`--upstream wants NAME=URL, got ${JSON.stringify(spec)}`);
    }
    const old = s.upstreams.get(kv[0]);
    s.upstreams.set(kv[0], {
      url: upstreamUrl(kv[1], "--upstream"),
      handler: old?.handler ?? null,
    });
  }
  for (const name of s.upstreams.keys()) undeclared(name, `the upstream of ${show(name)}`);
  let defaultHandlers = 0;
  for (const spec of list("handler")) {
    const kv = split(spec);
    // NAME=MODULE names a stream; a module path or URL never looks like a stream name.
    if (kv && isStreamName(kv[0]) && kv[1] !== "") {
      const up = s.upstreams.get(kv[0]);
      if (!up) throw new RangeError(`--handler ${spec}: ${show(kv[0])} has no upstream`);
      up.handler = kv[1];
    } else {
      if (++defaultHandlers > 1) {
        throw new RangeError(`--handler MODULE is given twice (use NAME=MODULE for one stream)`);
      }
      s.handler = spec;
    }
  }
  if (s.handler !== null && s.upstreams.size === 0) {
    throw new RangeError(`a handler is given but no --upstream: handlers apply to upstream frames`);
  }
  if (typeof uri === "string") {
    s.archive = {
      uri,
      endpoint: endpoint as string | undefined,
      forcePathStyle: pathStyle === true,
      timeoutMs: (timeoutS as number) * 1000,
    };
  } else if (
    s.replayArchive || endpoint || pathStyle || values["s3-timeout"] !== undefined ||
    "s3Timeout" in file.values
  ) {
    throw new RangeError(
      "--replay-archive, --s3-endpoint, --s3-path-style and --s3-timeout need --archive",
    );
  }
  // After the archive: a cluster's Iceberg table needs it.
  checkClusterSettings(s, (key) => {
    const c = CLUSTER_SETTINGS.find((c) => c.key === key)!;
    return values[c.flag] !== undefined || key in file.values;
  });
  return s;
}
