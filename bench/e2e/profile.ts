/**
 * Where the server's CPU goes on the hot paths: the server process runs under
 * `deno run --cpu-prof` while the load generator drives it, and the V8 CPU
 * profile is summed into self time per function (and per source file).
 *
 * Scenarios: durable appends with no subscriber (validate, encode, append,
 * group commit); fan-out of single frames and of batched frames (commit,
 * fan-out, batch coalescing); replay of a log to one batched subscriber
 * (catch-up reads, frame rendering).
 *
 * Run alone: deno run -A bench/e2e/profile.ts [--quick]
 */
import type { LoadConfig } from "../harness/fanout_client.ts";
import { type Contender, freePort, measure, Proc, sleep } from "../harness/contenders.ts";
import type { BenchSection } from "../harness/report.ts";
import { fill } from "../harness/trade_log.ts";

const here = new URL(".", import.meta.url).pathname;
const root = new URL("../..", import.meta.url).href;

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface CpuProfile {
  nodes: { id: number; callFrame: CallFrame }[];
  samples: number[];
  timeDeltas: number[];
}

/** Self time per function and per file, ms; `busy` excludes (idle). */
export interface ProfileSummary {
  busyMs: number;
  totalMs: number;
  functions: { name: string; ms: number }[];
  files: { name: string; ms: number }[];
}

function fileOf(url: string): string {
  if (!url) return "";
  if (url.startsWith(root)) return url.slice(root.length);
  const npm = /node_modules\/\.deno\/([^/]+)\/node_modules\/(.*)$/.exec(url) ??
    /\/npm\/registry\.npmjs\.org\/([^/]+\/[^/]+)\/(.*)$/.exec(url);
  if (npm) return `npm:${npm[1]}/${npm[2].split("/").pop()}`;
  return url.replace(/^file:\/\/.*\/(?=[^/]+$)/, "");
}

/** Sums a .cpuprofile into self time per function and per file, from `skipMs` in. */
export function summarize(p: CpuProfile, skipMs = 0): ProfileSummary {
  const byId = new Map(p.nodes.map((n) => [n.id, n.callFrame]));
  const fn = new Map<string, number>();
  const file = new Map<string, number>();
  let total = 0;
  let idle = 0;
  let at = 0;
  for (let i = 0; i < p.samples.length; i++) {
    at += p.timeDeltas[i] / 1000;
    if (at < skipMs) continue;
    // timeDeltas[i] is the time before sample i; charge it to sample i - 1.
    const dt = (p.timeDeltas[i + 1] ?? 0) / 1000;
    const cf = byId.get(p.samples[i])!;
    total += dt;
    if (cf.functionName === "(idle)") {
      idle += dt;
      continue;
    }
    const f = fileOf(cf.url);
    const name = f
      ? `${cf.functionName || "(anonymous)"} (${f}:${cf.lineNumber + 1})`
      : cf.functionName;
    fn.set(name, (fn.get(name) ?? 0) + dt);
    const fk = f || cf.functionName;
    file.set(fk, (file.get(fk) ?? 0) + dt);
  }
  const sorted = (m: Map<string, number>) =>
    [...m].map(([name, ms]) => ({ name, ms })).sort((a, b) => b.ms - a.ms);
  return { busyMs: total - idle, totalMs: total, functions: sorted(fn), files: sorted(file) };
}

/** The main thread's profile: the largest file (the log's chunk worker writes its own). */
async function readProfile(dir: string, skipMs: number): Promise<ProfileSummary> {
  let best: { name: string; size: number } | null = null;
  for await (const e of Deno.readDir(dir)) {
    if (!e.name.endsWith(".cpuprofile")) continue;
    const size = (await Deno.stat(`${dir}/${e.name}`)).size;
    if (!best || size > best.size) best = { name: e.name, size };
  }
  if (!best) throw new Error(`no .cpuprofile in ${dir}`);
  return summarize(JSON.parse(await Deno.readTextFile(`${dir}/${best.name}`)), skipMs);
}

/**
 * A run of the server under the profiler; returns what it did and how long
 * after its start the server was ready (start-up is left out of the profile).
 */
