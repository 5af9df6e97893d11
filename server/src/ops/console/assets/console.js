// The zooraft console. Every element is built with el() and filled with textContent:
// node names, data and labels are whatever clients wrote, so nothing here ever parses
// server text as HTML.
"use strict";

const state = { credentials: null, timer: null, superUser: false, confirming: false, live: null, locksZxid: null };

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "onclick") e.addEventListener("click", v);
    else if (k === "className") e.className = v;
    else e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  return e;
}

function table(headers, rows, attrs) {
  const head = el("tr", {}, ...headers.map((h) => el("th", {}, h)));
  const body = rows.map((r) => {
    const cells = r.cells || r;
    return el("tr", r.attrs || {}, ...cells.map((c) =>
      (c && c.nodeType) ? el("td", {}, c) : el("td", typeof c === "number" ? { className: "num" } : {}, c === null || c === undefined ? "" : c)));
  });
  return el("table", attrs || {}, el("thead", {}, head), el("tbody", {}, ...body));
}

function notice(text, isError) {
  const n = document.getElementById("notice");
  n.textContent = text || "";
  n.className = isError ? "error" : "";
}

async function api(path, method) {
  const headers = {};
  if (state.credentials) headers["Authorization"] = "digest " + state.credentials;
  const r = await fetch("/console/api/" + path, { method: method || "GET", headers, cache: "no-store" });
  let body = null;
  try { body = await r.json(); } catch (e) { body = { error: "unreadable answer" }; }
  if (!r.ok) throw Object.assign(new Error(body && body.error ? body.error : "HTTP " + r.status), { status: r.status });
  return body;
}

async function action(name, params) {
  const q = new URLSearchParams(params || {}).toString();
  try {
    const r = await api("action/" + name + (q ? "?" + q : ""), "POST");
    notice(r.message || "done", false);
    return true;
  } catch (e) {
    notice(name + " refused: " + e.message, true);
    return false;
  }
}

// A two-step button: the first click shows what will happen, the second does it.
function confirmButton(label, question, run) {
  // A live page holds still while a question is open.
  const box = el("span", {});
  const close = () => { state.confirming = false; box.replaceChildren(button); };
  const button = el("button", { className: "danger", onclick: () => {
    state.confirming = true;
    box.replaceChildren(el("span", { className: "confirm" }, question + " ",
      el("button", { className: "confirm-yes", onclick: async () => { close(); await run(); refresh(); } }, "Confirm"),
      " ", el("button", { className: "confirm-no", onclick: close }, "Cancel")));
  } }, label);
  box.appendChild(button);
  return box;
}

const when = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC") : "");
const ago = (ms) => (ms === null || ms === undefined ? "" : (ms / 1000).toFixed(1) + " s");

// ---------------------------------------------------------------- Ensemble

async function ensemblePage() {
  const e = await api("ensemble");
  const me = e.me;
  const rows = e.members.map((m) => ({
    attrs: { className: m.mode === "leader" ? "member leader" : "member", "data-member": m.id },
    cells: [m.id, m.host, m.client, m.learner_type, m.mode || "", m.term === null ? "" : m.term,
      m.serving === null ? "" : (m.serving ? "yes" : "no"), m.last_zxid || "", m.lag === null ? "" : m.lag,
      m.disk_free_bytes === null ? "" : (m.disk_free_bytes / 1073741824).toFixed(1) + " GiB" + (m.disk_full ? " (full)" : ""),
      m.error || "",
      m.is_me ? "this member" : "",
      state.superUser && m.learner_type === "participant" && m.mode && m.mode !== "leader"
        ? confirmButton("Make leader", "Hand the leadership to server " + m.id + "?", () => action("transfer", { to: m.id }))
        : ""],
  }));
  const parts = [el("h2", {}, "Ensemble")];
  if (e.members.length) {
    parts.push(table(["id", "host", "client", "type", "role", "term", "serving", "last zxid", "lag (txns)", "disk free", "error", "", ""], rows, { id: "members" }));
  } else {
    parts.push(el("p", {}, "Standalone member."));
  }
  const timeline = (e.timeline || []).slice().reverse().map((ev) => ({
    attrs: { className: "event " + ev.kind },
    cells: [when(ev.t), ev.kind, ev.kind === "leader"
      ? "leader " + (ev.leader || "none") + " (term " + ev.term + ")" + (ev.previous === null ? "" : ", was " + (ev.previous || "none"))
      : "members " + ev.members + (ev.previous === null ? "" : ", were " + ev.previous)],
  }));
  parts.push(el("h3", {}, "Leader and membership changes seen by this member (last hour)"),
    timelineStrip(e.timeline || []),
    timeline.length ? table(["when", "what", "change"], timeline, { id: "timeline" }) : el("p", {}, "none"));
  parts.push(el("h3", {}, "This member (" + me.id + ")"));
  const tls = me.tls;
  parts.push(table(["figure", "value"], [
    ["role", me.role], ["serving", String(me.serving)], ["Raft term", me.term],
    ["leader", me.leader], ["last zxid", me.last_zxid], ["commit index", me.commit_index],
    ["applied index", me.applied_index], ["znodes", me.znodes], ["sessions", me.sessions],
    ["connections", me.connections], ["watches", me.watches],
    ["disk free", me.disk_free_bytes + " bytes"], ["disk reserve", me.disk_reserve_bytes + " bytes"],
    ["disk full", String(me.disk_full)], ["data trusted", String(me.data_trusted)],
    ["TLS", "quorum " + tls.quorum + ", secure client port " + tls.client_port + ", admin " + tls.admin],
  ], { id: "me" }));
  if (state.superUser) {
    parts.push(el("div", { className: "box" }, el("h3", {}, "Super user"),
      el("button", { id: "snapshot", onclick: () => action("snapshot") }, "Take a snapshot"), " ",
      el("button", { id: "request-leadership", onclick: () => action("request_leadership") }, "Make this member the leader"), " ",
      el("button", { id: "yield-leadership", onclick: () => action("yield_leadership") }, "Leader: hand over")));
  }
  return parts;
}

