// A hand-written SVG line chart with logarithmic axes (no library).

/** One line of the chart. */
export interface Series {
  /** Legend text. */
  name: string;
  /** Stroke colour. */
  color: string;
  /** [x, y] points; non-finite or non-positive values are skipped. */
  points: [number, number][];
  /** SVG stroke-dasharray, for reference lines. */
  dash?: string;
}

/** What to draw. */
export interface ChartSpec {
  title: string;
  subtitle?: string;
  xLabel: string;
  yLabel: string;
  /** The x values to put ticks at (powers of ten read best). */
  xTicks: number[];
  series: Series[];
}

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** 1000 → "1k", 2500000 → "2.5M". */
export function short(n: number): string {
  const f = (x: number) => (Number.isInteger(x) ? String(x) : x.toFixed(1));
  if (n >= 1e9) return f(n / 1e9) + "G";
  if (n >= 1e6) return f(n / 1e6) + "M";
  if (n >= 1e3) return f(n / 1e3) + "k";
  return f(n);
}

/** Renders a log-log line chart as a standalone SVG document. */
export function logLogChart(spec: ChartSpec): string {
  const W = 960, H = 520;
  const L = 84, R = 300, T = spec.subtitle ? 66 : 48, B = 64;
  const pw = W - L - R, ph = H - T - B;
  const ys = spec.series.flatMap((s) => s.points.map((p) => p[1])).filter((y) =>
    Number.isFinite(y) && y > 0
  );
  const yMin = Math.pow(10, Math.floor(Math.log10(Math.min(...ys))));
  const yMax = Math.pow(10, Math.ceil(Math.log10(Math.max(...ys))));
  const xMin = Math.min(...spec.xTicks), xMax = Math.max(...spec.xTicks);
  const pad = 0.06; // keep end points off the frame
  const lx = (x: number) => {
    const u = (Math.log10(x) - Math.log10(xMin)) / (Math.log10(xMax) - Math.log10(xMin));
    return L + (pad + u * (1 - 2 * pad)) * pw;
  };
  const ly = (y: number) =>
    T + ph - ((Math.log10(y) - Math.log10(yMin)) / (Math.log10(yMax) - Math.log10(yMin))) * ph;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
      `font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="${L}" y="26" font-size="17" font-weight="bold" fill="#222">${esc(spec.title)}</text>`,
  );
  if (spec.subtitle) {
    out.push(`<text x="${L}" y="46" font-size="12" fill="#555">${esc(spec.subtitle)}</text>`);
  }
  // Grid: every decade (solid), 2× and 5× (faint).
  for (let d = yMin; d <= yMax * 1.0001; d *= 10) {
    out.push(
      `<line x1="${L}" x2="${L + pw}" y1="${ly(d).toFixed(1)}" y2="${
        ly(d).toFixed(1)
      }" stroke="#ccc"/>`,
      `<text x="${L - 8}" y="${(ly(d) + 4).toFixed(1)}" text-anchor="end" fill="#333">${
        short(d)
      }</text>`,
    );
    for (const m of [2, 5]) {
      if (d * m < yMax) {
        out.push(
          `<line x1="${L}" x2="${L + pw}" y1="${ly(d * m).toFixed(1)}" y2="${
            ly(d * m).toFixed(1)
          }" stroke="#eee"/>`,
        );
      }
    }
  }
  for (const x of spec.xTicks) {
    out.push(
      `<line x1="${lx(x).toFixed(1)}" x2="${lx(x).toFixed(1)}" y1="${T}" y2="${
        T + ph
      }" stroke="#e4e4e4"/>`,
      `<text x="${lx(x).toFixed(1)}" y="${T + ph + 20}" text-anchor="middle" fill="#333">${
        short(x)
      }</text>`,
    );
  }
  out.push(
    `<rect x="${L}" y="${T}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`,
    `<text x="${L + pw / 2}" y="${H - 18}" text-anchor="middle" fill="#222">${
      esc(spec.xLabel)
    }</text>`,
    `<text transform="translate(20 ${T + ph / 2}) rotate(-90)" text-anchor="middle" fill="#222">${
      esc(spec.yLabel)
    }</text>`,
  );
  spec.series.forEach((s, i) => {
    const pts = s.points.filter(([x, y]) => Number.isFinite(y) && y > 0 && x > 0);
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : "";
    if (pts.length > 1) {
      const d = pts.map(([x, y], k) => `${k ? "L" : "M"}${lx(x).toFixed(1)},${ly(y).toFixed(1)}`)
        .join(" ");
      out.push(
        `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2.2"${dash}/>`,
      );
    }
    for (const [x, y] of pts) {
      out.push(
        `<circle cx="${lx(x).toFixed(1)}" cy="${
          ly(y).toFixed(1)
        }" r="3.6" fill="${s.color}"><title>${esc(s.name)}: ${short(y)} at ${x}</title></circle>`,
      );
    }
    const ky = T + 12 + i * 24;
    const kx = L + pw + 18;
    out.push(
      `<line x1="${kx}" x2="${
        kx + 26
      }" y1="${ky}" y2="${ky}" stroke="${s.color}" stroke-width="2.6"${dash}/>`,
      `<circle cx="${kx + 13}" cy="${ky}" r="3.6" fill="${s.color}"/>`,
      `<text x="${kx + 34}" y="${ky + 4}" fill="#222">${esc(s.name)}</text>`,
    );
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}