type Scenario = {
  title: string;
  what: string;
  run: (flags: string[]) => Promise<{ result: string; readyMs: number }>;
};

function scenarios(quick: boolean): Scenario[] {
  const timing = quick ? { warmupMs: 300, windowMs: 1500 } : { warmupMs: 800, windowMs: 4000 };
  const fanout = (path: string, inflight: number) => async (flags: string[]) => {
    const c: Contender = {
      name: "profile",
      runtime: "deno",
      server: { mode: "streamcast", inflight },
      path,
    };
    const r = await measure(c, { subs: 100, denoFlags: flags, ...timing });
    return {
      result: `${Math.round(r.rate)} rows/s delivered, server CPU ${r.serverCpu.toFixed(0)} %`,
      readyMs: r.readyMs ?? 0,
    };
  };
  return [
    {
      title: "durable appends, no subscriber",
      what: "1024 concurrent `stream.send`s at a time, fsync on (encode, validate, append, commit)",
      run: async (flags) => {
        const server = new Proc("append server", Deno.execPath(), [
          "run",
          "-A",
          ...flags,
          `${here}../harness/fanout_server.ts`,
          JSON.stringify({
            mode: "streamcast",
            port: freePort(),
            subs: 0,
            rate: 0,
            inflight: 1024,
          }),
        ]);
        await server.line((l) => l === "READY");
        const readyMs = performance.now() - server.started;
        await sleep(200);
        const m0 = await server.mark();
        await sleep(timing.windowMs);
        const m1 = await server.mark();
        await server.stop();
        const s = ((m1.t as number) - (m0.t as number)) / 1000;
        return {
          result: `${Math.round(((m1.rows as number) - (m0.rows as number)) / s)} rows/s appended`,
          readyMs,
        };
      },
    },
    {
      title: "fan-out, single frames, 100 subscribers",
      what: "commit + fan-out, one frame per row per subscriber (groups of 164 rows)",
      run: fanout("/trades", 164),
    },
    {
      title: "fan-out, batched frames, 100 subscribers",
      what: "commit + fan-out + batch coalescing (groups of 1024 rows)",
      run: fanout("/trades?frames=batch", 1024),
    },
    {
      title: "replay to one batched subscriber",
      what: "catch-up reads from the log's segments and frame rendering",
      run: async (flags) => {
        const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
        const rows = quick ? 200_000 : 1_000_000;
        try {
          await fill(dir, rows, false);
          const port = freePort();
          const server = new Proc("replay server", Deno.execPath(), [
            "run",
            "-A",
            ...flags,
            `${here}../harness/replay_server.ts`,
            dir,
            String(port),
          ]);
          await server.line((l) => l === "READY");
          const readyMs = performance.now() - server.started;
          const cfg: LoadConfig = {
            url: `ws://127.0.0.1:${port}/trades?offset=1&frames=batch`,
            subs: 1,
            until: rows,
          };
          const gen = new Proc("replay generator", Deno.execPath(), [
            "run",
            "-A",
            `${here}../harness/fanout_client.ts`,
            JSON.stringify(cfg),
          ]);
          const r = JSON.parse(await gen.line((l) => l.startsWith("{"), 120_000));
          await gen.child.status;
          await server.stop();
          return { result: `${Math.round(r.rate)} rows/s replayed`, readyMs };
        } finally {
          await Deno.remove(dir, { recursive: true });
        }
      },
    },
  ];
}

function table(s: ProfileSummary, n: number): string {
  const pct = (ms: number) => `${(ms / s.busyMs * 100).toFixed(1)} %`;
  const lines = [
    "| self time | share of busy | function (file:line) |",
    "|---|---|---|",
    ...s.functions.slice(0, n).map((f) =>
      `| ${f.ms.toFixed(0)} ms | ${pct(f.ms)} | ${f.name.replace(/\|/g, "\\|")} |`
    ),
  ];
  const files = s.files.slice(0, 6).map((f) => `${f.name} ${pct(f.ms)}`).join(", ");
  return lines.join("\n") + `\n\nBy file: ${files}.`;
}

