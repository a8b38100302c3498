"""The `/proxy/status` page: one HTML document with its CSS, script and chart inline (it works
on a LAN with no internet; nothing is fetched but `status.json` beside it). The script asks
for the document every few seconds and redraws the page in place, without a reload."""

from __future__ import annotations

import base64
import hashlib

REFRESH_SECONDS = 3

_STYLE = """
:root{--bg:#f6f7f9;--card:#fff;--ink:#1d2330;--mute:#6b7385;--line:#e3e6ec;--ok:#1f9d55;
--bad:#d64545;--warn:#c98a00;--acc:#3b6fd8;--chip:#eef2fb}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
background:var(--bg);color:var(--ink)}
header{display:flex;align-items:baseline;gap:16px;padding:14px 24px;background:#1d2330;
color:#fff}
header h1{font-size:18px;margin:0;font-weight:600}
header .meta{color:#b8c0d4;font-size:12px}
header .live{margin-left:auto;font-size:12px;color:#b8c0d4}
main{padding:16px 24px;display:grid;gap:16px;grid-template-columns:minmax(0,1fr) minmax(0,1fr)}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 16px;
min-width:0}
section.wide{grid-column:1/-1}
h2{font-size:13px;text-transform:uppercase;letter-spacing:.06em;color:var(--mute);margin:0 0 8px}
table{width:100%;border-collapse:collapse;font-size:13px}
th{text-align:left;color:var(--mute);font-weight:500;border-bottom:1px solid var(--line);
padding:4px 8px 4px 0;white-space:nowrap}
td{border-bottom:1px solid var(--line);padding:5px 8px 5px 0;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr:last-child td{border-bottom:0}
.chip{display:inline-block;background:var(--chip);border-radius:10px;padding:0 7px;
margin:1px 3px 1px 0;font-size:12px;white-space:nowrap}
.chip.repair{background:#fff4dc}.chip.reask{background:#dcf4ff}.chip.left{background:#f1eafc}
.chip.err{background:#fde8e8;color:#9b1c1c}
.state{font-weight:600}.state.up{color:var(--ok)}.state.down{color:var(--bad)}
.state.unknown{color:var(--mute)}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:6px;background:var(--mute)}
.up .dot{background:var(--ok)}.down .dot{background:var(--bad)}
.bad{color:var(--bad)}tr.failed td{background:#fff6f6}.mute{color:var(--mute)}
.url{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;word-break:break-all}
.scroll{max-height:520px;overflow:auto}
#banner{display:none;grid-column:1/-1;background:#fde8e8;color:#9b1c1c;border-radius:8px;
padding:8px 12px}
svg text{font-size:11px;fill:var(--mute)}#chart{overflow:hidden}
.legend{font-size:12px;color:var(--mute)}.legend i{display:inline-block;width:10px;height:10px;
margin:0 4px 0 12px;vertical-align:-1px}
a{color:var(--acc)}.k-turns{background:#3b6fd8}.k-failed{background:#d64545}
@media (max-width:900px){main{grid-template-columns:1fr}}
"""

