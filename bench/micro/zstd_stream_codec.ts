/**
 * compress=zstd-stream's codec alone (no sockets, one process), at one row
 * per commit, each figure against its peers measured in the same run:
 *
 * - bytes per row of the message payload (WebSocket frame headers, 2 bytes
 *   a message for all of them, left out) for the text, a zstd frame per
 *   commit (`compress=zstd`: node:zlib), a zstd frame with the stream's
 *   raw-content dictionary (`compress=zstd-dict`: libzstd), zstd-stream (one
 *   context, a flush per commit: server/frames/zstd_stream.ts), and
 *   permessage-deflate's equivalent (node:zlib `deflateRaw` with its context
 *   kept and a `Z_SYNC_FLUSH` per message, the 4-byte tail removed, as `ws`
 *   does), for trade rows and the nested row;
 * - compress CPU per row (this process's CPU time, `process.cpuUsage`) of
 *   each: zstd-stream and the per-frame codecs compress a commit once for
 *   every subscriber; deflate does this once per connection;
 * - node:zlib's streaming zstd compressor (asynchronous: write, then flush
 *   with a callback) against the FFI context, the choice the server made;
 * - decode CPU per message on the client: the client's decoder
 *   (client/_zstd_stream.ts, fzstd) against `JSON.parse` of the row (what the
 *   client does with every row anyway), against node:zlib's streaming
 *   decoder (asynchronous) and against libzstd's own streaming decoder
 *   through FFI (what a WebAssembly build of libzstd could approach).
 *
 * Run alone: deno run --config deno.dev.json -A bench/run.ts --only zstd_stream [--quick]
 */
import process from "node:process";
import { constants, createDeflateRaw, createZstdCompress, createZstdDecompress } from "node:zlib";
import { type BenchRow, benchRow as row, type BenchSection, median } from "../harness/report.ts";
import { type Kind, rowsOf } from "../harness/compress_rows.ts";
import { zstdFrame } from "../../server/frames/compressed_frames.ts";
import { FrameDictionary } from "../../server/frames/frame_dictionary.ts";
import {
  ZSTD_STREAM_PARAMS,
  ZSTD_STREAM_WINDOW_LOG,
  ZstdStream,
} from "../../server/frames/zstd_stream.ts";
import { ZstdStreamDecoder } from "../../client/_zstd_stream.ts";

const cpuUs = (): number => {
  const c = process.cpuUsage();
  return c.user + c.system;
};

interface Measured {
  /** Payload bytes per row. */
  bytes: number;
  /** CPU µs per row (median of the rounds). */
  cpuUs: number;
}

/** Runs `compress` over every commit, `rounds` times with a fresh state each time. */
async function measure(
  commits: string[],
  rounds: number,
  make: () => {
    compress(text: string): Uint8Array | number | Promise<number>;
    close?(): void;
  },
): Promise<Measured> {
  const cpu: number[] = [];
  let bytes = 0;
  for (let r = 0; r < rounds; r++) {
    const c = make();
    bytes = 0;
    const t0 = cpuUs();
    for (const text of commits) {
      const out = c.compress(text);
      bytes += typeof out === "number" ? out : out instanceof Promise ? await out : out.length;
    }
    cpu.push((cpuUs() - t0) / commits.length);
    c.close?.();
  }
  return { bytes: bytes / commits.length, cpuUs: median(cpu) };
}

/** permessage-deflate's sender: one deflateRaw context kept, a sync flush per message. */
function deflateContext() {
  const d = createDeflateRaw({ windowBits: 15 });
  let got = 0;
  d.on("data", (b: Uint8Array) => got += b.length);
  return {
    compress(text: string): Promise<number> {
      got = 0;
      d.write(text);
      return new Promise((done) => d.flush(constants.Z_SYNC_FLUSH, () => done(got - 4)) // RFC 7692 drops 00 00 FF FF
      );
    },
    close: () => d.close(),
  };
}