/** Runs the profiles and returns their section. */
export async function run(quick = false): Promise<BenchSection> {
  const notes: string[] = [];
  const summaries: Record<string, ProfileSummary> = {};
  for (const sc of scenarios(quick)) {
    const dir = await Deno.makeTempDir({ prefix: "streamcast-prof-" });
    try {
      const { result, readyMs } = await sc.run(["--cpu-prof", `--cpu-prof-dir=${dir}`]);
      const s = await readProfile(dir, readyMs);
      summaries[sc.title] = s;
      notes.push(
        `### ${sc.title}`,
        `${sc.what}: ${result}; ${(s.busyMs / 1000).toFixed(1)} s busy of ${
          (s.totalMs / 1000).toFixed(1)
        } s profiled (from the moment the server was listening; start-up left out).`,
        table(s, quick ? 8 : 12),
      );
    } catch (err) {
      notes.push(`### ${sc.title}`, `The profile failed: ${err}`);
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  }
  return {
    title: "Profiles of the hot paths (server process, `deno run --cpu-prof`)",
    baseline:
      "none: self time per function, summed from the V8 CPU profile of the server process (`(program)` is time in the runtime outside JavaScript — Rust ops such as socket writes and fsync calls —, `(garbage collector)` is GC).",
    rows: [],
    notes: [...findings(summaries), ...notes],
  };
}

/** Share of busy time spent in functions whose name matches `re`. */
function share(s: ProfileSummary | undefined, re: RegExp): number {
  if (!s) return NaN;
  return s.functions.filter((f) => re.test(f.name)).reduce((a, f) => a + f.ms, 0) / s.busyMs *
    100;
}

function findings(s: Record<string, ProfileSummary>): string[] {
  const f = (x: number) => (Number.isFinite(x) ? `${x.toFixed(0)} %` : "n/a");
  const single = s["fan-out, single frames, 100 subscribers"];
  const batch = s["fan-out, batched frames, 100 subscribers"];
  const append = s["durable appends, no subscriber"];
  const replay = s["replay to one batched subscriber"];
  return [
    "Summary, as shares of the server's busy time in this run:",
    [
      `- single frames: WebSocket \`send\` (\`op_ws_send_text\`, Deno's op, one per frame) ${
        f(share(single, /^(send |op_ws_send)/))
      }, runtime outside JS ${f(share(single, /^\(program\)/))}, GC ${
        f(share(single, /^\(garbage collector\)/))
      }; streamcast's own fan-out loop (\`push\`, \`#sendText\`, \`count\`) ${
        f(share(single, /^(push|#sendText|count) /))
      };`,
      `- batched frames: \`send\` ${f(share(batch, /^(send |op_ws_send)/))}, runtime outside JS ${
        f(share(batch, /^\(program\)/))
      }, GC ${f(share(batch, /^\(garbage collector\)/))}, \`join\` of a commit's frames ${
        f(share(batch, /^(joined|join) /))
      };`,
      `- appends: schema validation ${f(share(append, /validate/i))}, encoding ${
        f(share(append, /encode/i))
      }, log append + commit (log/) ${
        f(
          append
            ? append.files.filter((x) => x.name.startsWith("log/")).reduce((a, x) => a + x.ms, 0) /
              append.busyMs * 100
            : NaN,
        )
      }, GC ${f(share(append, /^\(garbage collector\)/))};`,
      `- replay: frame rendering (server/frames/text_frames.ts: \`renderBatch\` and its helpers) ${
        f(share(replay, /\(server\/frames\.ts:/))
      }, log reading (log/) ${
        f(
          replay
            ? replay.files.filter((x) => x.name.startsWith("log/")).reduce((a, x) => a + x.ms, 0) /
              replay.busyMs * 100
            : NaN,
        )
      }, \`send\` ${f(share(replay, /^(send |op_ws_send)/))}.`,
    ].join("\n"),
  ];
}

if (import.meta.main) {
  const { renderSection } = await import("../harness/report.ts");
  console.log(renderSection(await run(Deno.args.includes("--quick"))));
}
