// The load generator of bench/e2e/compress.ts: `subs` sockets of the `ws` client
// (so that permessage-deflate is negotiated where the server offers it),
// counting the rows received and the bytes read off each TCP socket (the
// bytes on the wire: frames, headers and compression included).
//
// usage: compress_client.ts CONFIG_JSON
//   {url, subs, deflate, until?}
// Prints "OPEN" once every socket is open; answers "mark" with
// {t, rows, bytes, cpuUs}; with `until`, exits by itself once that many rows
// arrived in all, printing {rows, bytes, ms, cpuUs}. A text frame is
// `\n`-joined rows (a `{` first frame is streamcast's greeting, not counted);
// a binary frame is one zstd frame of such text, decoded with node:zlib; with
// `stream` (compress=zstd-stream), a message of the group's zstd stream.
import process from "node:process";
import { zstdDecompressSync } from "node:zlib";
import WebSocket from "ws";
import * as zw from "@bokuweb/zstd-wasm";
import { stdinLines } from "./stdin_lines.ts";
import { startsZstdFrame, ZstdStreamDecoder } from "../../client/_zstd_stream.ts";

const cfg: { url: string; subs: number; deflate: boolean; stream?: boolean; until?: number } = JSON
  .parse(
    Deno.args[0],
  );
const cpu0 = process.cpuUsage();
const cpuUs = () => {
  const c = process.cpuUsage(cpu0);
  return c.user + c.system;
};
const wall = () => performance.timeOrigin + performance.now();
let rows = 0;
let open = 0;
let firstAt = 0;
const sockets: WebSocket[] = [];
const lines = (b: Uint8Array) => {
  let n = 1;
  for (let k = b.indexOf(10); k !== -1; k = b.indexOf(10, k + 1)) n++;
  return n;
};
// Every subscriber is sent the same zstd frames: each distinct frame (by its
// length and content checksum, its last 4 bytes) is decoded once, so the load
// generator keeps up with 1000 subscribers and the server is what is measured.
const seen = new Map<string, number>();
// compress=zstd-dict: the greeting's dictionary, fetched once; frames that
// arrive before it are counted once it is here.
let dict: Uint8Array | null = null;
let dictWait: Uint8Array[] | null = null;
await zw.init();
const dctx = zw.createDCtx();
const greeted = (g: { dictionary?: string }) => {
  if (!g.dictionary || dict !== null || dictWait !== null) return;
  dictWait = [];
  const u = new URL(cfg.url);
  void fetch(`http://${u.host}${u.pathname}/dictionaries/${g.dictionary}`)
    .then((r) => r.arrayBuffer())
    .then((b) => {
      dict = new Uint8Array(b);
      const w = dictWait!;
      dictWait = null;
      for (const f of w) rows += zstdRows(f);
    });
};
const zstdRows = (b: Uint8Array): number => {
  if (dictWait !== null) {
    dictWait.push(b);
    return 0;
  }
  const n = b.length;
  const key = `${n}:${b[n - 4]},${b[n - 3]},${b[n - 2]},${b[n - 1]}`;
  let r = seen.get(key);
  if (r === undefined) {
    r = lines(dict ? zw.decompressUsingDict(dctx, b, dict) : zstdDecompressSync(b));
    if (seen.size > 100_000) seen.clear();
    seen.set(key, r);
  }
  return r;
};
// compress=zstd-stream: every member of a group is sent the same messages in
// the same order, so the first socket to present a message has presented all
// the ones before it: one decoder, fed each distinct message the first time
// it arrives, follows the group's stream (a self-contained frame, a joiner's
// or replay's, is decoded alone); each message's rows are remembered by its bytes.
const streamSeen = new Map<string, number>();
let group: ZstdStreamDecoder | null = null;
const whole = (b: Uint8Array, max: number) =>
  zstdDecompressSync(b, { maxOutputLength: max }) as Uint8Array;
const latin1 = new TextDecoder("latin1");
const streamRows = (b: Uint8Array): number => {
  const key = latin1.decode(b);
  let r = streamSeen.get(key);
  if (r === undefined) {
    let text: string;
    if (startsZstdFrame(b)) {
      const d = new ZstdStreamDecoder({ whole });
      text = d.decode(b);
      if (d.inFrame) group = d; // the start of the group's next frame
    } else text = group!.decode(b);
    r = text.split("\n").length;
    streamSeen.set(key, r);
  }
  return r;
};
const bytes = () =>
  sockets.reduce(
    (n, s) => n + ((s as unknown as { _socket?: { bytesRead: number } })._socket?.bytesRead ?? 0),
    0,
  );
const done = () => {
  console.log(
    JSON.stringify({ rows, bytes: bytes(), ms: performance.now() - firstAt, cpuUs: cpuUs() }),
  );
  Deno.exit(0);
};

for (let i = 0; i < cfg.subs; i++) {
  const ws = new WebSocket(cfg.url, { perMessageDeflate: cfg.deflate });
  sockets.push(ws);
  ws.on("open", () => {
    if (++open === cfg.subs) console.log("OPEN");
  });
  ws.on("error", (e: Error) => console.error(`client: ${e.message}`));
  ws.on("message", (data: Uint8Array, isBinary: boolean) => {
    if (firstAt === 0) firstAt = performance.now();
    if (isBinary) rows += cfg.stream ? streamRows(data) : zstdRows(data);
    else if (data[0] !== 123) rows += lines(data);
    else greeted(JSON.parse(new TextDecoder().decode(data)));
    if (cfg.until !== undefined && rows >= cfg.until) done();
  });
}

for await (const cmd of stdinLines()) {
  if (cmd === "mark") {
    console.log(JSON.stringify({ t: wall(), rows, bytes: bytes(), cpuUs: cpuUs() }));
  } else if (cmd === "stop") Deno.exit(0);
}
