/**
 * The archive under load: a steady 10k rows/s feed with sealing every second,
 * archived to a real S3 server (s3rver) on 127.0.0.1 — upload throughput and
 * how far the archive lags; and restoring 1M rows from the archive onto a new
 * root (with hydration). Baselines from the same run: for the lag, a bare
 * pipeline that uploads the same chunk bytes with `@aws-sdk/client-s3`
 * (PutObject) to the same server the moment each seal interval ends, its lag
 * sampled the same way; a bare PutObject loop of the same bytes (capacity);
 * and a bare download of the same chunks.
 *
 * Run alone: deno run -A bench/e2e/archive.ts [--quick]
 */
import { Stream } from "../../server/stream/stream.ts";
import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { ArchiveStore } from "../../log/chunk/archive.ts";
import { type BenchSection, median, renderSection } from "../harness/report.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";
import { startS3, stopS3 } from "../../tests/harness/s3.ts";

/** A bare client of the S3 server: the SDK alone, as the bare baselines use it. */
function bareClient(endpoint: string): S3Client {
  return new S3Client({
    endpoint,
    forcePathStyle: true,
    region: "us-east-1",
    credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
  });
}

async function put(client: S3Client, key: string, body: Uint8Array): Promise<void> {
  await client.send(new PutObjectCommand({ Bucket: "archive", Key: key, Body: body }));
}

/**
 * The lag of the simplest archive there is: the feed's chunks (their bytes,
 * in order) each uploaded the moment its seal interval ends, one after the
 * other, and the lag sampled as ours is — every 20 ms after a 2 s warm-up,
 * the age of the oldest row not yet uploaded (a chunk's rows start when its
 * interval starts). What it cannot beat is the interval itself and the upload.
 */
