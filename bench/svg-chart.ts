// A line chart as SVG text, for the charts under docs/charts/ (bench/charts.ts).
//
// Written here rather than taken from a charting library: three small charts of a handful of
// points each need axes, ticks, lines and a legend, while the libraries that draw SVG outside a
// browser (vega, chart.js with a canvas, d3 with jsdom) bring a DOM or native canvas and many
// megabytes for it.

/** One line of a chart: its name in the legend and its points. */
export interface Series {
  name: string;
  points: readonly (readonly [x: number, y: number])[];
}

/** What {@link lineChart} draws. */
export interface LineChart {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly Series[];
  /** A logarithmic x axis (counts of databases from 10 to 100,000). */
  logX?: boolean;
  /** The y axis starts at 0 unless told otherwise. */
  yMin?: number;
}

const W = 640;
const H = 360;
const PAD = { left: 64, right: 150, top: 40, bottom: 52 };
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];

/** Escapes text for an SVG text node or attribute. */
export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A number as a tick reads: 10,000 rather than 1e4; at most three significant digits. */
export function tickLabel(n: number): string {
  if (n !== 0 && Math.abs(n) < 1) return String(Number(n.toPrecision(2)));
  return Math.round(n).toLocaleString('en-US');
}

/** About five round steps (1, 2 or 5 times a power of ten) covering `lo` to `hi`. */
export function niceTicks(lo: number, hi: number): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw)!;
  const ticks: number[] = [];
  // Up to the first tick at or past `hi`, so that every value lies inside the axis.
  for (let t = Math.floor(lo / step) * step; ; t += step) {
    ticks.push(Number(t.toPrecision(12)));
    if (t >= hi - step * 1e-9) return ticks;
  }
}

/** Draws `chart` as a standalone SVG document (no script, no external reference). */
export function lineChart(chart: LineChart): string {
  const all = chart.series.flatMap((s) => s.points);
  if (all.length === 0) throw new Error(`chart ${chart.title}: no points`);
  const fx = chart.logX ? Math.log10 : (x: number) => x;
  const xs = all.map(([x]) => fx(x));
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  if (x0 === x1) [x0, x1] = [x0 - 1, x1 + 1];
  const yTicks = niceTicks(chart.yMin ?? 0, Math.max(...all.map(([, y]) => y)) * 1.1);
  const [y0, y1] = [yTicks[0]!, Math.max(yTicks.at(-1)!, yTicks[0]! + 1e-9)];
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const px = (x: number) => PAD.left + ((fx(x) - x0) / (x1 - x0)) * plotW;
  const py = (y: number) => PAD.top + plotH - ((y - y0) / (y1 - y0)) * plotH;
  const f = (n: number) => n.toFixed(1);
  const xTicks = chart.logX
    ? Array.from({ length: Math.floor(x1) - Math.ceil(x0) + 1 }, (_, i) => 10 ** (Math.ceil(x0) + i))
    : [...new Set(all.map(([x]) => x))].sort((a, b) => a - b);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<title>${escapeXml(chart.title)}</title>`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${escapeXml(chart.title)}</text>`,
  ];
  for (const t of yTicks) {
    out.push(`<line x1="${PAD.left}" x2="${PAD.left + plotW}" y1="${f(py(t))}" y2="${f(py(t))}" stroke="#ddd"/>`);
    out.push(`<text x="${PAD.left - 6}" y="${f(py(t) + 4)}" text-anchor="end">${escapeXml(tickLabel(t))}</text>`);
  }
  for (const t of xTicks) {
    out.push(`<line x1="${f(px(t))}" x2="${f(px(t))}" y1="${PAD.top + plotH}" y2="${PAD.top + plotH + 5}" stroke="#333"/>`);
    out.push(`<text x="${f(px(t))}" y="${PAD.top + plotH + 18}" text-anchor="middle">${escapeXml(tickLabel(t))}</text>`);
  }
  out.push(`<rect x="${PAD.left}" y="${PAD.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`);
  out.push(`<text x="${PAD.left + plotW / 2}" y="${H - 12}" text-anchor="middle">${escapeXml(chart.xLabel)}</text>`);
  out.push(`<text transform="translate(16 ${PAD.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(chart.yLabel)}</text>`);
  chart.series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length]!;
    const pts = [...s.points].sort((a, b) => a[0] - b[0]);
    out.push(`<polyline fill="none" stroke="${colour}" stroke-width="2" points="${pts.map(([x, y]) => `${f(px(x))},${f(py(y))}`).join(' ')}"/>`);
    for (const [x, y] of pts) out.push(`<circle cx="${f(px(x))}" cy="${f(py(y))}" r="3" fill="${colour}"/>`);
    const ly = PAD.top + 10 + i * 18;
    out.push(`<line x1="${W - PAD.right + 12}" x2="${W - PAD.right + 32}" y1="${ly}" y2="${ly}" stroke="${colour}" stroke-width="2"/>`);
    out.push(`<text x="${W - PAD.right + 38}" y="${ly + 4}">${escapeXml(s.name)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
