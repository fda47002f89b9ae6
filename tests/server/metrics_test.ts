import assert from "node:assert/strict";
import {
  CONTENT_TYPE,
  Counter,
  exponentialBuckets,
  Gauge,
  Histogram,
  MAX_SERIES,
  Registry,
} from "../../server/metrics.ts";

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Parsed {
  help: Map<string, string>;
  type: Map<string, string>;
  samples: Sample[];
}

/** A strict parser of the text exposition format, line by line. */
function parse(text: string): Parsed {
  assert.ok(text === "" || text.endsWith("\n"), "output ends with a newline");
  const out: Parsed = { help: new Map(), type: new Map(), samples: [] };
  for (const line of text.split("\n").slice(0, -1)) {
    let m = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (m) {
      out.help.set(m[1], m[2].replace(/\\(.)/g, (_, c) => c === "n" ? "\n" : c));
      continue;
    }
    m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (m) {
      out.type.set(m[1], m[2]);
      continue;
    }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `line parses as a sample: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    const body = m[2] ?? "";
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/y;
    let at = 0;
    while (at < body.length) {
      re.lastIndex = at;
      const l = re.exec(body);
      assert.ok(l, `labels parse: ${JSON.stringify(body)} at ${at}`);
      assert.ok(!(l[1] in labels), `label ${l[1]} appears once`);
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => c === "n" ? "\n" : c);
      at = re.lastIndex;
      if (l[3] === "" && at < body.length) assert.fail("labels end after the last comma-less one");
    }
    const raw = m[3];
    const value = raw === "+Inf" ? Infinity : raw === "-Inf" ? -Infinity : Number(raw);
    assert.ok(raw === "NaN" || !Number.isNaN(value), `value parses: ${raw}`);
    out.samples.push({ name: m[1], labels, value });
  }
  return out;
}

function sample(p: Parsed, name: string, labels: Record<string, string> = {}): number | undefined {
  const key = JSON.stringify(Object.entries(labels).sort());
  const found = p.samples.filter((s) =>
    s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === key
  );
  assert.ok(found.length <= 1, `one sample ${name} ${key}`);
  return found[0]?.value;
}

Deno.test("metrics counter renders HELP, TYPE and one line per label set", () => {
  const r = new Registry();
  const rows = r.counter("streamcast_rows_appended_total", "Rows appended to the log.");
  rows.inc({ stream: "trades" });
  rows.inc({ stream: "trades" }, 4);
  rows.inc({ stream: "quotes" }, 2.5);
  const text = r.render();
  const p = parse(text);
  assert.equal(p.type.get("streamcast_rows_appended_total"), "counter");
  assert.equal(p.help.get("streamcast_rows_appended_total"), "Rows appended to the log.");
  assert.equal(p.samples.length, 2);
  assert.equal(sample(p, "streamcast_rows_appended_total", { stream: "trades" }), 5);
  assert.equal(sample(p, "streamcast_rows_appended_total", { stream: "quotes" }), 2.5);
  assert.ok(text.startsWith("# HELP streamcast_rows_appended_total "), text);
  assert.equal(rows.get({ stream: "trades" }), 5);
  assert.equal(rows.get({ stream: "never" }), 0);
  assert.equal(parse(r.render()).samples.length, 2, "get does not create a series");
});

Deno.test("metrics counter without labels and with a pre-bound child", () => {
  const r = new Registry();
  const commits = r.counter("commits_total", "Commits.");
  assert.equal(sample(parse(r.render()), "commits_total"), undefined, "untouched: no sample");
  commits.inc(undefined, 0);
  assert.equal(sample(parse(r.render()), "commits_total"), 0, "inc by 0 shows the series");
  commits.inc();
  commits.inc({});
  assert.equal(sample(parse(r.render()), "commits_total"), 2, "{} is the unlabelled series");

  const frames = r.counter("frames_sent_total", "Frames sent.");
  const child = frames.labels({ stream: "x", mode: "batch" });
  child.inc();
  child.inc(10);
  frames.inc({ mode: "batch", stream: "x" }, 100);
  assert.equal(child.get(), 111, "key order does not split a series");
  const p = parse(r.render());
  assert.equal(sample(p, "frames_sent_total", { stream: "x", mode: "batch" }), 111);
  assert.equal(p.samples.filter((s) => s.name === "frames_sent_total").length, 1);
});

Deno.test("metrics counter refuses to go down", () => {
  const c = new Counter("c_total", "c");
  assert.throws(() => c.inc(undefined, -1), RangeError);
  assert.throws(() => c.inc(undefined, NaN), RangeError);
  assert.throws(() => c.labels({ a: "b" }).inc(-0.5), RangeError);
  assert.throws(() => c.inc(undefined, Infinity), RangeError);
  assert.equal(c.get(), 0);
});

Deno.test("metrics gauge set, inc, dec and child", () => {
  const r = new Registry();
  const g = r.gauge("streamcast_subscribers", "Subscribers by state.");
  g.set(10, { stream: "t", state: "live" });
  g.inc({ stream: "t", state: "live" });
  g.dec({ state: "live", stream: "t" }, 3);
  const catching = g.labels({ stream: "t", state: "catching_up" });
  catching.set(2);
  catching.inc(3);
  catching.dec();
  g.set(-Infinity, { stream: "t", state: "weird" });
  const p = parse(r.render());
  assert.equal(p.type.get("streamcast_subscribers"), "gauge");
  assert.equal(sample(p, "streamcast_subscribers", { stream: "t", state: "live" }), 8);
  assert.equal(sample(p, "streamcast_subscribers", { stream: "t", state: "catching_up" }), 4);
  assert.equal(sample(p, "streamcast_subscribers", { stream: "t", state: "weird" }), -Infinity);
  assert.equal(g.get({ state: "catching_up", stream: "t" }), 4);
});

Deno.test("metrics histogram buckets are cumulative and end with +Inf", () => {
  const r = new Registry();
  const h = r.histogram("streamcast_fsync_seconds", "Fsync latency.", [0.001, 0.01, 0.1, 1]);
  for (const v of [0.0005, 0.001, 0.002, 0.05, 0.05, 0.5, 3, 0.0001]) {
    h.observe(v, { stream: "t" });
  }
  h.labels({ stream: "u" }).observe(0.02);
  const p = parse(r.render());
  assert.equal(p.type.get("streamcast_fsync_seconds"), "histogram");
  const b = (le: string, stream = "t") =>
    sample(p, "streamcast_fsync_seconds_bucket", { stream, le });
  assert.equal(b("0.001"), 3, "le is inclusive");
  assert.equal(b("0.01"), 4);
  assert.equal(b("0.1"), 6);
  assert.equal(b("1"), 7);
  assert.equal(b("+Inf"), 8);
  assert.equal(sample(p, "streamcast_fsync_seconds_count", { stream: "t" }), 8);
  const sum = sample(p, "streamcast_fsync_seconds_sum", { stream: "t" })!;
  assert.ok(Math.abs(sum - 3.6036) < 1e-9, String(sum));
  assert.equal(b("0.01", "u"), 0);
  assert.equal(b("0.1", "u"), 1);
  assert.equal(b("+Inf", "u"), 1);
  // Every series' buckets never decrease and +Inf equals _count.
  for (const stream of ["t", "u"]) {
    const buckets = p.samples.filter((s) =>
      s.name === "streamcast_fsync_seconds_bucket" && s.labels.stream === stream
    );
    assert.deepEqual(buckets.map((s) => s.labels.le), ["0.001", "0.01", "0.1", "1", "+Inf"]);
    for (let i = 1; i < buckets.length; i++) {
      assert.ok(buckets[i].value >= buckets[i - 1].value);
    }
    assert.equal(
      buckets.at(-1)!.value,
      sample(p, "streamcast_fsync_seconds_count", { stream }),
    );
  }
  assert.deepEqual(h.get({ stream: "t" }), { count: 8, sum, buckets: [3, 4, 6, 7, 8] });
  assert.deepEqual(h.get({ stream: "none" }), { count: 0, sum: 0, buckets: [0, 0, 0, 0, 0] });
});

Deno.test("metrics histogram without labels, and bucket validation", () => {
  const h = new Histogram("latency_seconds", "Latency.", [1, 2, Infinity]);
  assert.deepEqual(h.buckets, [1, 2]);
  h.observe(1.5);
  h.observe(NaN);
  const p = parse(h.render());
  assert.equal(sample(p, "latency_seconds_bucket", { le: "1" }), 0);
  assert.equal(sample(p, "latency_seconds_bucket", { le: "2" }), 1);
  assert.equal(sample(p, "latency_seconds_bucket", { le: "+Inf" }), 2, "NaN counts in +Inf");
  assert.equal(sample(p, "latency_seconds_count"), 2);
  assert.ok(Number.isNaN(sample(p, "latency_seconds_sum")));
  assert.throws(() => new Histogram("h", "h", [2, 1]), RangeError);
  assert.throws(() => new Histogram("h", "h", [1, 1]), RangeError);
  assert.throws(() => new Histogram("h", "h", [NaN]), RangeError);
  assert.throws(() => h.observe(1, { le: "x" }), TypeError);
  const only = new Histogram("only_inf", "All in +Inf.", []);
  only.observe(5);
  assert.equal(sample(parse(only.render()), "only_inf_bucket", { le: "+Inf" }), 1);
  assert.deepEqual(exponentialBuckets(0.0001, 10, 3), [0.0001, 0.001, 0.01]);
  assert.throws(() => exponentialBuckets(0, 2, 3), RangeError);
});

Deno.test("metrics label values and help are escaped", () => {
  const r = new Registry();
  const c = r.counter("weird_total", 'Help with a backslash \\ and a\nnewline and "quotes".');
  const nasty = 'a "quoted" \\path\\ with\nnewline';
  c.inc({ value: nasty });
  c.inc({ value: "" }, 2);
  const text = r.render();
  assert.ok(
    text.includes('weird_total{value="a \\"quoted\\" \\\\path\\\\ with\\nnewline"} 1\n'),
    text,
  );
  assert.ok(text.includes("# HELP weird_total Help with a backslash \\\\ and a\\nnewline"), text);
  assert.ok(!text.includes('\\"quotes\\"'), "help does not escape quotes");
  const p = parse(text);
  assert.equal(sample(p, "weird_total", { value: nasty }), 1);
  assert.equal(sample(p, "weird_total", { value: "" }), 2);
  assert.equal(p.help.get("weird_total"), 'Help with a backslash \\ and a\nnewline and "quotes".');
  // Values that look like the cache key's separators do not collide.
  const k = new Counter("k_total", "k");
  k.inc({ a: "x\u00001:y" });
  k.inc({ a: "x" });
  assert.equal(k.get({ a: "x" }), 1);
  assert.equal(k.get({ a: "x\u00001:y" }), 1);
});

Deno.test("metrics names are checked at creation", () => {
  const r = new Registry();
  for (const bad of ["", "1abc", "a-b", "a b", "é", "a{b}"]) {
    assert.throws(() => r.counter(bad, "x"), TypeError, bad);
    assert.throws(() => new Gauge(bad, "x"), TypeError, bad);
    assert.throws(() => r.histogram(bad, "x", [1]), TypeError, bad);
  }
  for (const good of ["a", "_a", "a:b", "streamcast_rows_appended_total", "A1_:"]) {
    r.counter(good, "x");
  }
  const c = r.counter("labelled_total", "x");
  for (const bad of ["1a", "a-b", "__reserved", ""]) {
    assert.throws(() => c.inc({ [bad]: "v" }), TypeError, bad);
  }
  assert.throws(() => c.inc({ a: 5 as unknown as string }), TypeError);
  assert.equal(parse(r.render()).samples.length, 0, "refused label sets leave no series");
});

Deno.test("metrics registry returns the same metric for the same name and kind", () => {
  const r = new Registry();
  const a = r.counter("x_total", "x");
  assert.equal(r.counter("x_total", "x"), a);
  assert.throws(() => r.gauge("x_total", "x"), TypeError);
  const h = r.histogram("h_seconds", "h", [1, 2]);
  assert.equal(r.histogram("h_seconds", "h", [1, 2, Infinity]), h);
  assert.throws(() => r.histogram("h_seconds", "h", [1, 3]), TypeError);
  // Render order is registration order.
  r.gauge("g", "g").set(1);
  a.inc();
  h.observe(1);
  const names = [...parse(r.render()).type.keys()];
  assert.deepEqual(names, ["x_total", "h_seconds", "g"]);
});

Deno.test("metrics collect callbacks run before every render", () => {
  const r = new Registry();
  const g = r.gauge("queue_depth", "Depth.");
  let depth = 3;
  let runs = 0;
  const order: string[] = [];
  r.collect(() => {
    runs++;
    order.push("first");
    g.set(depth, { q: "a" });
  });
  const remove = r.collect(() => order.push("second"));
  assert.equal(sample(parse(r.render()), "queue_depth", { q: "a" }), 3);
  depth = 9;
  assert.equal(sample(parse(r.render()), "queue_depth", { q: "a" }), 9);
  assert.equal(runs, 2);
  remove();
  r.render();
  assert.deepEqual(order, ["first", "second", "first", "second", "first"]);
  r.collect(() => {
    throw new Error("boom");
  });
  assert.throws(() => r.render(), /boom/);
  assert.equal(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
});

Deno.test("metrics a metric holds at most MAX_SERIES series", () => {
  const c = new Counter("many_total", "many");
  for (let i = 0; i < MAX_SERIES; i++) c.inc({ id: String(i) });
  assert.throws(() => c.inc({ id: "one-more" }), RangeError);
  c.inc({ id: "7" });
  assert.equal(c.get({ id: "7" }), 2, "existing series still work");
});

Deno.test("Registry.forget drops the series of one label value from every metric; the rest count on", () => {
  const r = new Registry();
  const rows = r.counter("rows_total", "Rows.");
  const lag = r.gauge("lag", "Lag.");
  const ack = r.histogram("ack_seconds", "Ack.", [0.1, 1]);
  rows.inc({ stream: "a", route: "http" }, 2);
  rows.inc({ route: "websocket", stream: "a" }, 3);
  rows.inc({ stream: "b", route: "http" });
  lag.set(4, { stream: "a" });
  ack.observe(0.5, { stream: "a" });
  ack.observe(0.5, { stream: "b" });
  assert.equal(r.forget("stream", "a"), 4);
  const text = r.render();
  assert.equal(text.includes('stream="a"'), false);
  assert.equal(rows.get({ stream: "b", route: "http" }), 1);
  // A lookup by the same labels after the drop starts a new series at 0.
  assert.equal(rows.get({ stream: "a", route: "http" }), 0);
  rows.inc({ stream: "a", route: "http" });
  assert.equal(rows.get({ route: "http", stream: "a" }), 1);
  assert.equal(r.forget("stream", "nobody"), 0);
});