_SCRIPT = """
"use strict";
const REFRESH = %(refresh)d * 1000;
function el(tag, props, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const kid of kids) if (kid !== null && kid !== undefined)
    node.append(kid instanceof Node ? kid : String(kid));
  return node;
}
function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}
const ms = v => v === null || v === undefined ? "–" : (v >= 1000 ? (v / 1000).toFixed(2) + " s"
  : Math.round(v) + " ms");
const clock = ts => new Date(ts * 1000).toLocaleTimeString([], {hour12: false});
function chips(counts, cls) {
  const span = el("span");
  for (const [k, n] of Object.entries(counts || {}))
    span.append(el("span", {class: "chip " + (cls || ""), title: k}, n > 1 ? k + " ×" + n : k));
  return span;
}
function cell(value, cls) { return el("td", cls ? {class: cls} : {}, value); }
function fill(id, rows, empty, span) {
  const body = document.getElementById(id);
  body.replaceChildren(...(rows.length ? rows
    : [el("tr", {}, el("td", {colspan: span, class: "mute"}, empty))]));
}
function profiles(probe) {
  // one chip per kind of server, naming the models it serves (every listed model's)
  const span = el("span"), chips = new Map();
  for (const [model, p] of Object.entries((probe && probe.profiles) || {})) {
    const text = p.kind + (p.version ? " " + p.version : "") +
      (p.context_length ? " · " + p.context_length : "") +
      (p.refused && p.refused.length ? " · refused " + p.refused.join(", ") : "");
    chips.set(text, [...(chips.get(text) || []), model]);
  }
  for (const [text, names] of chips)
    span.append(el("span", {class: "chip profile", title: names.join(", ")}, " " +
      (names.length > 3 ? names.slice(0, 3).join(", ") + " +" + (names.length - 3)
                        : names.join(", ")) + ": " + text));
  for (const r of (probe && probe.refusals) || [])
    span.append(el("span", {class: "chip " + (r.blamed === "server" ? "err" : ""),
      title: "refused at " + clock(r.at) + (r.until ? ", until " + clock(r.until) : "")},
      " " + r.model + " refused " + r.field + " (" + r.blamed + ")"));
  return span;
}
function upstreams(doc) {
  fill("upstreams", doc.upstreams.map(u => {
    const err = u.last_error;
    return el("tr", {"data-url": u.url},
      el("td", {class: "state " + u.state}, el("span", {class: "dot"}), u.state),
      el("td", {class: "url"}, u.url, profiles(u.probe)), cell(u.in_flight, "num"),
      cell(ms(u.latency_p50_ms), "num"),
      cell(ms(u.latency_p95_ms), "num"), cell(u.turns, "num"),
      cell(u.failures, u.failures ? "num bad" : "num"),
      el("td", {}, err ? el("span", {class: "chip err"}, err.code + (err.status ? " (" +
        err.status + ")" : "")) : el("span", {class: "mute"}, "none"),
        err ? el("span", {class: "mute"}, " " + clock(err.ts)) : null));
  }), "no upstream", 8);
}
function models(doc) {
  fill("models", doc.models.map(m => el("tr", {"data-model": m.model},
    cell(m.model || "(none)"), cell(m.turns, "num"),
    cell(m.tool_turns + (m.tool_turns ? " (" + m.buffered + " buf / " + m.streamed + " str)"
      : ""), "num"),
    cell(m.passthrough, "num"), cell(m.calls, "num"), el("td", {}, chips(m.formats)),
    el("td", {}, chips(m.repairs, "repair"), chips(m.reasks, "reask")),
    el("td", {}, chips(m.left_as_text, "left")),
    el("td", {}, chips(m.schema_invalid || {}, "left")),
    el("td", {}, chips(m.errors, "err")), cell(m.heartbeats, "num"))),
    "no turn yet", 11);
}
function turns(doc) {
  fill("turns", doc.turns.map(t => el("tr", {class: t.failed ? "failed" : ""},
    cell(clock(t.ts)), el("td", {}, t.front || "relay", el("span", {class: "mute"},
      " " + t.mode + (t.stream ? " · sse" : ""))), cell(t.model || "–"),
    cell(t.status, t.status >= 400 ? "num bad" : "num"), cell(t.calls, "num"),
    el("td", {}, chips(t.formats)),
    el("td", {}, chips(t.repairs, "repair"), chips(t.reasks, "reask")),
    el("td", {}, chips(t.left_as_text, "left"), t.error ? chips({[t.error]: 1}, "err") : null),
    el("td", {}, chips(t.schema_invalid || {}, "left")),
    cell(t.upstream || "–", "url"), cell(ms(t.upstream_ms), "num"), cell(ms(t.total_ms), "num"),
    el("td", {}, t.capture ? el("a", {href: t.capture, download: ""}, "capture") : null))),
    "no turn yet", 13);
}
function chart(doc) {
  const box = document.getElementById("chart"), H = 180, L = 34, B = 20, T = 8;
  const W = Math.max(360, box.clientWidth || 720);
  const data = doc.per_minute, n = data.length;
  const top = Math.max(1, ...data.map(d => d.turns));
  const scale = v => H - B - (H - B - T) * v / top, bw = (W - L - 4) / n;
  const root = svg("svg", {viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img",
    "aria-label": "turns and failures per minute, last hour", id: "chart-svg"});
  for (const f of [0, 0.5, 1]) {
    const y = scale(top * f);
    root.append(svg("line", {x1: L, x2: W, y1: y, y2: y, stroke: "#e3e6ec"}));
    const label = svg("text", {x: L - 4, y: y + 3, "text-anchor": "end"});
    label.textContent = Math.round(top * f); root.append(label);
  }
  data.forEach((d, i) => {
    const x = L + 2 + i * bw, title = svg("title");
    title.textContent = clock(d.minute) + ": " + d.turns + " turns, " + d.failures + " failed";
    if (d.turns) {
      const bar = svg("rect", {x: x, y: scale(d.turns), width: Math.max(1, bw - 2),
        height: H - B - scale(d.turns), fill: "#3b6fd8", class: "turns"});
      bar.append(title); root.append(bar);
    }
    if (d.failures) root.append(svg("rect", {x: x, y: scale(d.failures),
      width: Math.max(1, bw - 2), height: H - B - scale(d.failures), fill: "#d64545",
      class: "failures"}));
    if (i %% 10 === 0 || i === n - 1) {
      const label = svg("text", {x: i === n - 1 ? x + bw : x + bw / 2, y: H - 6,
        "text-anchor": i === n - 1 ? "end" : "middle"});
      label.textContent = clock(d.minute).slice(0, 5); root.append(label);
    }
  });
  box.replaceChildren(root);
}
async function refresh() {
  const banner = document.getElementById("banner");
  try {
    const reply = await fetch("status.json", {cache: "no-store", credentials: "same-origin"});
    if (!reply.ok) throw new Error("status.json answered " + reply.status);
    const doc = await reply.json();
    upstreams(doc); models(doc); turns(doc); chart(doc);
    const held = doc.held;
    document.getElementById("meta").textContent = "version " + doc.version + " · " + held.turns
      + " turns held" + (held.since ? " since " + clock(held.since) : "")
      + (doc.captures ? " · captures on (log_bodies)" : "");
    document.getElementById("updated").textContent = "updated " + clock(doc.generated);
    banner.style.display = "none";
  } catch (error) {
    banner.textContent = "Cannot refresh: " + error.message;
    banner.style.display = "block";
  }
}
refresh();
setInterval(refresh, REFRESH);
"""

