// The web viewer's script, served as /_/viewer.js: the streams with their
// rates, the newest rows of one stream (of a keyed stream, one line per key:
// its snapshot, then each key's changes), a chart of a numeric column, and
// replay from an offset. It runs in the browser on the project's own client
// (/_/client.js, a bundle of client/connect.ts), with no framework and no
// build step. The page (server/viewer/page.ts) calls startViewer(connect).

/** Rows kept in the table. */
const TABLE_ROWS = 50;
/** Keys shown in a keyed stream's table (the most recently changed). */
const KEY_ROWS = 500;
/** Points kept per chart series. */
const CHART_POINTS = 1500;
/** How often the streams list is refreshed. */
const POLL_MS = 1000;
/** Rows of history shown when the page opens. */
const INITIAL_ROWS = 300;

const COLORS = { live: "#0b5cad", replay: "#8a4b00", grid: "#d0d7de", text: "#57606a" };

/**
 * The viewer's own link to `stream`, carrying the page's access token on (a
 * server with a tokens file refuses the page without it).
 *
 * @example
 * streamHref("trades", "tok-0123456789abcdef") // "/trades?access_token=tok-0123456789abcdef"
 * streamHref("", undefined) // "/"
 */
export function streamHref(stream, token) {
  const path = "/" + encodeURIComponent(stream);
  return token ? `${path}?access_token=${encodeURIComponent(token)}` : path;
}

/**
 * The access token the page was opened with (`?access_token=…`), or undefined.
 *
 * @example
 * pageToken("?access_token=tok-0123456789abcdef&x=1") // "tok-0123456789abcdef"
 */
export function pageToken(search) {
  return new URLSearchParams(search).get("access_token") || undefined;
}

