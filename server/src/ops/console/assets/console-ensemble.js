// The zooraft console: the Ensemble page. Built with el() and textContent only (console-base.js).
"use strict";

// ---------------------------------------------------------------- Ensemble

async function ensemblePage() {
  const e = await api("ensemble");
  const me = e.me;
  const rows = e.members.map((m) => ({
    attrs: { className: m.mode === "leader" ? "member leader" : "member", "data-member": m.id },
    cells: [m.id, m.host, m.client, m.learner_type, m.mode || "", m.term === null ? "" : m.term,
      m.serving === null ? "" : (m.serving ? "yes" : "no"), m.last_zxid || "", m.lag === null ? "" : m.lag,
      m.disk_free_bytes === null ? "" : (m.disk_free_bytes / 1073741824).toFixed(1) + " GiB" + (m.disk_full ? " (full)" : ""),
      m.disk_reserve_bytes === null ? "" : (m.disk_reserve_bytes / 1048576).toFixed(0) + " MiB",
      tlsText(m.tls),
      m.error || "",
      m.is_me ? "this member" : "",
      state.superUser && m.learner_type === "participant" && m.mode && m.mode !== "leader"
        ? confirmButton("Make leader", "Hand the leadership to server " + m.id + "?", () => action("transfer", { to: m.id }))
        : ""],
  }));
  const parts = [el("h2", {}, "Ensemble")];
  if (e.members.length) {
    parts.push(table(["id", "host", "client", "type", "role", "term", "serving", "last zxid", "lag (txns)", "disk free", "disk reserve", "TLS", "error", "", ""], rows, { id: "members" }));
  } else {
    parts.push(el("p", {}, "Standalone member."));
  }
  const timeline = (e.timeline || []).slice().reverse().map((ev) => ({
    attrs: { className: "event " + ev.kind },
    cells: [when(ev.t), ev.kind, ev.kind === "leader"
      ? "leader " + (ev.leader || "none") + " (term " + ev.term + ")" + (ev.previous === null ? "" : ", was " + (ev.previous || "none"))
      : "members " + ev.members + ((ev.learners || []).length ? " (learners " + ev.learners.join(",") + ")" : "")
        + (ev.previous === null ? "" : ", were " + ev.previous)],
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
    ["TLS", tlsText(tls)],
  ], { id: "me" }));
  if (state.superUser) {
    parts.push(el("div", { className: "box" }, el("h3", {}, "Super user"),
      el("button", { id: "snapshot", onclick: () => action("snapshot") }, "Take a snapshot"), " ",
      el("button", { id: "request-leadership", onclick: () => action("request_leadership") }, "Make this member the leader"), " ",
      el("button", { id: "yield-leadership", onclick: () => action("yield_leadership") }, "Leader: hand over")));
  }
  return parts;
}

// A member's TLS, as its mntr says: what speaks TLS, or "none".
function tlsText(tls) {
  if (!tls) return "";
  const on = [tls.quorum ? "quorum" : null, tls.client_port ? "client port" : null, tls.admin ? "admin" : null];
  return on.filter((x) => x).join(", ") || "none";
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