/** node:zlib's streaming zstd compressor, a group context's parameters, a flush per commit (asynchronous). */
function nodeZstdStream() {
  const z = createZstdCompress({
    params: {
      [constants.ZSTD_c_compressionLevel]: ZSTD_STREAM_PARAMS.level,
      [constants.ZSTD_c_minMatch]: ZSTD_STREAM_PARAMS.minMatch,
      [constants.ZSTD_c_hashLog]: ZSTD_STREAM_PARAMS.hashLog,
      [constants.ZSTD_c_chainLog]: ZSTD_STREAM_PARAMS.chainLog,
      [constants.ZSTD_c_windowLog]: ZSTD_STREAM_WINDOW_LOG,
      [constants.ZSTD_c_checksumFlag]: 1,
    },
  });
  let got = 0;
  z.on("data", (b: Uint8Array) => got += b.length);
  return {
    compress(text: string): Promise<number> {
      got = 0;
      z.write(text);
      return new Promise((done) => z.flush(constants.ZSTD_e_flush, () => done(got)));
    },
    close: () => z.close(),
  };
}

// libzstd's streaming decoder through FFI: the floor a compiled decoder sets.
function libzstdDecoder(): { decode(m: Uint8Array): number; close(): void } {
  const lib = Deno.dlopen(
    "libzstd.so.1",
    {
      ZSTD_createDCtx: { parameters: [], result: "pointer" },
      ZSTD_freeDCtx: { parameters: ["pointer"], result: "usize" },
      ZSTD_decompressStream: { parameters: ["pointer", "buffer", "buffer"], result: "usize" },
      ZSTD_isError: { parameters: ["usize"], result: "u32" },
    } as const,
  );
  const z = lib.symbols;
  const dctx = z.ZSTD_createDCtx();
  const outBuf = new Uint8Array(4 << 20);
  const inBuf = new Uint8Array(4 << 20);
  const ptr = (b: Uint8Array) => BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b)));
  const ins = new BigUint64Array([ptr(inBuf), 0n, 0n]);
  const outs = new BigUint64Array([ptr(outBuf), BigInt(outBuf.length), 0n]);
  return {
    decode(m: Uint8Array): number {
      inBuf.set(m);
      ins[1] = BigInt(m.length);
      ins[2] = 0n;
      outs[2] = 0n;
      while (ins[2] < ins[1]) {
        if (z.ZSTD_isError(z.ZSTD_decompressStream(dctx, outs, ins))) throw new Error("libzstd");
      }
      return new TextDecoder().decode(outBuf.subarray(0, Number(outs[2]))).length;
    },
    close() {
      z.ZSTD_freeDCtx(dctx);
      lib.close();
    },
  };
}

/** A streaming context with other parameters than the server's, through FFI: the tuning behind ZSTD_STREAM_PARAMS. */
interface Variant {
  name: string;
  level: number;
  windowLog: number;
  minMatch?: number;
  hashLog?: number;
  chainLog?: number;
  /** ZSTD_c_strategy (1 fast … 5 lazy2 … 7 btopt … 9 btultra2). */
  strategy?: number;
  searchLog?: number;
  targetLength?: number;
  /** ZSTD_c_literalCompressionMode (experimental): 1 always Huffman, 2 never. */
  literals?: number;
  /** ZSTD_c_targetCBlockSize (experimental). */
  targetCBlockSize?: number;
  /** A zstd dictionary loaded into the context (ZSTD_CCtx_loadDictionary): every frame uses it. */
  dictionary?: Uint8Array;
}