// The last hour as a strip: a mark per change (leader changes above, membership below),
// each labelled with the new leader's id.
function timelineStrip(events) {
  const W = 900, H = 46, L = 8, R = 8, now = Date.now(), hour = 3600000;
  const x = (t) => L + Math.max(0, Math.min(1, (t - (now - hour)) / hour)) * (W - L - R);
  const g = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, id: "timeline-strip" });
  g.appendChild(svg("line", { x1: L, y1: 22, x2: W - R, y2: 22, stroke: "#8a93a3" }));
  const label = (text, attrs) => { const t = svg("text", Object.assign({ "font-size": 10, fill: "#555" }, attrs)); t.textContent = text; g.appendChild(t); };
  label("an hour ago", { x: L, y: H - 2 });
  label("now", { x: W - R - 20, y: H - 2 });
  for (const ev of events) {
    const leader = ev.kind === "leader";
    g.appendChild(svg("line", { x1: x(ev.t), y1: leader ? 8 : 22, x2: x(ev.t), y2: leader ? 22 : 36,
      stroke: leader ? "#0a6b2f" : "#1f6fd1", "stroke-width": 2, class: "mark " + ev.kind }));
    if (leader) label(ev.leader ? String(ev.leader) : "–", { x: x(ev.t) + 2, y: 10 });
  }
  return g;
}

// ---------------------------------------------------------------- Tree

function hexToBytes(hex) {
  const b = new Uint8Array(hex.length / 2);
  for (let i = 0; i < b.length; i++) b[i] = parseInt(hex.substr(i * 2, 2), 16);
  return b;
}

function dataView(hex, mode) {
  if (hex === null || hex === undefined) return el("pre", { id: "data" }, "(null)");
  const bytes = hexToBytes(hex);
  let text;
  if (mode === "hex") {
    const lines = [];
    for (let i = 0; i < bytes.length; i += 16) {
      const row = Array.from(bytes.slice(i, i + 16));
      lines.push(i.toString(16).padStart(6, "0") + "  " + row.map((x) => x.toString(16).padStart(2, "0")).join(" "));
    }
    text = lines.join("\n");
  } else {
    text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
    if (mode === "json") {
      try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { text = "(not JSON) " + text; }
    }
  }
  return el("pre", { id: "data" }, text);
}

function treeLink(path, label) {
  return el("a", { href: "#tree?path=" + encodeURIComponent(path), className: "path" }, label === undefined ? path : label);
}

function childPath(parent, name) { return parent === "/" ? "/" + name : parent + "/" + name; }