async function bareLag(
  client: S3Client,
  chunks: readonly Uint8Array[],
  intervalMs: number,
): Promise<{ seconds: number[]; uploadMs: number[] }> {
  const t0 = performance.now();
  let uploaded = 0;
  const seconds: number[] = [];
  const uploadMs: number[] = [];
  const uploads = (async () => {
    for (let k = 0; k < chunks.length; k++) {
      const due = t0 + (k + 1) * intervalMs;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const t = performance.now();
      await put(client, `bare-lag/chunks/${k}.ndjson.zst`, chunks[k]);
      uploadMs.push(performance.now() - t);
      uploaded = k + 1;
    }
  })();
  let done = false;
  uploads.finally(() => (done = true));
  while (!done) {
    const now = performance.now();
    // Rows from the start of the first interval not uploaded, while there are any.
    if (now - t0 > 2000 && uploaded < chunks.length) {
      seconds.push((now - (t0 + uploaded * intervalMs)) / 1000);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  await uploads;
  return { seconds, uploadMs };
}

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const s3 = await startS3();
  const archive = { uri: "s3://archive/bench", endpoint: s3.endpoint, forcePathStyle: true };
  const rootA = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
  const rootB = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
  try {
    // 1. A steady feed at 10k rows/s, sealing every second.
    const seconds = quick ? 5 : 20;
    const a = await Stream.open("trades", {
      schema: SCHEMA,
      root: rootA,
      archive,
      logOptions: { sealEveryMs: 1000, chunks: { fanIn: 1000 } },
    });
    const make = tradeRows(9);
    const lagRows: number[] = [];
    const lagSeconds: number[] = [];
    const t0 = performance.now();
    let sent = 0;
    while (performance.now() - t0 < seconds * 1000) {
      const due = Math.floor((performance.now() - t0) / 1000 * 10_000);
      if (due > sent) {
        const n = due - sent;
        await a.sendMany(Array.from({ length: n }, (_, k) => make(sent + k)));
        sent += n;
      }
      const lag = a.archiveLag();
      if (lag && performance.now() - t0 > 2000) {
        lagRows.push(lag.rows);
        lagSeconds.push(lag.seconds);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    const settled = performance.now();
    await a.log!.roll();
    await a.log!.archive.settled(60_000);
    const drainMs = performance.now() - settled;
    const st = a.log!.archive.state!;
    const uploadMBs = st.uploadedBytes / 1e6 / ((performance.now() - t0) / 1000);
    // Bare PutObject (the SDK alone) of the same chunk bytes: capacity, then the lag of a
    // bare seal-and-upload pipeline fed the same chunks at the same interval.
    const chunks = a.log!.chunks.manifest!.chunks;
    const datas: Uint8Array[] = [];
    for (const c of chunks) {
      datas.push(await Deno.readFile(`${rootA}/trades/chunks/${c.sha256}.ndjson.zst`));
    }
    await a.close();
    const client = bareClient(s3.endpoint);
    let bytes = 0;
    const tb = performance.now();
    for (let k = 0; k < datas.length; k++) {
      await put(client, `bare/chunks/${k}.ndjson.zst`, datas[k]);
      bytes += datas[k].length;
    }
    const bareMBs = bytes / 1e6 / ((performance.now() - tb) / 1000);
    const bare = await bareLag(client, datas, 1000);
    client.destroy();
    const bareLagS = median(bare.seconds);

    // 2. Restore a larger history.
    const rows = quick ? 200_000 : 1_000_000;
    const big = await Stream.open("big", {
      schema: SCHEMA,
      root: rootA,
      archive,
      logOptions: { timers: false, chunks: { fanIn: 1000 } },
    });
    for (let i = 0; i < rows; i += 10_000) {
      await big.sendMany(Array.from({ length: 10_000 }, (_, k) => make(i + k)));
      if ((i / 10_000) % 20 === 19) await big.log!.roll();
    }
    await big.close(); // seals and ships the rest
    const tr = performance.now();
    const { stream: restored, report } = await Stream.restore("big", {
      schema: SCHEMA,
      root: rootB,
      archive,
      hydrate: true,
      logOptions: { timers: false },
    });
    const restoreMs = performance.now() - tr;
    const m = restored.log!.chunks.manifest!;
    await restored.close();
    const dl = new ArchiveStore(archive, "big");
    const td = performance.now();
    for (const c of m.chunks) await dl.getChunkBytes(c.sha256);
    const downloadMs = performance.now() - td;
    dl.close();
    return {
      title: "Archive (S3) and restore",
      baseline:
        "for the lag, a bare pipeline uploading the same chunk bytes with @aws-sdk/client-s3 to the same S3 server as each 1 s seal interval ends, sampled the same way; for restore, a bare download of the same chunks.",
      rows: [
        {
          case: `archive lag under a steady 10k rows/s feed for ${seconds} s (seal every 1 s)`,
          ours: median(lagSeconds),
          baseline: bareLagS,
          unit: "s",
          ratio: median(lagSeconds) / bareLagS,
          target: "bounded: keeps up with the feed",
          met: lagSeconds.length > 0 && Math.max(...lagSeconds) < 10,
          note:
            `lag median ${median(lagRows).toFixed(0)} rows / ${median(lagSeconds).toFixed(2)} s, ` +
            `max ${Math.max(...lagRows)} rows / ${
              Math.max(...lagSeconds).toFixed(2)
            } s; the bare pipeline (the same ${datas.length} chunks, each PutObject the moment ` +
            `its 1 s interval ends) lags median ${bareLagS.toFixed(2)} s, max ${
              Math.max(...bare.seconds).toFixed(2)
            } s, its uploads taking median ${median(bare.uploadMs).toFixed(1)} ms; uploaded ` +
            `${st.uploadedChunks} chunks at ${uploadMBs.toFixed(2)} MB/s of feed, against a bare ` +
            `PutObject capacity of ${bareMBs.toFixed(1)} MB/s; drained ${
              drainMs.toFixed(0)
            } ms after the feed stopped`,
        },
        {
          case: `restore ${rows} rows with hydration`,
          ours: restoreMs,
          baseline: downloadMs,
          unit: "ms",
          ratio: restoreMs / downloadMs,
          target: "",
          met: null,
          note: `${m.chunks.length} chunks hydrated; next offset ${report.nextOffset}`,
        },
      ],
      notes: [
        "The S3 server is s3rver (a Node S3 implementation writing to local disk) on 127.0.0.1: absolute figures say more about it than about S3; the ratios compare against the same server. Lag is sampled every 20 ms after a 2 s warm-up: rows the log holds beyond the archive's end, and the age of the oldest of them.",
      ],
    };
  } finally {
    await Deno.remove(rootA, { recursive: true }).catch(() => {});
    await Deno.remove(rootB, { recursive: true }).catch(() => {});
    await stopS3(s3);
  }
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