/** Starts the viewer; `connect` is the client's connect(). */
export function startViewer(connect) {
  const $ = (id) => document.getElementById(id);
  // A server with a tokens file: the page is opened with ?access_token=…, and
  // everything the page does carries it on: its links (streamHref), its
  // subscription (connect's token: the bearer subprotocol) and its polls
  // (Authorization). It is never printed.
  const token = pageToken(location.search);
  const auth = token ? { authorization: `Bearer ${token}` } : {};
  const ui = {
    conn: $("conn"),
    reconnects: $("reconnects"),
    wire: $("wire"),
    streams: $("streams"),
    streamsNote: $("streams-note"),
    form: $("replay"),
    from: $("replay-from"),
    recent: $("replay-recent"),
    sinceForm: $("since-form"),
    since: $("replay-since"),
    notice: $("notice"),
    info: $("replay-info"),
    canvas: $("chart"),
    col: $("chart-col"),
    key: $("chart-key"),
    rows: $("rows"),
    filter: $("filter"),
    where: $("filter-where"),
    filterClear: $("filter-clear"),
    filterInfo: $("filter-info"),
    filterError: $("filter-error"),
  };
  // where=: the filter of the subscription shown (JSON text, or undefined: every row).
  let where;
  let heads = JSON.parse($("heads").textContent);
  const name = pickStream(heads);
  $("stream-name").textContent = "· " + (name || "(unnamed)");
  document.title = `streamcast · ${name || "(unnamed)"}`;
  const rates = new Map();

  /** What the subscription shown has delivered; reset by every (re)subscribe. */
  let view = null;
  let sub = null;
  let attempt = 0;
  let dirty = false;

  function pickStream(list) {
    const asked = decodeURIComponent(location.pathname.slice(1));
    if (list.some((h) => h.stream === asked) || list.length === 0) return asked;
    history.replaceState(null, "", streamHref(list[0].stream, token));
    return list[0].stream;
  }

  function setConn(state, text) {
    if (ui.conn.dataset.state === state && ui.conn.textContent === text) return;
    ui.conn.dataset.state = state;
    ui.conn.textContent = text;
  }

  // ---- the streams list -------------------------------------------------

  async function poll() {
    try {
      const res = await fetch("/_/streams", { cache: "no-store", headers: auth });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      heads = await res.json();
      ui.streamsNote.textContent = "";
      // rows/s: how far each end offset moved since the previous poll.
      const now = performance.now();
      for (const h of heads) {
        const r = rates.get(h.stream);
        const perS = r && h.end_offset !== null && now > r.t
          ? ((h.end_offset - r.end) * 1000) / (now - r.t)
          : null;
        rates.set(h.stream, { end: h.end_offset, t: now, perS });
      }
    } catch (err) {
      ui.streamsNote.textContent = `The server does not answer (${err.message}); retrying.`;
      rates.clear();
    }
    renderStreams();
    setTimeout(poll, POLL_MS);
  }

  function renderStreams() {
    const body = ui.streams.tBodies[0];
    body.replaceChildren(...heads.map((h) => {
      const tr = document.createElement("tr");
      if (h.stream === name) tr.setAttribute("aria-current", "page");
      const th = document.createElement("th");
      th.scope = "row";
      const a = document.createElement("a");
      a.href = streamHref(h.stream, token);
      a.textContent = h.stream || "(unnamed)";
      th.append(a);
      const perS = rates.get(h.stream)?.perS;
      tr.append(
        th,
        td(h.end_offset === null ? "ephemeral" : fmtInt(h.end_offset)),
        td(perS === null || perS === undefined ? "–" : fmtRate(perS)),
        td(fmtInt(h.subscribers)),
      );
      tr.dataset.stream = h.stream;
      return tr;
    }));
  }

  // ---- the subscription -------------------------------------------------

  /**
   * Subscribes at `offset` (undefined: live), or at the time `since` (text the
   * server parses), with the filter `filter` (JSON text; null: every row;
   * absent: the filter now shown); the current subscription runs until this
   * one is up.
   */
  async function subscribe(offset, filter = where, since = undefined, snapshot = false) {
    const mine = ++attempt;
    ui.notice.textContent = "";
    if (!sub) setConn("connecting", "connecting…");
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/` +
      encodeURIComponent(name);
    let next;
    try {
      next = await connect(url, {
        offset,
        since,
        ...(snapshot ? { snapshot } : {}),
        token,
        ...(filter != null ? { where: filter } : {}),
        reconnect: true,
        onReconnect: (e) => {
          if (sub !== next) return;
          const at = e.resumeAt === null ? "live" : `at offset ${fmtInt(e.resumeAt)}`;
          setConn(
            "reconnecting",
            `reconnecting ${at} (attempt ${e.attempt}, in ${e.delayMs} ms)`,
          );
          ui.notice.textContent = e.error.message;
          ui.reconnects.textContent = `reconnects: ${next.reconnects} (attempt ${e.attempt})`;
        },
      });
    } catch (err) {
      if (mine === attempt) {
        // A filter the server refuses: its detail, beside the filter box.
        const refused = typeof err.detail === "string" && err.detail.startsWith("where:");
        if (refused) ui.filterError.textContent = `The server refused this filter: ${err.detail}`;
        else ui.notice.textContent = err.message;
      }
      if (!sub) setConn("closed", "not connected");
      return false;
    }
    if (mine !== attempt) {
      next.close();
      return false;
    }
    const old = sub;
    sub = next;
    old?.close();
    where = filter ?? undefined;
    view = newView(next.greeting);
    onGreeting(next.greeting);
    // The table and chart switch now, with the line saying which rows they
    // show: left to the next animation frame, the old subscription's rows
    // would sit under the new filter's line until then.
    render();
    dirty = false;
    ui.filterError.textContent = "";
    ui.filterInfo.textContent = filter == null
      ? "All rows."
      : `Only rows where ${JSON.stringify(next.greeting.where)}; offsets skip the others.`;
    run(next);
    return true;
  }

  async function run(s) {
    try {
      for await (const [offset, msg] of s) {
        if (s !== sub) break;
        ingest(s, offset, msg);
      }
      if (s === sub) setConn("closed", "closed");
    } catch (err) {
      if (s !== sub) return;
      setConn("closed", "stopped");
      ui.notice.textContent = err.message;
    }
  }

  function newView(g) {
    const props = g.schema?.properties ?? {};
    const columns = Object.keys(props).map((c) => ({ name: c, type: colType(props[c]) }));
    const timeCol = columns.find((c) =>
      c.type === "integer" && /(^|_)(ts|time|timestamp)$/i.test(c.name)
    );
    const keyCol = columns.find((c) => c.type === "string");
    const numCols = columns.filter((c) =>
      (c.type === "number" || c.type === "integer") && c !== timeCol && !/(^|_)id$/i.test(c.name)
    );
    // A keyed stream: one line per key, its latest row.
    const key = heads.find((h) => h.stream === name)?.key ?? null;
    return {
      id: attempt,
      greeting: null,
      key,
      byKey: new Map(),
      snapshot: null,
      columns,
      timeCol,
      keyCol,
      numCols,
      rows: [],
      series: new Map(),
      durable: g.durable,
      liveFrom: null,
      replayFrom: null,
      replayed: 0,
      live: 0,
      lastOffset: null,
      columnsChanged: true,
    };
  }

  /** A greeting: the subscription's first, or a new one after a reconnect. */
  function onGreeting(g) {
    // After a reconnect, the error that caused it is history.
    if (view.greeting !== null) ui.notice.textContent = "";
    view.greeting = g;
    ui.reconnects.textContent = `reconnects: ${sub.reconnects}`;
    ui.form.querySelector("fieldset").disabled = !g.durable;
    if (!g.durable) {
      setConn("live", "live (ephemeral: no replay)");
      return;
    }
    view.liveFrom = g.replay ? g.replay[1] : g.end_offset;
    if (g.snapshot) {
      view.snapshot = g.snapshot;
      if (view.replayFrom === null) view.replayFrom = 0;
      setConn(
        g.snapshot.keys > 0 ? "replaying" : "live",
        `snapshot of ${fmtInt(g.snapshot.keys)} keys below offset ${fmtInt(g.snapshot.end)}`,
      );
    } else if (g.replay) {
      if (view.replayFrom === null) view.replayFrom = g.replay[0];
      setConn("replaying", `replaying ${fmtInt(g.replay[0])} → ${fmtInt(g.replay[1] - 1)}`);
    } else {
      setConn("live", `live from offset ${fmtInt(g.end_offset)}`);
    }
    dirty = true;
  }

  function ingest(s, offset, msg) {
    if (s.greeting !== view.greeting) onGreeting(s.greeting);
    const replayed = view.durable && offset < view.liveFrom;
    if (replayed) {
      view.replayed++;
      // The last row of the replay: what follows is live.
      if (offset === view.liveFrom - 1) {
        setConn("live", `live from offset ${fmtInt(view.liveFrom)}`);
      }
    } else {
      view.live++;
      if (ui.conn.dataset.state !== "live") setConn("live", `live from offset ${fmtInt(offset)}`);
    }
    view.lastOffset = offset;
    const row = { offset, msg, replayed };
    if (view.key) {
      // Its latest row, moved to the end of the map: the newest change last.
      const k = JSON.stringify(view.key.map((c) => msg[c]));
      view.byKey.delete(k);
      view.byKey.set(k, row);
      if (view.snapshot && view.replayed === view.snapshot.keys && replayed) {
        setConn("live", `live from offset ${fmtInt(view.liveFrom)}`);
      }
    } else {
      view.rows.unshift(row);
      if (view.rows.length > TABLE_ROWS) view.rows.length = TABLE_ROWS;
    }
    const key = view.keyCol ? String(msg[view.keyCol.name]) : "all";
    let pts = view.series.get(key);
    if (!pts) {
      pts = [];
      view.series.set(key, pts);
      view.columnsChanged = true;
    }
    const t = view.timeCol ? toMs(msg[view.timeCol.name]) : null;
    pts.push({ x: t ?? offset ?? Date.now(), msg, replayed, offset });
    // Trimmed in steps, so that a fast replay costs O(1) a row.
    if (pts.length > 2 * CHART_POINTS) pts.splice(0, pts.length - CHART_POINTS);
    dirty = true;
  }

  // ---- rendering --------------------------------------------------------

  function frame() {
    if (sub && view) {
      // A reconnect with no row since: the new greeting says where we are.
      if (sub.greeting !== view.greeting) onGreeting(sub.greeting);
      if (dirty) {
        dirty = false;
        render();
      }
    }
    requestAnimationFrame(frame);
  }

  function render() {
    if (view.columnsChanged) {
      view.columnsChanged = false;
      renderHead();
      fillSelect(ui.col, view.numCols.map((c) => c.name), ui.col.value || preferred(view.numCols));
      fillSelect(ui.key, [...view.series.keys()].sort(), ui.key.value);
      ui.key.closest("label").hidden = !view.keyCol;
    }
    renderRows();
    renderInfo();
    drawChart();
  }

  function renderHead() {
    const tr = document.createElement("tr");
    for (const c of ["offset", ...view.columns.map((c) => c.name)]) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = c;
      tr.append(th);
    }
    ui.rows.tHead.replaceChildren(tr);
  }

  function renderRows() {
    const out = [];
    let before = null;
    const rows = view.key ? keyRows() : view.rows;
    for (const r of rows) {
      if (!view.key && before && !before.replayed && r.replayed) {
        const tr = document.createElement("tr");
        tr.className = "switch";
        // `before` is the row above: the first live one after the replay.
        const cell = td(`▲ live from offset ${fmtInt(before.offset)} · ▼ replayed from the log`);
        cell.colSpan = view.columns.length + 1;
        tr.append(cell);
        out.push(tr);
      }
      before = r;
      const tr = document.createElement("tr");
      tr.dataset.offset = r.offset ?? "";
      if (view.key) tr.dataset.key = JSON.stringify(view.key.map((c) => r.msg[c]));
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = r.offset === null ? "–" : String(r.offset);
      if (r.replayed) {
        tr.className = "replayed";
        const badge = document.createElement("span");
        badge.className = "badge";
        badge.textContent = view.snapshot ? "snapshot" : "replay";
        th.append(badge);
      }
      tr.append(th);
      for (const c of view.columns) {
        const v = r.msg[c.name];
        const cell = td(c === view.timeCol ? fmtTime(v) : fmtValue(v));
        if (c === view.timeCol) cell.title = String(v);
        if (c.type === "string") cell.className = "str";
        tr.append(cell);
      }
      out.push(tr);
    }
    const body = ui.rows.tBodies[0];
    // Which subscription the rows are from (tests tell a replay's rows by it).
    body.dataset.view = String(view.id);
    body.replaceChildren(...out);
  }

  // A keyed stream's lines: each key's latest row, the most recently changed first.
  function keyRows() {
    const out = [];
    for (const r of view.byKey.values()) out.push(r);
    out.reverse();
    if (out.length > KEY_ROWS) out.length = KEY_ROWS;
    return out;
  }

  function renderInfo() {
    let text;
    if (!view.durable) text = "This stream keeps no log: rows are live only.";
    else if (view.key) {
      const shown = view.byKey.size > KEY_ROWS ? ` (the ${KEY_ROWS} changed last shown)` : "";
      text = `One line per key (${view.key.join(", ")}): ${fmtInt(view.byKey.size)} keys` +
        `${shown}, the latest change first; ${fmtInt(view.live)} live rows.`;
    } else if (view.replayFrom === null) {
      text = `Live from offset ${fmtInt(view.liveFrom)}; ${fmtInt(view.live)} rows so far.`;
    } else {
      const rows = `${fmtInt(view.replayed)} rows replayed from offset ${fmtInt(view.replayFrom)}`;
      text = view.live > 0 || view.lastOffset === view.liveFrom - 1
        ? `${rows}, then live from ${fmtInt(view.liveFrom)} (${fmtInt(view.live)} live rows).`
        : `${rows} of ${fmtInt(view.liveFrom - view.replayFrom)}…`;
    }
    if (ui.info.textContent !== text) ui.info.textContent = text;
    // Bytes per row on the wire: the data messages' bytes as received
    // (compressed, with compress=), over the rows they carried.
    const rows = view.replayed + view.live;
    const how = sub?.greeting.compress ?? "text";
    const wire = rows === 0 || !sub
      ? `on the wire: ${how}`
      : `on the wire: ${how}, ${(sub.wireBytes / rows).toFixed(1)} B/row ` +
        `(${fmtInt(sub.wireBytes)} B for ${fmtInt(rows)} rows)`;
    if (ui.wire.textContent !== wire) ui.wire.textContent = wire;
  }

  function drawChart() {
    const c = ui.canvas;
    const dpr = devicePixelRatio || 1;
    const w = c.clientWidth;
    const h = c.clientHeight;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = "12px system-ui, sans-serif";
    const col = ui.col.value;
    const key = ui.key.value || [...view.series.keys()][0];
    const pts = (view.series.get(key) ?? []).slice(-CHART_POINTS)
      .filter((p) => typeof p.msg[col] === "number");
    const label = view.keyCol ? `${col} of ${key}` : col;
    if (pts.length < 2) {
      ctx.fillStyle = COLORS.text;
      ctx.fillText(col ? `waiting for rows of ${label}…` : "no numeric column", 12, h / 2);
      c.setAttribute("aria-label", `Chart of ${label}: no points yet`);
      return;
    }
    const pad = { l: 72, r: 16, t: 10, b: 24 };
    const x0 = pts[0].x;
    const x1 = Math.max(pts[pts.length - 1].x, x0 + 1);
    let y0 = Infinity;
    let y1 = -Infinity;
    for (const p of pts) {
      y0 = Math.min(y0, p.msg[col]);
      y1 = Math.max(y1, p.msg[col]);
    }
    const span = y1 - y0 || Math.abs(y1) * 0.01 || 1;
    y0 -= span * 0.08;
    y1 += span * 0.08;
    const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * (w - pad.l - pad.r);
    const Y = (y) => pad.t + (1 - (y - y0) / (y1 - y0)) * (h - pad.t - pad.b);

    ctx.strokeStyle = COLORS.grid;
    ctx.fillStyle = COLORS.text;
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let i = 0; i <= 4; i++) {
      const y = y0 + ((y1 - y0) * i) / 4;
      ctx.beginPath();
      ctx.moveTo(pad.l, Math.round(Y(y)) + 0.5);
      ctx.lineTo(w - pad.r, Math.round(Y(y)) + 0.5);
      ctx.stroke();
      ctx.fillText(fmtAxis(y, span), pad.l - 8, Y(y));
    }
    ctx.textBaseline = "alphabetic";
    const fmtX = view.timeCol ? fmtClock : (x) => fmtInt(Math.round(x));
    ctx.textAlign = "left";
    ctx.fillText(fmtX(x0), pad.l, h - 6);
    ctx.textAlign = "right";
    ctx.fillText(fmtX(x1), w - pad.r, h - 6);

    // The line: replayed stretches in the replay colour, live ones in blue,
    // and a marker where the replay turned into live rows.
    ctx.lineWidth = 1.75;
    ctx.lineJoin = "round";
    let switchX = null;
    for (let i = 1; i < pts.length; i++) {
      const a = pts[i - 1];
      const b = pts[i];
      if (a.replayed && !b.replayed) switchX = X(b.x);
      ctx.strokeStyle = b.replayed ? COLORS.replay : COLORS.live;
      ctx.beginPath();
      ctx.moveTo(X(a.x), Y(a.msg[col]));
      ctx.lineTo(X(b.x), Y(b.msg[col]));
      ctx.stroke();
    }
    if (switchX !== null) {
      ctx.save();
      ctx.setLineDash([4, 4]);
      ctx.strokeStyle = COLORS.live;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(Math.round(switchX) + 0.5, pad.t);
      ctx.lineTo(Math.round(switchX) + 0.5, h - pad.b);
      ctx.stroke();
      ctx.restore();
      // The label on whichever side of the marker has room.
      const room = w - pad.r - switchX > 48;
      ctx.fillStyle = room ? COLORS.live : COLORS.replay;
      ctx.textAlign = room ? "left" : "right";
      ctx.fillText(room ? "live →" : "← replayed", switchX + (room ? 4 : -4), pad.t + 12);
    }
    const last = pts[pts.length - 1];
    ctx.fillStyle = last.replayed ? COLORS.replay : COLORS.live;
    ctx.beginPath();
    ctx.arc(X(last.x), Y(last.msg[col]), 3, 0, 2 * Math.PI);
    ctx.fill();
    c.dataset.points = String(pts.length);
    c.setAttribute(
      "aria-label",
      `Chart of ${label}: ${pts.length} points, from ${fmtAxis(y0, span)} to ${
        fmtAxis(y1, span)
      }, last ${fmtValue(last.msg[col])}`,
    );
  }

  // ---- controls ---------------------------------------------------------

  ui.form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const n = Number(ui.from.value);
    if (ui.from.value.trim() === "" || !Number.isSafeInteger(n) || n < 0) {
      ui.notice.textContent = "Enter an offset: a whole number, 0 or more.";
      ui.from.focus();
      return;
    }
    await subscribe(n);
  });
  // since=: the first row at or after a time (connect checks the text).
  ui.sinceForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = ui.since.value.trim();
    if (text === "") {
      ui.notice.textContent = "Enter a time: RFC 3339 (2026-12-01T09:30:00Z) or µs.";
      ui.since.focus();
      return;
    }
    await subscribe(undefined, undefined, text);
  });
  ui.recent.addEventListener("click", async () => {
    const head = heads.find((h) => h.stream === name);
    const end = view?.lastOffset !== null && view?.lastOffset !== undefined
      ? view.lastOffset + 1
      : head?.end_offset ?? 0;
    const from = Math.max(head?.earliest ?? 0, end - 1000);
    ui.from.value = String(from);
    await subscribe(from);
  });
  ui.filter.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = ui.where.value.trim();
    if (text === "") {
      await subscribe(replayStart(), null);
      return;
    }
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      ui.filterError.textContent =
        'A filter is a JSON object of column conditions, e.g. {"symbol":"BTC-USD"}.';
      ui.where.focus();
      return;
    }
    await subscribe(replayStart(), text);
  });
  ui.filterClear.addEventListener("click", async () => {
    ui.where.value = "";
    await subscribe(replayStart(), null);
  });
  // A new filter replays from the offset in the replay box (live when empty).
  function replayStart() {
    const n = Number(ui.from.value);
    return ui.from.value.trim() !== "" && Number.isSafeInteger(n) && n >= 0 && view?.durable
      ? n
      : undefined;
  }
  ui.col.addEventListener("change", () => (dirty = true));
  ui.key.addEventListener("change", () => (dirty = true));
  addEventListener("resize", () => (dirty = true));

  // ---- start ------------------------------------------------------------

  renderStreams();
  poll();
  requestAnimationFrame(frame);
  const head = heads.find((h) => h.stream === name);
  if (!head) {
    setConn("closed", "no stream");
    ui.notice.textContent = heads.length === 0
      ? "This server serves no stream yet."
      : `No stream named ${JSON.stringify(name)}.`;
    return;
  }
  // A keyed stream opens with its snapshot: every key's latest row, then live.
  if (head.key) {
    subscribe(undefined, undefined, undefined, true);
    return;
  }
  // Open with a little history, so the table and chart are not empty.
  const start = head.durable && head.earliest !== null && head.end_offset !== null
    ? Math.max(head.earliest, head.end_offset - INITIAL_ROWS)
    : undefined;
  if (start !== undefined) ui.from.value = String(start);
  subscribe(start).then((ok) => {
    if (!ok && start !== undefined && !sub) subscribe(undefined);
  });
}

// ---- helpers ------------------------------------------------------------

function td(text) {
  const cell = document.createElement("td");
  cell.textContent = text;
  return cell;
}

function colType(prop) {
  const t = Array.isArray(prop?.type) ? prop.type.find((x) => x !== "null") : prop?.type;
  return t ?? "string";
}

function preferred(cols) {
  return (cols.find((c) => c.name === "price") ?? cols[0])?.name ?? "";
}

function fillSelect(select, values, chosen) {
  const same = select.options.length === values.length &&
    values.every((v, i) => select.options[i].value === v);
  if (!same) select.replaceChildren(...values.map((v) => new Option(v, v)));
  if (values.includes(chosen)) select.value = chosen;
}

/** A time column's value in ms since the epoch, guessing its unit from its size. */
function toMs(v) {
  if (typeof v !== "number") return null;
  if (v > 1e17) return v / 1e6; // ns
  if (v > 1e14) return v / 1e3; // µs
  if (v > 1e11) return v; // ms
  return v * 1e3; // s
}

const intFmt = new Intl.NumberFormat("en-US");

function fmtInt(n) {
  return n === null || n === undefined ? "–" : intFmt.format(n);
}

function fmtRate(perS) {
  return perS < 10 ? perS.toFixed(1) : intFmt.format(Math.round(perS));
}

function fmtValue(v) {
  if (v === null || v === undefined) return "null";
  // Nested columns (objects, arrays): their JSON, shortened to fit a cell.
  if (typeof v === "object") {
    const text = JSON.stringify(v);
    return text.length > 80 ? text.slice(0, 79) + "…" : text;
  }
  return String(v);
}

function fmtAxis(y, span) {
  const digits = Math.max(0, Math.min(6, 2 - Math.floor(Math.log10(span || 1))));
  return y.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/** A time column's value as local HH:MM:SS.mmm. */
function fmtTime(v) {
  const ms = toMs(v);
  return ms === null || !Number.isFinite(ms) ? fmtValue(v) : fmtClock(ms);
}

function fmtClock(ms) {
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${
    p(d.getMilliseconds(), 3)
  }`;
}