async function treePage(params) {
  const path = params.get("path") || "/";
  const offset = parseInt(params.get("offset") || "0", 10) || 0;
  const mode = params.get("view") || "text";
  const n = await api("node?path=" + encodeURIComponent(path) + "&offset=" + offset + "&limit=100");
  const crumbs = el("div", { className: "crumbs" }, treeLink("/", "/"));
  let acc = "";
  path.split("/").filter((p) => p).forEach((part, i) => {
    acc += "/" + part;
    if (i > 0) crumbs.appendChild(document.createTextNode(" / "));
    crumbs.appendChild(treeLink(acc, part));
  });
  const go = el("input", { id: "path-input", value: path, size: 50 });
  const search = el("input", { id: "search-input", placeholder: "path prefix", size: 30 });
  const results = el("div", { id: "search-results" });
  const nav = el("div", { className: "box" }, "Path ", go, " ",
    el("button", { id: "go", onclick: () => { location.hash = "tree?path=" + encodeURIComponent(go.value); } }, "Open"),
    "  Search ", search, " ",
    el("button", { id: "search", onclick: async () => {
      const r = await api("search?prefix=" + encodeURIComponent(search.value));
      results.replaceChildren(el("div", {}, r.paths.length + " found" + (r.complete ? "" : " (stopped early)")),
        ...r.paths.map((p) => el("div", {}, treeLink(p))));
    } }, "Find"), results);
  const viewLink = (m) => el("a", { href: "#tree?path=" + encodeURIComponent(path) + "&view=" + m, className: m === mode ? "active" : "" }, m);
  const s = n.stat;
  const z = (x) => x.hex + " (epoch " + x.epoch + ", counter " + x.counter + ")";
  const stat = table(["field", "value"], [
    ["czxid", z(s.czxid)], ["mzxid", z(s.mzxid)], ["pzxid", z(s.pzxid)],
    ["ctime", when(s.ctime)], ["mtime", when(s.mtime)], ["version", s.version],
    ["cversion", s.cversion], ["aversion", s.aversion], ["ephemeralOwner", s.ephemeralOwner],
    ["dataLength", s.dataLength], ["numChildren", s.numChildren],
  ], { id: "stat" });
  const acl = table(["scheme", "id", "perms"], n.acl.map((a) => [a.scheme, a.id, a.perms]), { id: "acl" });
  const c = n.children;
  const page = (o) => "#tree?path=" + encodeURIComponent(path) + "&offset=" + Math.max(0, o);
  const children = el("div", { id: "children" },
    el("div", {}, c.total + " children; " + (c.total ? (c.offset + 1) + "–" + (c.offset + c.names.length) : "none") + " ",
      c.offset > 0 ? el("a", { href: page(c.offset - 100), id: "prev" }, "previous") : null, " ",
      c.offset + c.names.length < c.total ? el("a", { href: page(c.offset + 100), id: "next" }, "next") : null),
    el("ul", {}, ...c.names.map((ch) => el("li", { className: "child" }, treeLink(childPath(path, ch.name), ch.name),
      ch.children ? " (" + ch.children + ")" : ""))));
  const parts = [el("h2", {}, "Tree"), nav, crumbs, el("h3", { id: "node-path", className: "path" }, n.path)];
  if (state.superUser && path !== "/") {
    const owner = s.ephemeralOwner !== "0x0" ? " (ephemeral of session " + s.ephemeralOwner + ")" : "";
    parts.push(confirmButton("Delete node", "Delete " + path + owner + "?", async () => {
      if (await action("delete", { path })) location.hash = "tree?path=" + encodeURIComponent(path.replace(/\/[^/]*$/, "") || "/");
    }));
  }
  parts.push(el("div", { className: "row" },
    el("div", {}, el("h3", {}, "Data ", viewLink("text"), " ", viewLink("json"), " ", viewLink("hex")), dataView(n.data_hex, mode),
      el("h3", {}, "Children"), children),
    el("div", {}, el("h3", {}, "Stat"), stat, el("h3", {}, "ACL"), acl,
      el("h3", {}, "Watches"), el("div", { id: "watches" }, n.watches.count + " watching" + (n.watches.sessions.length ? ": " + n.watches.sessions.join(", ") : "")))));
  return parts;
}

// ---------------------------------------------------------------- Sessions

async function sessionsPage() {
  const r = await api("sessions?limit=1000");
  const rows = r.sessions.map((s) => ({
    attrs: { className: "session", "data-session": s.id },
    cells: [s.id, s.client || (s.connected_here ? "" : "on another member"), s.timeout_ms, s.idle_ms === null ? "" : ago(s.idle_ms) + " ago",
      s.ephemerals, s.ephemeral_paths.join(" "), s.watches === null ? "" : s.watches, (s.auth || []).join(" "),
      state.superUser ? confirmButton("Close", "Close session " + s.id + " and delete its " + s.ephemerals + " ephemerals?",
        () => action("close_session", { session: s.id })) : ""],
  }));
  return [el("h2", {}, "Sessions (" + r.total + ")"),
    table(["session", "client", "timeout (ms)", "last answered", "ephemerals", "ephemeral paths", "watches", "auth ids", ""], rows, { id: "sessions" })];
}

// ---------------------------------------------------------------- Locks

