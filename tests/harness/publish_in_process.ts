// An in-process server with a durable stream opened for publishing, for the publish tests.
import { serve, type Server, Stream, TokenTable } from "../../mod.ts";
import type { LogOptions } from "../../log/mod.ts";
import { Logger } from "../../common/logger.ts";
import { rmrf, tempDir } from "./util.ts";

export const SCHEMA = {
  type: "object",
  properties: { sym: { type: "string" }, px: { type: "number" } },
  required: ["sym", "px"],
};

export interface Fixture {
  server: Server;
  stream: Stream;
  root: string;
  http: string;
  ws: string;
  close(): Promise<void>;
}

export async function startFixture(
  o: {
    publish?: boolean;
    maxPublishBytes?: number;
    maxInFlight?: number;
    maxPublishInflightBytes?: number;
    maxPublishServerBytes?: number;
    tokens?: unknown;
    root?: string;
    logOptions?: LogOptions;
  } = {},
): Promise<Fixture> {
  const root = o.root ?? await tempDir();
  const stream = await Stream.open("t", {
    root,
    schema: SCHEMA,
    ...(o.logOptions ? { logOptions: o.logOptions } : {}),
  });
  const other = await Stream.open("ro", { root, schema: SCHEMA });
  const server = serve([stream, other], {
    port: 0,
    onListen: () => {},
    logger: Logger.silent(),
    publish: o.publish === false ? [] : ["t"],
    ...(o.maxPublishBytes ? { maxPublishBytes: o.maxPublishBytes } : {}),
    ...(o.maxInFlight ? { maxInFlight: o.maxInFlight } : {}),
    ...(o.maxPublishInflightBytes ? { maxPublishInflightBytes: o.maxPublishInflightBytes } : {}),
    ...(o.maxPublishServerBytes ? { maxPublishServerBytes: o.maxPublishServerBytes } : {}),
    ...(o.tokens ? { tokens: TokenTable.parse(o.tokens) } : {}),
  });
  const http = server.url;
  return {
    server,
    stream,
    root,
    http,
    ws: http.replace("http", "ws"),
    async close() {
      await server.shutdown();
      if (!o.root) await rmrf(root);
    },
  };
}

export async function post(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, { method: "POST", body, headers });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}
