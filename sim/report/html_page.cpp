// The page template of the HTML reports: inline CSS and the script that draws the charts as
// SVG from the inline JSON block. Kept apart from html.cpp (which assembles the data) so the
// two can be read separately.
#include <string>

namespace racksim::sim {

extern const char* const kHtmlPageHead;
extern const char* const kHtmlPageTail;

const char* const kHtmlPageHead = R"RACKSIM(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="racksim">
<title>racksim report</title>
<style>
:root { --fg:#1d2330; --muted:#667085; --panel:#f6f7f9; --line:#d0d5dd; --bad:#b42318; --good:#067647; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); margin: 0; background: #fff; }
header { padding: 16px 24px 18px; border-bottom: 1px solid var(--line); background: var(--panel); }
h1 { font-size: 20px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 26px 0 6px; }
h3 { font-size: 14px; margin: 14px 0 4px; }
main { padding: 0 24px 24px; max-width: 1400px; }
footer { padding: 8px 24px 20px; color: var(--muted); font-size: 11px; }
.sub { color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(165px, 1fr)); gap: 10px; margin-top: 12px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 7px 12px; }
.card .k { color: var(--muted); font-size: 12px; }
.card .v { font-size: 19px; font-weight: 600; white-space: nowrap; }
.card .d { font-size: 12px; color: var(--muted); }
.bad { color: var(--bad); } .good { color: var(--good); }
.speedup { font-size: 28px; font-weight: 700; }
.legend { display: flex; flex-wrap: wrap; gap: 3px 14px; font-size: 12px; margin: 4px 0 2px; }
.legend span { white-space: nowrap; }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; vertical-align: -1px; }
.chart { width: 100%; overflow-x: auto; }
svg { display: block; fill: #344054; }  /* text colour; shapes set their own fill */
svg text { font: 11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
svg .axis { stroke: #98a2b3; stroke-width: 1; }
svg .grid { stroke: #eaecf0; stroke-width: 1; }
table { border-collapse: collapse; font-size: 12px; margin: 4px 0; }
td, th { padding: 3px 9px; border-bottom: 1px solid #eaecf0; text-align: right; white-space: nowrap; }
th { background: var(--panel); font-weight: 600; }
td.l, th.l { text-align: left; white-space: normal; }
.warn { color: #93370d; background: #fffaeb; border: 1px solid #fedf89; border-radius: 6px; padding: 5px 10px;
        margin: 4px 0; font-size: 12px; }
.err { color: #7a271a; background: #fef3f2; border: 1px solid #fecdca; border-radius: 6px; padding: 5px 10px;
       margin: 4px 0; font-size: 12px; }
.controls { font-size: 13px; margin: 6px 0; display: flex; gap: 18px; align-items: center; flex-wrap: wrap; }
details { margin: 10px 0; } summary { cursor: pointer; color: #344054; }
pre { background: var(--panel); padding: 8px; border-radius: 6px; font-size: 11px; overflow-x: auto; max-height: 420px; }
</style>
</head>
<body>
<header>
  <h1 id="title">racksim report</h1>
  <div class="sub" id="subtitle"></div>
  <div id="headline"></div>
</header>
<main id="main"><noscript><p class="err">This report draws its charts with JavaScript; enable it to see them.
The data is in the page source (the racksim-data block).</p></noscript></main>
<footer>racksim report &middot; self-contained, no network access &middot;
  <span id="render-status" data-rendered="no">drawing&hellip;</span></footer>
<script type="application/json" id="racksim-data">)RACKSIM";

const char* const kHtmlPageTail = R"RACKSIM(</script>
<script>
"use strict";
(function () {
  const status = document.getElementById("render-status");
  function failed(msg) {
    status.textContent = "error: " + msg;
    status.setAttribute("data-rendered", "error");
    const m = document.getElementById("main");
    const p = document.createElement("p");
    p.className = "err";
    p.textContent = "The report could not be drawn: " + msg;
    m.insertBefore(p, m.firstChild);
  }
  window.addEventListener("error", function (e) { failed(e.message || String(e)); });

  const SVGNS = "http://www.w3.org/2000/svg";
  function h(tag, attrs, parent, text) {
    const e = document.createElement(tag);
    if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function s(tag, attrs, parent, text) {
    const e = document.createElementNS(SVGNS, tag);
    if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function tip(node, text) { s("title", null, node, text); return node; }
  function svgRoot(parent, w, hgt, label) {
    return s("svg", { width: w, height: hgt, viewBox: "0 0 " + w + " " + hgt, role: "img", "aria-label": label,
                      "class": "racksim-chart" }, parent);
  }

  // Formatting
  function fmtTime(x) {
    if (x === null || x === undefined || !isFinite(x)) return "-";
    const a = Math.abs(x);
    if (a >= 1) return x.toFixed(3) + " s";
    if (a >= 1e-3) return (x * 1e3).toFixed(2) + " ms";
    if (a >= 1e-6) return (x * 1e6).toFixed(1) + " \u00b5s";
    if (a === 0) return "0 s";
    return (x * 1e9).toFixed(0) + " ns";
  }
  // Axis labels: no trailing zeros ("500 ms", "1.5 s").
  function fmtTick(x) { return fmtTime(x).replace(/(\.\d*?)0+ /, "$1 ").replace(/\. /, " "); }
  function fmtGB(b) { return (b / 1e9).toFixed(b >= 1e11 ? 0 : 1) + " GB"; }
  function fmtNum(x, digits) {
    if (x === null || x === undefined || !isFinite(x)) return "-";
    return x.toLocaleString("en-US", { maximumFractionDigits: digits === undefined ? 1 : digits });
  }
  function pct(x) { return (100 * x).toFixed(1) + "%"; }
  function niceTicks(max, n) {
    if (!(max > 0)) return [0];
    const raw = max / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map(function (m) { return m * p; }).find(function (v) { return v >= raw; });
    const out = [];
    for (let v = 0; v <= max * 1.0001; v += step) out.push(v);
    return out;
  }

  const BREAKDOWN = [["compute", "#3b82f6"], ["recompute", "#8b5cf6"], ["exposed_communication", "#f59e0b"],
                     ["exposed_offload", "#ef4444"], ["launch_overhead", "#14b8a6"], ["pipeline_bubble", "#64748b"],
                     ["idle", "#d0d5dd"]];
  const MEMORY = [["weights", "#2563eb"], ["gradients", "#0891b2"], ["optimizer", "#7c3aed"],
                  ["activations", "#f97316"], ["communication_buffers", "#eab308"], ["other", "#94a3b8"]];
  const TIMELINE_COLORS = { forward: "#60a5fa", backward: "#2563eb", recompute: "#8b5cf6", optimizer: "#10b981",
                            "collective dp": "#f59e0b", "collective tp": "#f97316", "collective pp": "#ef4444",
                            "collective cp": "#ec4899", "collective ep": "#a855f7", "collective dp_cp": "#eab308",
                            "collective edp": "#d946ef", "host to device": "#14b8a6",
                            "device to host": "#0f766e", launch: "#98a2b3" };
  const COLLECTIVE_EXTRA = ["#d97706", "#be123c", "#c026d3", "#b45309", "#9f1239"];
  const tlExtra = {};
  function tlColor(cat) {
    if (TIMELINE_COLORS[cat]) return TIMELINE_COLORS[cat];
    if (!tlExtra[cat]) {
      const n = Object.keys(tlExtra).length;
      tlExtra[cat] = cat.indexOf("collective") === 0 ? COLLECTIVE_EXTRA[n % COLLECTIVE_EXTRA.length]
                                                     : ["#0e7490", "#4d7c0f", "#6d28d9", "#475467"][n % 4];
    }
    return tlExtra[cat];
  }
  const SERIES = ["#2563eb", "#f97316", "#10b981", "#8b5cf6", "#e11d48", "#0891b2", "#ca8a04", "#4b5563",
                  "#db2777", "#65a30d", "#7c2d12", "#1e3a8a"];

  function legend(parent, items) {
    const l = h("div", { "class": "legend" }, parent);
    for (const it of items) {
      const sp = h("span", null, l);
      h("i", { style: "background:" + it[1] + (it[2] ? ";" + it[2] : "") }, sp);
      sp.appendChild(document.createTextNode(it[0]));
    }
    return l;
  }
  function label(k) { return k.replace(/_/g, " "); }

  // Horizontal stacked bars: rows [{name, parts: {key: value}, total, limit}] on one scale.
  function stackedBars(parent, rows, keys, fmt, opts) {
    opts = opts || {};
    const limits = rows.map(function (r) { return r.limit || 0; });
    const commonLimit = limits[0] > 0 && limits.every(function (l) { return l === limits[0]; }) ? limits[0] : 0;
    const W = 1300, left = 120, right = 170, barH = 28, gap = 14, top = commonLimit ? 24 : 8, axisH = 24;
    const H = top + rows.length * (barH + gap) + axisH;
    let max = 0;
    for (const r of rows) max = Math.max(max, r.total, r.limit || 0);
    max = max > 0 ? max * 1.04 : 1;
    const x = function (v) { return left + (W - left - right) * v / max; };
    const svg = svgRoot(parent, W, H, opts.title || "bars");
    const ticks = niceTicks(max, 6);
    const yAxis = top + rows.length * (barH + gap);
    for (const t of ticks) {
      s("line", { x1: x(t), x2: x(t), y1: top - 4, y2: yAxis, "class": "grid" }, svg);
      s("text", { x: x(t), y: yAxis + 14, "text-anchor": "middle" }, svg, fmt(t));
    }
    rows.forEach(function (r, i) {
      const y = top + i * (barH + gap);
      s("text", { x: left - 8, y: y + barH / 2 + 4, "text-anchor": "end", "font-weight": "600" }, svg, r.name);
      let acc = 0;
      for (const kc of keys) {
        const v = r.parts[kc[0]] || 0;
        if (v <= 0) continue;
        const rect = s("rect", { x: x(acc), y: y, width: Math.max(0.5, x(acc + v) - x(acc)), height: barH,
                                 fill: kc[1], "class": "bar-part" }, svg);
        tip(rect, label(kc[0]) + ": " + fmt(v) + " (" + pct(v / (r.total || 1)) + ")");
        acc += v;
      }
      s("text", { x: x(r.total) + 6, y: y + barH / 2 + 4 }, svg, fmt(r.total) + (r.note ? "  " + r.note : ""));
      if (r.limit && !commonLimit) {
        const over = r.total > r.limit;
        s("line", { x1: x(r.limit), x2: x(r.limit), y1: y - 5, y2: y + barH + 5, stroke: over ? "#b42318" : "#101828",
                    "stroke-width": 2, "stroke-dasharray": "4 3", "class": "capacity-line" }, svg);
        s("text", { x: x(r.limit) + 5, y: y + barH / 2 + 4, fill: over ? "#b42318" : "#101828" }, svg,
          "capacity " + fmt(r.limit));
      }
    });
    if (commonLimit) {
      const over = rows.some(function (r) { return r.total > commonLimit; });
      const col = over ? "#b42318" : "#101828";
      s("line", { x1: x(commonLimit), x2: x(commonLimit), y1: top - 6, y2: yAxis, stroke: col, "stroke-width": 2,
                  "stroke-dasharray": "4 3", "class": "capacity-line" }, svg);
      s("text", { x: x(commonLimit), y: top - 10, "text-anchor": "middle", fill: col, "font-weight": "600" }, svg,
        "capacity " + fmt(commonLimit));
    }
    s("line", { x1: left, x2: left, y1: top - 4, y2: yAxis, "class": "axis" }, svg);
    return svg;
  }

  // Per-stream timelines on one time scale.
  function timelines(parent, runs, names) {
    // A step extrapolated beyond its replayed micro-steps is drawn as far as it was replayed (replayed_s).
    const shown = function (tl) {
      return tl.replayed_s > 0 && tl.replayed_s < 0.99 * tl.step_time_s ? tl.replayed_s : tl.step_time_s;
    };
    let max = 0;
    for (const r of runs) max = Math.max(max, shown(r.timeline));
    max = max > 0 ? max : 1;
    const used = [];
    for (const r of runs) for (const c of r.timeline.categories) if (used.indexOf(c) < 0) used.push(c);
    const order = Object.keys(TIMELINE_COLORS);
    used.sort(function (a, b) {
      const ia = order.indexOf(a), ib = order.indexOf(b);
      return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || (a < b ? -1 : a > b ? 1 : 0);
    });
    legend(parent, used.map(function (c) { return [c, tlColor(c)]; }));
    runs.forEach(function (r, ri) {
      const tl = r.timeline;
      if (names) h("h3", null, parent, names[ri]);
      if (tl.ranks > 1)
        h("div", { "class": "sub" }, parent, "pipeline stage " + tl.rank + " (stages 0 to " + (tl.ranks - 1) +
          "; the busiest: the breakdown above is this stage's)");
      const end = shown(tl);
      if (end < tl.step_time_s)
        h("div", { "class": "sub" }, parent, "the first " + fmtTime(end) + " of the " + fmtTime(tl.step_time_s) +
          " step: its first micro-steps replayed; the rest is extrapolated from their steady state (--exact replays them all)");
      const W = 1300, left = 120, right = 20, laneH = 20, gap = 6, top = 6, axisH = 26;
      const H = top + tl.lanes.length * (laneH + gap) + axisH;
      const x = function (t) { return left + (W - left - right) * t / max; };
      const wrap = h("div", { "class": "chart" }, parent);
      const svg = svgRoot(wrap, W, H, "timeline " + (names ? names[ri] : ""));
      svg.setAttribute("class", "racksim-chart timeline");
      const yAxis = top + tl.lanes.length * (laneH + gap);
      for (const t of niceTicks(max, 10)) {
        s("line", { x1: x(t), x2: x(t), y1: top - 2, y2: yAxis, "class": "grid" }, svg);
        s("text", { x: x(t), y: yAxis + 14, "text-anchor": "middle" }, svg, fmtTick(t));
      }
      tl.lanes.forEach(function (lane, li) {
        const y = top + li * (laneH + gap);
        s("rect", { x: left, y: y, width: x(end) - left, height: laneH, fill: "#f9fafb" }, svg);
        s("text", { x: left - 8, y: y + laneH / 2 + 4, "text-anchor": "end" }, svg, lane.name);
        const g = s("g", null, svg);
        for (const seg of lane.segments) {
          const x0 = x(seg[0]), x1 = x(seg[1]);
          const cat = tl.categories[seg[2]];
          const rect = s("rect", { x: x0, y: y, width: Math.max(0.6, x1 - x0), height: laneH,
                                   fill: tlColor(cat) }, g);
          tip(rect, seg[4] + (seg[3] > 1 ? " (" + seg[3] + " ops merged)" : "") + "\n" + cat + ", " +
                    fmtTime(seg[0]) + " \u2013 " + fmtTime(seg[1]) + " (" + fmtTime(seg[1] - seg[0]) + ")");
        }
      });
      if (end >= tl.step_time_s)
        s("line", { x1: x(tl.step_time_s), x2: x(tl.step_time_s), y1: top - 2, y2: yAxis, stroke: "#101828",
                    "stroke-dasharray": "3 3" }, svg);
      s("text", { x: left, y: H - 2, fill: "#667085" }, svg,
        tl.ops + " ops drawn as " + tl.lanes.reduce(function (a, l) { return a + l.segments.length; }, 0) +
        " segments (adjacent ops of one kind merged)");
    });
  }

  function card(parent, k, v, cls, d) {
    const c = h("div", { "class": "card" }, parent);
    h("div", { "class": "k" }, c, k);
    h("div", { "class": "v" + (cls ? " " + cls : "") }, c, v);
    if (d) h("div", { "class": "d" }, c, d);
    return c;
  }
  function describe(sc) {
    if (!sc) return "";
    const t = sc.training || {}, p = t.parallelism || {};
    const sys = sc.system || {};
    return (sys.gpus || "?") + " \u00d7 " + (sys.preset || "?") + " \u00b7 " + ((sc.model || {}).name || "model") +
      " \u00b7 tp " + p.tp + " pp " + p.pp + (p.vp > 1 ? " vp " + p.vp : "") + " dp " + p.dp + (p.cp > 1 ? " cp " + p.cp : "") +
      (p.ep > 1 ? " ep " + p.ep : "") + " \u00b7 " + t.precision + " \u00b7 " + t.optimizer_sharding +
      " \u00b7 recompute " + (typeof t.recompute === "string" ? t.recompute : JSON.stringify(t.recompute)) +
      (t.recompute_num_layers ? " (first " + t.recompute_num_layers + " layers per chunk)" : "") +
      " \u00b7 seq " + t.seq_len + " \u00b7 batch " + t.global_batch;
  }
  function headlineCards(parent, r) {
    const cards = h("div", { "class": "cards" }, parent);
    card(cards, "step time", fmtTime(r.step_time_s));
    card(cards, "tokens/s per GPU", fmtNum(r.tokens_per_s_per_gpu, 0));
    card(cards, "model TFLOP/s per GPU", fmtNum(r.model_tflops_per_gpu, 1), null, "MFU " + pct(r.mfu));
    // (HBM that fits beside host memory that does not: said as the text report says it.)
    const hbmFits = r.peak_memory_bytes <= r.memory_capacity_bytes;
    card(cards, "peak memory", fmtGB(r.peak_memory_bytes), r.fits ? "good" : "bad",
         r.fits ? "fits in " + fmtGB(r.memory_capacity_bytes)
                : hbmFits ? "fits in " + fmtGB(r.memory_capacity_bytes) + " of HBM; DOES NOT FIT in host memory"
                          : "DOES NOT FIT in " + fmtGB(r.memory_capacity_bytes));
    return cards;
  }
  function warnings(parent, r) {
    for (const w of r.warnings || []) h("div", { "class": "warn" }, parent, w);
  }
  function breakdownRow(name, r) {
    let total = 0;
    for (const kc of BREAKDOWN) total += r.breakdown_s[kc[0]] || 0;
    return { name: name, parts: r.breakdown_s, total: total };
  }
  function memoryRow(name, r) {
    return { name: name, parts: r.memory_breakdown_bytes, total: r.peak_memory_bytes, limit: r.memory_capacity_bytes,
             note: r.fits ? "" : "does not fit" };
  }
  function breakdownTable(parent, runs, names) {
    const t = h("table", null, parent);
    const hr = h("tr", null, t);
    h("th", { "class": "l" }, hr, "time");
    for (const n of names) h("th", null, hr, n);
    if (runs.length === 2) h("th", null, hr, "variant − base");
    for (const kc of BREAKDOWN) {
      const tr = h("tr", null, t);
      const td = h("td", { "class": "l" }, tr);
      h("i", { style: "display:inline-block;width:9px;height:9px;margin-right:6px;background:" + kc[1] }, td);
      td.appendChild(document.createTextNode(label(kc[0])));
      for (const r of runs) h("td", null, tr, fmtTime(r.breakdown_s[kc[0]] || 0) + "  (" +
                              pct((r.breakdown_s[kc[0]] || 0) / (r.step_time_s || 1)) + ")");
      if (runs.length === 2) changeCell(tr, (runs[1].breakdown_s[kc[0]] || 0) - (runs[0].breakdown_s[kc[0]] || 0), fmtTime);
    }
    if (runs.length === 2) {
      const tr = h("tr", null, t);
      h("td", { "class": "l" }, tr, "step time");
      for (const r of runs) h("td", null, tr, fmtTime(r.step_time_s));
      changeCell(tr, runs[1].step_time_s - runs[0].step_time_s, fmtTime);
    }
  }
  function memoryTable(parent, runs, names) {
    const t = h("table", null, parent);
    const hr = h("tr", null, t);
    h("th", { "class": "l" }, hr, "memory at the peak");
    for (const n of names) h("th", null, hr, n);
    if (runs.length === 2) h("th", null, hr, "variant − base");
    for (const kc of MEMORY) {
      const tr = h("tr", null, t);
      const td = h("td", { "class": "l" }, tr);
      h("i", { style: "display:inline-block;width:9px;height:9px;margin-right:6px;background:" + kc[1] }, td);
      td.appendChild(document.createTextNode(label(kc[0])));
      for (const r of runs) h("td", null, tr, fmtGB(r.memory_breakdown_bytes[kc[0]] || 0));
      if (runs.length === 2)
        changeCell(tr, (runs[1].memory_breakdown_bytes[kc[0]] || 0) - (runs[0].memory_breakdown_bytes[kc[0]] || 0), fmtGB);
    }
    if (runs.length === 2) {
      const tr = h("tr", null, t);
      h("td", { "class": "l" }, tr, "peak");
      for (const r of runs) h("td", null, tr, fmtGB(r.peak_memory_bytes));
      changeCell(tr, runs[1].peak_memory_bytes - runs[0].peak_memory_bytes, fmtGB);
    }
  }
  function changeCell(tr, d, fmt) {
    h("td", { "class": d < 0 ? "good" : d > 0 ? "bad" : "" }, tr, d === 0 ? "0" : (d > 0 ? "+" : "−") + fmt(Math.abs(d)));
  }
  function scenarioDetails(parent, runs, names) {
    runs.forEach(function (r, i) {
      const d = h("details", null, parent);
      h("summary", null, d, "resolved scenario" + (names.length > 1 ? " (" + names[i] + ")" : "") +
        ": rerun with racksim run");
      h("pre", null, d, JSON.stringify(r.scenario, null, 2));
    });
  }

  function drawRuns(D) {
    const runs = D.runs, names = D.kind === "compare" ? ["base", "variant"] : ["this run"];
    const head = document.getElementById("headline");
    const main = document.getElementById("main");
    if (D.kind === "run") {
      document.getElementById("title").textContent = runs[0].scenario.name || "racksim run";
      document.getElementById("subtitle").textContent = describe(runs[0].scenario);
      headlineCards(head, runs[0]);
    } else {
      document.getElementById("title").textContent = "compare: " + (runs[0].scenario.name || "base") + "  vs  " +
                                                     (runs[1].scenario.name || "variant");
      const sub = document.getElementById("subtitle");
      sub.textContent = "speedup (variant / base tokens/s per GPU): ";
      const sp = h("span", { "class": "speedup " + (D.speedup >= 1 ? "good" : "bad"), id: "speedup" }, sub,
                   D.speedup.toFixed(3) + "\u00d7");
      sp.setAttribute("data-speedup", D.speedup);
      const cols = h("div", { "class": "cols", style: "display:grid;grid-template-columns:1fr 1fr;gap:24px" }, head);
      runs.forEach(function (r, i) {
        const c = h("div", null, cols);
        h("h3", null, c, names[i] + ": " + (r.scenario.name || ""));
        h("div", { "class": "sub" }, c, describe(r.scenario));
        headlineCards(c, r).style.gridTemplateColumns = "repeat(4, 1fr)";
      });
    }
    for (let i = 0; i < runs.length; ++i) {
      if ((runs[i].warnings || []).length && runs.length > 1) h("div", { "class": "sub" }, main, names[i] + ":");
      warnings(main, runs[i]);
    }
    h("h2", null, main, "Step time breakdown");
    h("div", { "class": "sub" }, main, "Each instant of the step is charged to the first of compute, recompute, " +
      "exposed communication, exposed offload, launch overhead, pipeline bubble, idle; the parts add up to the step time.");
    legend(main, BREAKDOWN.map(function (kc) { return [label(kc[0]), kc[1]]; }));
    stackedBars(h("div", { "class": "chart", id: "chart-breakdown" }, main),
                runs.map(function (r, i) { return breakdownRow(names[i], r); }), BREAKDOWN, fmtTick,
                { title: "step time breakdown" });
    breakdownTable(main, runs, names);

    h("h2", null, main, "Memory at the peak against HBM capacity (per GPU)");
    legend(main, MEMORY.map(function (kc) { return [label(kc[0]), kc[1]]; }));
    stackedBars(h("div", { "class": "chart", id: "chart-memory" }, main),
                runs.map(function (r, i) { return memoryRow(names[i], r); }), MEMORY, fmtGB,
                { title: "memory breakdown" });
    memoryTable(main, runs, names);

    h("h2", null, main, "Timeline of one step, per stream" + (runs.length > 1 ? " (same time scale)" : ""));
    h("div", { "class": "sub" }, main, "One simulated rank role; hover a bar for the ops it covers.");
    timelines(h("div", { id: "chart-timeline" }, main), runs, runs.length > 1 ? names : null);
    scenarioDetails(main, runs, names);
  }

  function drawSweep(D) {
    const main = document.getElementById("main"), head = document.getElementById("headline");
    const keys = D.keys, pts = D.points;
    document.getElementById("title").textContent = "sweep: " + D.sweep_file;
    document.getElementById("subtitle").textContent = "base scenario " + D.base + " \u00b7 varied: " + keys.join(", ");
    const ok = pts.filter(function (p) { return p.e < 0; });
    const fit = ok.filter(function (p) { return p.f; });
    const cards = h("div", { "class": "cards" }, head);
    card(cards, "points", fmtNum(pts.length, 0));
    card(cards, "fit in memory", fmtNum(fit.length, 0), "good");
    card(cards, "do not fit", fmtNum(ok.length - fit.length, 0), ok.length > fit.length ? "bad" : null);
    card(cards, "invalid (errors)", fmtNum(pts.length - ok.length, 0), pts.length > ok.length ? "bad" : null);
    let best = null;
    for (const p of fit) if (!best || p.t > best.t) best = p;
    if (best) card(cards, "best tokens/s per GPU", fmtNum(best.t, 0), null,
                   keys.map(function (k, i) { return k.split(".").pop() + "=" + best.v[i]; }).join(" "));

    h("h2", null, main, "Throughput against the varied keys");
    const controls = h("div", { "class": "controls" }, main);
    const xl = h("label", null, controls, "x axis ");
    const xs = h("select", { id: "sweep-x" }, xl);
    const cl = h("label", null, controls, "colour ");
    const cs = h("select", { id: "sweep-color" }, cl);
    keys.forEach(function (k, i) { h("option", { value: i }, xs, k); h("option", { value: i }, cs, k); });
    h("option", { value: -1 }, cs, "(none)");
    xs.value = 0;
    cs.value = keys.length > 1 ? 1 : -1;
    const note = h("div", { "class": "sub" }, main,
      "Each dot is a point of the sweep; within a column the dots are the combinations of the other keys. " +
      "The line joins the best point that fits for each colour. Points that do not fit in memory are red crosses; " +
      "invalid points are listed below.");
    const legendBox = h("div", null, main);
    const chart = h("div", { "class": "chart", id: "chart-sweep" }, main);
    function draw() {
      chart.textContent = "";
      legendBox.textContent = "";
      const xi = Number(xs.value), ci = Number(cs.value);
      const xvals = D.values[xi], cvals = ci >= 0 ? D.values[ci] : [""];
      const W = 1300, H = 460, left = 80, right = 20, top = 16, bottom = 64;
      const maxT = Math.max.apply(null, ok.map(function (p) { return p.t; }).concat([1])) * 1.08;
      const band = (W - left - right) / xvals.length;
      const x0 = function (j) { return left + band * j; };
      const y = function (t) { return top + (H - top - bottom) * (1 - t / maxT); };
      const svg = svgRoot(chart, W, H, "tokens per second per GPU against " + keys[xi]);
      svg.setAttribute("class", "racksim-chart sweep");
      for (const t of niceTicks(maxT, 6)) {
        s("line", { x1: left, x2: W - right, y1: y(t), y2: y(t), "class": "grid" }, svg);
        s("text", { x: left - 6, y: y(t) + 4, "text-anchor": "end" }, svg, fmtNum(t, 0));
      }
      s("text", { x: 14, y: top + (H - top - bottom) / 2, transform: "rotate(-90 14 " + (top + (H - top - bottom) / 2) + ")",
                  "text-anchor": "middle" }, svg, "tokens/s per GPU");
      xvals.forEach(function (v, j) {
        if (j > 0) s("line", { x1: x0(j), x2: x0(j), y1: top, y2: H - bottom, "class": "grid" }, svg);
        s("text", { x: x0(j) + band / 2, y: H - bottom + 16, "text-anchor": "middle" }, svg, v);
      });
      s("text", { x: left + (W - left - right) / 2, y: H - bottom + 36, "text-anchor": "middle", "font-weight": "600" },
        svg, keys[xi]);
      s("line", { x1: left, x2: left, y1: top, y2: H - bottom, "class": "axis" }, svg);
      s("line", { x1: left, x2: W - right, y1: H - bottom, y2: H - bottom, "class": "axis" }, svg);
      // Positions: column by x value, sub-column by colour value, spread by the rest in point order.
      const groups = {};
      for (const p of ok) {
        const k = p.vi[xi] + "/" + (ci >= 0 ? p.vi[ci] : 0);
        (groups[k] = groups[k] || []).push(p);
      }
      const sub = band / cvals.length;
      const bestLine = cvals.map(function () { return []; });
      for (const k in groups) {
        const g = groups[k];
        const j = g[0].vi[xi], c = ci >= 0 ? g[0].vi[ci] : 0;
        const lo = x0(j) + sub * c + sub * 0.12, w = sub * 0.76;
        let bestP = null;
        g.forEach(function (p, n) {
          const px = g.length > 1 ? lo + w * n / (g.length - 1) : lo + w / 2;
          const py = y(p.t);
          const col = SERIES[c % SERIES.length];
          const text = keys.map(function (kk, i) { return kk + " = " + p.v[i]; }).join("\n") + "\ntokens/s per GPU " +
                       fmtNum(p.t, 0) + "\nstep " + fmtTime(p.s) + ", MFU " + pct(p.m) + "\npeak " + fmtGB(p.p) +
                       " of " + fmtGB(p.c) + (p.f ? "" : " (DOES NOT FIT)");
          if (p.f) {
            tip(s("circle", { cx: px, cy: py, r: 3.6, fill: col, "fill-opacity": 0.85, "class": "pt fits" }, svg), text);
            if (!bestP || p.t > bestP.t) bestP = p;
          } else {
            const m = s("g", { "class": "pt nofit" }, svg);
            s("path", { d: "M" + (px - 3.5) + "," + (py - 3.5) + "l7,7m0,-7l-7,7", stroke: "#d92d20", "stroke-width": 1.8 }, m);
            tip(m, text);
          }
        });
        if (bestP) bestLine[c].push([x0(j) + sub * (c + 0.5), y(bestP.t), j]);
      }
      const invalid = xvals.map(function () { return 0; });
      for (const p of pts) if (p.e >= 0) invalid[p.vi[xi]]++;
      invalid.forEach(function (n, j) {
        if (n) s("text", { x: x0(j) + band / 2, y: H - bottom - 8, "text-anchor": "middle", fill: "#b42318",
                           "class": "invalid-count" }, svg, n + " invalid");
      });
      bestLine.forEach(function (line, c) {
        line.sort(function (a, b) { return a[2] - b[2]; });
        if (line.length > 1)
          s("polyline", { points: line.map(function (q) { return q[0] + "," + q[1]; }).join(" "), fill: "none",
                          stroke: SERIES[c % SERIES.length], "stroke-width": 1.5, "stroke-opacity": 0.7 }, svg);
      });
      const items = ci >= 0 ? cvals.map(function (v, c) { return [keys[ci] + " = " + v, SERIES[c % SERIES.length]]; })
                            : [["fits", SERIES[0]]];
      items.push(["does not fit (\u00d7)", "#d92d20"]);
      legend(legendBox, items);
      if (!ok.length) h("p", { "class": "err" }, chart, "No point of this sweep is valid: nothing to chart.");
    }
    xs.addEventListener("change", draw);
    cs.addEventListener("change", draw);
    draw();

    h("h2", null, main, "Best configurations that fit");
    const top = fit.slice().sort(function (a, b) { return b.t - a.t; }).slice(0, 15);
    if (!top.length) h("p", { "class": "sub" }, main, "No point fits in memory.");
    else pointTable(main, top);

    h("h2", null, main, "Invalid points (" + (pts.length - ok.length) + ")");
    if (pts.length === ok.length) h("p", { "class": "sub" }, main, "None.");
    const byErr = {};
    for (const p of pts) if (p.e >= 0) (byErr[p.e] = byErr[p.e] || []).push(p);
    const errList = h("div", { id: "sweep-errors" }, main);
    Object.keys(byErr).forEach(function (e) {
      const list = byErr[e];
      const d = h("div", { "class": "err" }, errList);
      h("b", null, d, list.length + " point" + (list.length > 1 ? "s" : "") + ": ");
      d.appendChild(document.createTextNode(D.errors[e]));
      const ex = list.slice(0, 4).map(function (p) {
        return keys.map(function (k, i) { return k.split(".").pop() + "=" + p.v[i]; }).join(" ");
      });
      h("div", { "class": "sub" }, d, "e.g. " + ex.join("; ") + (list.length > 4 ? "; \u2026" : ""));
    });

    const all = h("details", null, main);
    h("summary", null, all, "all " + pts.length + " points");
    pointTable(all, pts);
  }
  function pointTable(parent, list) {
    const D = window.__racksim;
    const t = h("table", null, parent);
    const hr = h("tr", null, t);
    for (const k of D.keys) h("th", { "class": "l" }, hr, k);
    for (const c of ["tokens/s/GPU", "step time", "MFU", "peak memory", "fits", "error"]) h("th", null, hr, c);
    for (const p of list) {
      const tr = h("tr", null, t);
      p.v.forEach(function (v) { h("td", { "class": "l" }, tr, v); });
      if (p.e >= 0) {
        for (let i = 0; i < 5; ++i) h("td", null, tr, "");
        h("td", { "class": "l bad" }, tr, D.errors[p.e]);
        continue;
      }
      h("td", null, tr, fmtNum(p.t, 0));
      h("td", null, tr, fmtTime(p.s));
      h("td", null, tr, pct(p.m));
      h("td", null, tr, fmtGB(p.p));
      h("td", { "class": p.f ? "good" : "bad" }, tr, p.f ? "yes" : "no");
      h("td", null, tr, "");
    }
  }

  try {
    const D = JSON.parse(document.getElementById("racksim-data").textContent);
    window.__racksim = D;
    document.title = "racksim " + D.kind + " report";
    if (D.kind === "sweep") drawSweep(D); else drawRuns(D);
    const n = document.querySelectorAll("svg.racksim-chart").length;
    status.textContent = "drawn: " + n + " charts";
    status.setAttribute("data-rendered", "ok");
    status.setAttribute("data-charts", n);
  } catch (e) {
    failed(e && e.message ? e.message : String(e));
    console.error("racksim report: " + (e && e.stack ? e.stack : e));
  }
})();
</script>
</body>
</html>
)RACKSIM";

}  // namespace racksim::sim
