// The zooraft console: the Tree and Locks pages. Built with el() and textContent only (console-base.js).
"use strict";

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