async function locksPage() {
  // A long poll: the answer comes once the state moved past the zxid last shown.
  const r = await api("locks" + (state.locksZxid === null ? "" : "?after=" + state.locksZxid));
  state.locksZxid = r.zxid;
  const parts = [el("h2", {}, "Locks and elections (" + r.locks.length + ")")];
  for (const l of r.locks) {
    const who = (e) => [e.node, e.kind, e.token, e.session, e.client || "", e.label || ""];
    const holders = l.holders.map((e) => ({
      attrs: { className: "holder", "data-session": e.session },
      cells: [...who(e), ago(e.held_ms),
        state.superUser ? confirmButton("Delete", "Delete " + l.path + "/" + e.node + " held by session " + e.session + "?",
          () => action("delete", { path: l.path + "/" + e.node })) : ""],
    }));
    const waiters = l.waiters.map((e, i) => ({ attrs: { className: "waiter" }, cells: [i + 1, ...who(e), ago(e.waiting_ms)] }));
    parts.push(el("div", { className: "box lock", "data-path": l.path },
      el("h3", {}, treeLink(l.path), " — " + l.recipe),
      table(["holder node", "kind", "token (czxid)", "session", "client", "owner label", "held", ""], holders),
      waiters.length ? table(["#", "waiting node", "kind", "token", "session", "client", "owner label", "waiting"], waiters) : el("div", {}, "no waiters")));
  }
  return parts;
}

// ---------------------------------------------------------------- Metrics

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1f6fd1", "#d1431f", "#2a9d4b", "#8a3fd1"];

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

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
    if (pts.length) g.appendChild(svg("polyline", { points: pts.join(" "), fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 1.5 }));
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
    el("div", { className: "row", id: "charts" },
      chart("Throughput", s, ["requests_per_s", "responses_per_s", "commits_per_s"], "/s"),
      chart("Read latency", s, ["readlatency_avg", "readlatency_p50", "readlatency_p99"], "ms"),
      chart("Write latency", s, ["updatelatency_avg", "updatelatency_p50", "updatelatency_p99"], "ms"),
      chart("fsync time", s, ["fsynctime_avg"], "ms"),
      chart("Connections and sessions", s, ["connections", "sessions", "outstanding"], ""),
      chart("Watches", s, ["watches"], ""),
      chart("Znodes", s, ["znodes"], ""))];
}

// ---------------------------------------------------------------- frame

const PAGES = {
  ensemble: { render: ensemblePage, every: 2000 },
  tree: { render: treePage, every: 0 },
  sessions: { render: sessionsPage, every: 2000 },
  locks: { render: locksPage, every: 0, live: true },
  metrics: { render: metricsPage, every: 5000 },
};

function route() {
  const hash = location.hash.replace(/^#/, "") || "ensemble";
  const [name, query] = hash.split("?");
  return { name: PAGES[name] ? name : "ensemble", params: new URLSearchParams(query || "") };
}

let rendering = false;
async function refresh() {
  if (rendering) return;
  rendering = true;
  const { name, params } = route();
  try {
    const parts = await PAGES[name].render(params);
    if (route().name !== name) return; // the viewer moved on while this was asked
    const main = document.getElementById("page");
    // Keep focus and typed text while a live page redraws.
    const typing = main.contains(document.activeElement) && document.activeElement.tagName === "INPUT";
    if (!typing && !state.confirming) {
      main.replaceChildren(...parts);
      main.setAttribute("data-page", name);
      main.setAttribute("data-rendered", String(Date.now()));
    }
  } catch (e) {
    notice(e.message, true);
  } finally {
    rendering = false;
  }
}

function show() {
  const { name } = route();
  for (const p of Object.keys(PAGES)) document.getElementById("nav-" + p).className = p === name ? "active" : "";
  clearInterval(state.timer);
  state.confirming = false;
  state.locksZxid = null;
  state.live = null;
  notice("");
  if (PAGES[name].live) {
    const token = {};
    state.live = token;
    liveLoop(token);
  } else {
    refresh();
  }
  if (PAGES[name].every) state.timer = setInterval(refresh, PAGES[name].every);
}

// A live page asks again as soon as its last answer is drawn (at most ten times a second).
async function liveLoop(token) {
  while (state.live === token) {
    const started = Date.now();
    await refresh();
    const pause = 100 - (Date.now() - started);
    if (pause > 0) await new Promise((r) => setTimeout(r, pause));
  }
}

async function whoami() {
  try {
    const r = await api("whoami");
    state.superUser = r.super_user;
    document.getElementById("who").textContent = r.super_user ? "super user" : (r.super_configured ? "read-only" : "read-only (no super user configured)");
    document.getElementById("logout-button").hidden = !r.super_user;
    return r.super_user;
  } catch (e) { notice(e.message, true); return false; }
}

document.getElementById("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const pw = document.getElementById("password");
  state.credentials = "super:" + pw.value;
  pw.value = "";
  if (!(await whoami())) { state.credentials = null; notice("sign-in refused", true); } else notice("signed in as super user");
  show();
});
document.getElementById("logout-button").addEventListener("click", async () => {
  state.credentials = null;
  await whoami();
  show();
});
window.addEventListener("hashchange", show);
whoami().then(show);
