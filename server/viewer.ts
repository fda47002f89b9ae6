/**
 * The page served at `GET /` and `GET /{name}` to a browser: the streams, and
 * the newest rows of one of them, over a plain WebSocket.
 *
 * @module
 */

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * Renders the viewer page for the streams whose heads are given.
 *
 * @example
 * ```ts
 * import { viewerPage } from "./viewer.ts";
 * console.log(viewerPage([]).startsWith("<!doctype html>")); // true
 * ```
 */
export function viewerPage(heads: { stream: string; end_offset: number | null }[]): string {
  const items = heads.map((h) =>
    `<li><a href="/${encodeURIComponent(h.stream)}">${
      escapeHtml(h.stream || "(unnamed)")
    }</a> <span class="muted">end ${h.end_offset ?? "-"}</span></li>`
  ).join("");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>streamcast</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:2rem;color:#222}
.muted{color:#888}table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right;font-family:monospace}
th{border-bottom:1px solid #ccc}
</style></head>
<body>
<h1>streamcast</h1>
<ul id="streams">${items}</ul>
<p id="state" class="muted"></p>
<table id="rows"></table>
<script type="module">
const name = decodeURIComponent(location.pathname.slice(1));
const known = ${JSON.stringify(heads.map((h) => h.stream))};
const state = document.getElementById("state");
const table = document.getElementById("rows");
if (known.includes(name)) {
  const ws = new WebSocket(\`\${location.protocol === "https:" ? "wss" : "ws"}://\${location.host}/\${encodeURIComponent(name)}?frames=batch\`);
  let cols = null;
  ws.onmessage = (e) => {
    const data = JSON.parse(e.data.split("\\n")[0]);
    if (!Array.isArray(data)) {
      cols = Object.keys(data.schema.properties);
      table.innerHTML = "<tr><th>offset</th>" + cols.map((c) => "<th>" + c + "</th>").join("") + "</tr>";
      state.textContent = "live on " + (name || "(unnamed)") + " from offset " + data.end_offset;
      return;
    }
    for (const line of e.data.split("\\n")) {
      const [offset, msg] = JSON.parse(line);
      const tr = document.createElement("tr");
      for (const v of [offset, ...cols.map((c) => msg[c])]) {
        const td = document.createElement("td");
        td.textContent = String(v);
        tr.append(td);
      }
      table.firstChild.after(tr);
      while (table.rows.length > 51) table.deleteRow(-1);
    }
  };
  ws.onclose = (e) => { state.textContent = "closed (" + e.code + ") " + e.reason; };
}
</script>
</body></html>`;
}