_BODY = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Tool Call Proxy status</title>
<style>%(style)s</style></head>
<body>
<header><h1>Tool Call Proxy</h1><span class="meta" id="meta">loading…</span>
<span class="live" id="updated"></span></header>
<main>
<div id="banner" role="alert"></div>
<section class="wide" id="upstreams-section"><h2>Upstreams</h2><table>
<thead><tr><th>state</th><th>url</th><th class="num">in flight</th><th class="num">p50</th>
<th class="num">p95</th><th class="num">turns</th><th class="num">failed</th><th>last error</th>
</tr></thead><tbody id="upstreams"></tbody></table></section>
<section class="wide" id="models-section"><h2>Per model</h2><table>
<thead><tr><th>model</th><th class="num">turns</th><th class="num">tool turns</th>
<th class="num">passthrough</th><th class="num">calls</th><th>calls by format</th>
<th>repairs</th><th>left as text</th><th>schema invalid</th><th>errors</th>
<th class="num">heartbeats</th></tr></thead>
<tbody id="models"></tbody></table></section>
<section class="wide"><h2>Turns and failures per minute, last hour</h2>
<div class="legend"><i class="k-turns"></i>turns<i class="k-failed"></i>failed</div>
<div id="chart"></div></section>
<section class="wide"><h2>Last turns</h2><div class="scroll"><table>
<thead><tr><th>time</th><th>front, mode</th><th>model</th><th class="num">status</th>
<th class="num">calls</th><th>formats</th><th>repairs</th><th>left as text / error</th>
<th>schema invalid</th><th>upstream</th><th class="num">upstream</th><th class="num">total</th>
<th></th></tr></thead>
<tbody id="turns"></tbody></table></div></section>
</main>
<script>%(script)s</script>
</body></html>
"""


_SCRIPT_TEXT = _SCRIPT % {"refresh": REFRESH_SECONDS}


def _digest(text: str) -> str:
    """A CSP source allowing exactly this inline script or style."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# What the page may do: run its own inline script and style (those exact texts, by their
# hashes: nothing injected would run), fetch from its own origin.
CONTENT_SECURITY_POLICY = (f"default-src 'none'; script-src {_digest(_SCRIPT_TEXT)}; "
                           f"style-src {_digest(_STYLE)}; connect-src 'self'; img-src data:; "
                           "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def page() -> bytes:
    """The page, as served."""
    return (_BODY % {"style": _STYLE, "script": _SCRIPT_TEXT}).encode()
