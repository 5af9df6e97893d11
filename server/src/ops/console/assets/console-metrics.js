// The zooraft console: the Metrics page. Built with el() and textContent only (console-base.js).
"use strict";

// ---------------------------------------------------------------- Metrics

// One chart: each series a polyline over the samples' times.
function chart(title, samples, series, unit) {
  const W = 560, H = 150, L = 56, B = 20, T = 8;
  const t0 = samples.length ? samples[0].t : 0, t1 = samples.length ? samples[samples.length - 1].t : 1;
  let max = 0;
  for (const s of samples) for (const k of series) if (typeof s[k] === "number") max = Math.max(max, s[k]);
  if (max <= 0) max = 1;
  const x = (t) => L + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - L - 4);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const g = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, class: "chart", "data-chart": title });
  g.appendChild(svg("rect", { x: L, y: T, width: W - L - 4, height: H - T - B, fill: "#fff", stroke: "#d5d9e0" }));
  const label = (text, attrs) => { const t = svg("text", Object.assign({ "font-size": 10, fill: "#555" }, attrs)); t.textContent = text; g.appendChild(t); };
  label(max.toPrecision(3) + " " + unit, { x: 2, y: T + 9 });
  label("0", { x: L - 10, y: H - B });
  if (samples.length) {
    label(new Date(t0).toISOString().substr(11, 8), { x: L, y: H - 5 });
    label(new Date(t1).toISOString().substr(11, 8) + " UTC", { x: W - 80, y: H - 5 });
  }
  series.forEach((k, i) => {
    const pts = samples.filter((s) => typeof s[k] === "number").map((s) => x(s.t).toFixed(1) + "," + y(s[k]).toFixed(1));
    if (pts.length) g.appendChild(svg("polyline", { points: pts.join(" "), "data-series": k, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 1.5 }));
  });
  const legend = el("div", { className: "legend" }, ...series.map((k, i) => {
    const last = samples.length ? samples[samples.length - 1][k] : undefined;
    return el("span", { className: "c" + (i % COLORS.length) }, "\u25A0 " + k + (typeof last === "number" ? " " + (+last.toFixed(2)) : "") + "  ");
  }));
  return el("div", { className: "box chartbox" }, el("h3", {}, title), g, legend);
}

async function metricsPage() {
  const r = await api("metrics");
  const s = r.samples;
  return [el("h2", {}, "Metrics (last hour, " + s.length + " samples, one per " + r.every_ms / 1000 + " s)"),
    el("p", {}, "Latencies and fsync time: the average, p50 and p99 of each interval alone."),
    el("div", { className: "row", id: "charts" },
      chart("Throughput", s, ["requests_per_s", "responses_per_s", "commits_per_s"], "/s"),
      chart("Read latency", s, ["readlatency_avg", "readlatency_p50", "readlatency_p99"], "ms"),
      chart("Write latency", s, ["updatelatency_avg", "updatelatency_p50", "updatelatency_p99"], "ms"),
      chart("fsync time", s, ["fsynctime_avg", "fsynctime_p50", "fsynctime_p99"], "ms"),
      chart("Connections and sessions", s, ["connections", "sessions", "outstanding"], ""),
      chart("Watches", s, ["watches"], ""),
      chart("Znodes", s, ["znodes"], ""))];
}