/** Compresses `commits` one flush each with `v`: bytes and CPU per row, the context's memory, the messages. */
function variantRun(
  commits: string[],
  v: Variant,
  rounds: number,
): { bytes: number; cpuUs: number; memory: number; messages: Uint8Array[] } {
  const lib = Deno.dlopen(
    "libzstd.so.1",
    {
      ZSTD_createCCtx: { parameters: [], result: "pointer" },
      ZSTD_freeCCtx: { parameters: ["pointer"], result: "usize" },
      ZSTD_sizeof_CCtx: { parameters: ["pointer"], result: "usize" },
      ZSTD_CCtx_setParameter: { parameters: ["pointer", "i32", "i32"], result: "usize" },
      ZSTD_compressStream2: { parameters: ["pointer", "buffer", "buffer", "i32"], result: "usize" },
      ZSTD_CCtx_loadDictionary: { parameters: ["pointer", "buffer", "usize"], result: "usize" },
      ZSTD_isError: { parameters: ["usize"], result: "u32" },
    } as const,
  );
  const z = lib.symbols;
  const enc = new TextEncoder();
  const inBuf = new Uint8Array(4 << 20);
  const outBuf = new Uint8Array(4 << 20);
  const ptr = (b: Uint8Array) => BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b)));
  const ins = new BigUint64Array([ptr(inBuf), 0n, 0n]);
  const outs = new BigUint64Array([ptr(outBuf), BigInt(outBuf.length), 0n]);
  const cpu: number[] = [];
  let messages: Uint8Array[] = [];
  let memory = 0;
  try {
    for (let r = 0; r < rounds; r++) {
      const cctx = z.ZSTD_createCCtx();
      const params: [number, number | undefined][] = [
        [100, v.level],
        [101, v.windowLog],
        [201, 1],
        [105, v.minMatch],
        [102, v.hashLog],
        [103, v.chainLog],
        [107, v.strategy],
        [104, v.searchLog],
        [106, v.targetLength],
        [1002, v.literals],
        [1003, v.targetCBlockSize],
      ];
      for (const [k, x] of params) {
        if (x !== undefined && z.ZSTD_isError(z.ZSTD_CCtx_setParameter(cctx, k, x))) {
          throw new Error(`${v.name}: parameter ${k} = ${x} refused`);
        }
      }
      const d = v.dictionary;
      if (d && z.ZSTD_isError(z.ZSTD_CCtx_loadDictionary(cctx, d, BigInt(d.length)))) {
        throw new Error(`${v.name}: the dictionary was refused`);
      }
      messages = [];
      const t0 = cpuUs();
      for (const text of commits) {
        ins[1] = BigInt(enc.encodeInto(text, inBuf).written);
        ins[2] = 0n;
        outs[2] = 0n;
        if (z.ZSTD_isError(z.ZSTD_compressStream2(cctx, outs, ins, 1))) throw new Error(v.name);
        messages.push(outBuf.slice(0, Number(outs[2])));
      }
      cpu.push((cpuUs() - t0) / commits.length);
      memory = Number(z.ZSTD_sizeof_CCtx(cctx));
      z.ZSTD_freeCCtx(cctx);
    }
  } finally {
    lib.close();
  }
  const bytes = messages.reduce((n, m) => n + m.length, 0) / commits.length;
  return { bytes, cpuUs: median(cpu), memory, messages };
}

/** A zstd dictionary of `maxBytes` trained (`zstd --train`) on `samples`, one frame's text each. */
async function trainedDictionary(samples: string[], maxBytes: number): Promise<Uint8Array> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-train-" });
  try {
    await Deno.mkdir(`${dir}/in`);
    for (const [i, t] of samples.entries()) await Deno.writeTextFile(`${dir}/in/${i}`, t);
    const out = `${dir}/dict`;
    const args = ["-q", "--train", "-r", `${dir}/in`, "-o", out, `--maxdict=${maxBytes}`];
    const o = await new Deno.Command("zstd", { args, stdout: "null", stderr: "piped" }).output();
    if (!o.success) throw new Error(`zstd --train: ${new TextDecoder().decode(o.stderr)}`);
    return await Deno.readFile(out);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Decode CPU µs per message, median of `rounds`. */
async function decodeCpu(
  messages: Uint8Array[],
  rounds: number,
  make: () => { decode(m: Uint8Array): unknown; close?(): void },
): Promise<number> {
  const cpu: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const d = make();
    const t0 = cpuUs();
    for (const m of messages) {
      const x = d.decode(m);
      if (x instanceof Promise) await x;
    }
    cpu.push((cpuUs() - t0) / messages.length);
    d.close?.();
  }
  return median(cpu);
}

function nodeZstdDecoder() {
  const d = createZstdDecompress();
  let got = 0;
  d.on("data", (b: Uint8Array) => got += b.length);
  return {
    decode(m: Uint8Array): Promise<number> {
      got = 0;
      d.write(m);
      return new Promise((done) => d.flush(constants.ZSTD_e_flush, () => done(got)));
    },
    close: () => d.close(),
  };
}

