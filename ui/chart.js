// A per-minute line chart in SVG: one line per series over the buckets,
// a y axis with a few ticks, time labels every 10 minutes, and a <title>
// per point for its exact numbers.

export function lineChart(buckets, series) {
  const W = 900, H = 240, L = 40, R = 10, T = 10, B = 26;
  const n = buckets.length;
  const max = Math.max(1, ...buckets.flatMap(b => series.map(s => b[s] || 0)));
  const nice = Math.pow(10, Math.floor(Math.log10(max)));
  const top = Math.ceil(max / nice) * nice;
  const x = i => L + (n <= 1 ? 0 : (i * (W - L - R)) / (n - 1));
  const y = v => T + (H - T - B) * (1 - v / top);
  const out = [];
  for (let k = 0; k <= 4; k++) {
    const v = (top * k) / 4, yy = y(v);
    out.push(`<line class="axis" x1="${L}" x2="${W - R}" y1="${yy}" y2="${yy}"/>`);
    out.push(`<text x="${L - 6}" y="${yy + 3}" text-anchor="end">${Math.round(v * 10) / 10}</text>`);
  }
  buckets.forEach((b, i) => {
    const d = new Date(b.at);
    if (d.getMinutes() % 10 === 0)
      out.push(`<text x="${x(i)}" y="${H - 8}" text-anchor="middle">${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}</text>`);
  });
  for (const s of series) {
    const d = buckets.map((b, i) => `${i ? 'L' : 'M'}${x(i).toFixed(1)} ${y(b[s] || 0).toFixed(1)}`).join('');
    out.push(`<path class="l-${s}" d="${d}"/>`);
  }
  buckets.forEach((b, i) => {
    const t = `${new Date(b.at).toLocaleTimeString()}: ` + series.map(s => `${s} ${b[s] || 0}`).join(', ');
    out.push(`<rect x="${x(i) - 4}" y="${T}" width="8" height="${H - T - B}" fill="transparent"><title>${t}</title></rect>`);
  });
  return `<svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img" aria-label="Executions per minute">${out.join('')}</svg>`;
}