/** Runs the zstd-stream codec benchmarks. */
export async function run(quick: boolean): Promise<BenchSection[]> {
  const n = quick ? 4_000 : 20_000;
  const rounds = quick ? 3 : 5;
  const bytesRows: BenchRow[] = [];
  const cpuRows: BenchRow[] = [];
  const decodeRows: BenchRow[] = [];
  const tuneRows: BenchRow[] = [];
  const notes: string[] = [];
  for (const kind of ["trade", "nested"] as Kind[]) {
    const rows = rowsOf(kind, n + 1024);
    const lines = rows.map((r, i) => `[${i + 1},${r}]`);
    // The dictionary: the 1024 rows before the measured ones, as the server builds it.
    const dict = FrameDictionary.fromLines(lines.slice(0, 1024));
    if (dict === null) {
      throw new Error("bench zstd_stream: libzstd did not load (needs --allow-ffi)");
    }
    const commits = lines.slice(1024);
    const text = commits.reduce((s, t) => s + new TextEncoder().encode(t).length, 0) / n;
    const zstd = await measure(commits, rounds, () => ({ compress: zstdFrame }));
    const zdict = await measure(commits, rounds, () => ({ compress: (t) => dict.compress(t) }));
    const stream = await measure(commits, rounds, () => {
      const g = ZstdStream.create()!;
      return { compress: (t) => g.compressCommit(t), close: () => g.close() };
    });
    const deflate = await measure(commits, rounds, deflateContext);
    const label = kind === "trade" ? "trade row" : "nested row";
    bytesRows.push(
      row(`${label}: zstd-stream vs text`, stream.bytes, text, "B/row"),
      row(`${label}: zstd-stream vs zstd (a frame per commit)`, stream.bytes, zstd.bytes, "B/row"),
      row(`${label}: zstd-stream vs zstd + dictionary`, stream.bytes, zdict.bytes, "B/row"),
      {
        ...row(
          `${label}: zstd-stream vs permessage-deflate (context kept)`,
          stream.bytes,
          deflate.bytes,
          "B/row",
          "≤ 1×",
          stream.bytes <= deflate.bytes,
        ),
        limit: "each flushed zstd block carries a 3-byte block header, a literals header and a " +
          "sequences header with its own entropy state, where a deflate block flushed with " +
          "Z_SYNC_FLUSH costs about a byte once permessage-deflate strips its 4-byte tail; " +
          "level 9 gains 1 % and a 1 MiB window 2 % (SPEC §2.6.1)",
      },
    );
    cpuRows.push(
      row(`${label}: zstd-stream vs zstd (a frame per commit)`, stream.cpuUs, zstd.cpuUs, "µs/row"),
      row(`${label}: zstd-stream vs zstd + dictionary`, stream.cpuUs, zdict.cpuUs, "µs/row"),
      row(
        `${label}: zstd-stream (once) vs permessage-deflate (one connection)`,
        stream.cpuUs,
        deflate.cpuUs,
        "µs/row",
        "",
        null,
        "deflate compresses each message once per connection: at S subscribers its CPU per row is S times this, zstd-stream's stays once per group",
      ),
    );
    if (kind === "trade") {
      const nodeStream = await measure(commits, rounds, nodeZstdStream);
      cpuRows.push(
        row(
          `${label}: zstd-stream through FFI vs node:zlib's streaming zstd (async flush)`,
          stream.cpuUs,
          nodeStream.cpuUs,
          "µs/row",
          "",
          null,
          `same parameters; bytes ${stream.bytes.toFixed(1)} against ${
            nodeStream.bytes.toFixed(1)
          } a row`,
        ),
      );
      // Decoding the messages of one group, in order.
      const g = ZstdStream.create()!;
      const messages = commits.map((t) => g.compressCommit(t));
      const memory = g.memoryBytes;
      g.close();
      const fzstd = await decodeCpu(messages, rounds, () => new ZstdStreamDecoder());
      const parse = await decodeCpu(
        commits.map((t) => new TextEncoder().encode(t)),
        rounds,
        () => {
          const dec = new TextDecoder();
          return { decode: (b: Uint8Array) => JSON.parse(dec.decode(b)) };
        },
      );
      const nodeDec = await decodeCpu(messages, rounds, nodeZstdDecoder);
      const native = await decodeCpu(messages, rounds, libzstdDecoder);
      decodeRows.push(
        row(
          `${label}: client decoder (fzstd) vs UTF-8 decode + JSON.parse`,
          fzstd,
          parse,
          "µs/msg",
        ),
        row(
          `${label}: client decoder (fzstd) vs node:zlib streaming (async)`,
          fzstd,
          nodeDec,
          "µs/msg",
        ),
        row(`${label}: client decoder (fzstd) vs libzstd streaming (FFI)`, fzstd, native, "µs/msg"),
      );
      const window = 2 ** ZSTD_STREAM_WINDOW_LOG;
      notes.push(
        `A group's context held ${memory} bytes (ZSTD_sizeof_CCtx, window ${window} bytes) after ${n} commits.`,
      );
    }
    // The tuning: other levels, match lengths, tables and windows against the server's.
    const ours: Variant = {
      name: "ours",
      windowLog: ZSTD_STREAM_WINDOW_LOG,
      ...ZSTD_STREAM_PARAMS,
    };
    const variants: Variant[] = [
      { name: "level 1", level: 1, windowLog: ZSTD_STREAM_WINDOW_LOG },
      { name: "level 3, 4-byte matches", level: 3, windowLog: ZSTD_STREAM_WINDOW_LOG, minMatch: 4 },
      { name: "level 6, its own tables", level: 6, windowLog: ZSTD_STREAM_WINDOW_LOG },
      { ...ours, name: "level 9", level: 9 },
      { ...ours, name: "16 KiB window", windowLog: 14, hashLog: 14, chainLog: 14 },
      { ...ours, name: "1 MiB window", windowLog: 20 },
      // What else libzstd offers against the per-flush cost (SPEC §2.6.1, "Bytes"):
      { ...ours, name: "lazy2, 64 searches", strategy: 5, searchLog: 6 },
      { ...ours, name: "level 6, literals always Huffman-coded", literals: 1 },
      { ...ours, name: "level 6, literals never Huffman-coded", literals: 2 },
      { ...ours, name: "level 6, targetCBlockSize 1340", targetCBlockSize: 1340 },
      {
        ...ours,
        name: "btopt, targetLength 999, 64 searches",
        strategy: 7,
        targetLength: 999,
        searchLog: 6,
      },
      { name: "level 19 (btultra2)", level: 19, windowLog: ZSTD_STREAM_WINDOW_LOG },
      { name: "level 22, 1 MiB window", level: 22, windowLog: 20 },
      {
        ...ours,
        name: "a 4 KiB trained dictionary (fzstd reads none)",
        dictionary: await trainedDictionary(lines.slice(0, 1024), 4096),
      },
    ];
    const base = variantRun(commits, ours, rounds);
    const fzstdOf = (messages: Uint8Array[]) =>
      decodeCpu(messages, rounds, () => new ZstdStreamDecoder());
    const baseDecode = kind === "trade" ? await fzstdOf(base.messages) : 0;
    for (const v of variants) {
      const x = variantRun(commits, v, rounds);
      const what = `${label}: ${v.name} vs the server's parameters`;
      tuneRows.push(
        row(`${what}, bytes`, x.bytes, base.bytes, "B/row"),
        row(`${what}, compress CPU`, x.cpuUs, base.cpuUs, "µs/row"),
      );
      if (kind === "trade") {
        tuneRows.push(row(`${what}, context memory`, x.memory / 1e6, base.memory / 1e6, "MB"));
        if (v.windowLog !== ZSTD_STREAM_WINDOW_LOG) {
          tuneRows.push(
            row(`${what}, fzstd decode`, await fzstdOf(x.messages), baseDecode, "µs/msg"),
          );
        }
      }
    }
  }
  notes.push(
    `${n} rows, one per commit, after 1024 rows that make the dictionary; the median of ${rounds} rounds, each with fresh contexts. ` +
      "Bytes are message payloads: on the wire each message adds a 2-byte WebSocket header (payloads under 126 bytes), the same for every codec.",
  );
  return [
    {
      title: "compress=zstd-stream: bytes per row, one row per commit (codec only)",
      baseline:
        "the text, zstd per frame, zstd + dictionary and per-connection deflate, same rows, same run",
      rows: bytesRows,
    },
    {
      title: "compress=zstd-stream: compress CPU per row, one row per commit (codec only)",
      baseline: "the other codecs on the same commits, same process, same run",
      rows: cpuRows,
    },
    {
      title: "compress=zstd-stream: the codec's parameters, one row per commit",
      baseline:
        "the server's parameters (ZSTD_STREAM_PARAMS, a 64 KiB window), same rows, same run",
      rows: tuneRows,
    },
    {
      title: "compress=zstd-stream: client decode CPU per message, one trade row per message",
      baseline: "JSON.parse of the row, node:zlib's and libzstd's streaming decoders, same run",
      rows: decodeRows,
      notes,
    },
  ];
}
