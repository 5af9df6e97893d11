// The zooraft console: the Sessions page, and a session's last moments. Built with el()
// and textContent only (console-base.js).
"use strict";

// ---------------------------------------------------------------- Sessions

const sessionLink = (id) => el("a", { href: "#sessions?session=" + encodeURIComponent(id) }, id);
const unansweredText = (list) => (list || []).map((u) => "member " + u.member + ": " + u.error).join("; ");

async function sessionsPage(params) {
  const wanted = params.get("session");
  const [r, log] = await Promise.all([api("sessions?limit=1000"),
    wanted ? api("session_log?session=" + encodeURIComponent(wanted)) : null]);
  const rows = r.sessions.map((s) => ({
    attrs: { className: "session", "data-session": s.id },
    cells: [sessionLink(s.id), s.client || (s.connected_here ? "" : "not known"),
      s.member === null ? "" : (s.member === r.member ? "this member" : "member " + s.member),
      s.timeout_ms, s.idle_ms === null ? "" : ago(s.idle_ms) + " ago",
      s.ephemerals, s.ephemeral_paths.join(" "), s.watches === null ? "" : s.watches, (s.auth || []).join(" "),
      state.superUser ? confirmButton("Close", "Close session " + s.id + " and delete its " + s.ephemerals + " ephemerals?",
        () => action("close_session", { session: s.id })) : ""],
  }));
  const parts = [el("h2", {}, "Sessions (" + r.total + ")"), searchForm(wanted)];
  if (log) parts.push(...sessionLog(log));
  if ((r.unanswered || []).length) parts.push(el("p", { id: "unanswered" }, "Not answering: " + unansweredText(r.unanswered)));
  parts.push(table(["session", "client", "connected to", "timeout (ms)", "last answered", "ephemerals", "ephemeral paths",
    "watches", "auth ids", ""], rows, { id: "sessions" }));
  return parts;
}

function searchForm(wanted) {
  const input = el("input", { id: "session-id", placeholder: "0x…", value: wanted || "" });
  const form = el("form", { id: "session-search", className: "box" }, "Session's last moments: ", input, " ",
    el("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const id = input.value.trim();
    location.hash = id ? "sessions?session=" + encodeURIComponent(id) : "sessions";
  });
  return form;
}

// What a member saw, in words.
function describe(e) {
  switch (e.kind) {
    case "created": return "created at zxid " + e.zxid + ", timeout " + e.timeout_ms + " ms";
    case "connected": case "reconnected":
      return e.kind + " from " + e.address + (e.secure ? " (TLS)" : "")
        + (e.moved_from === undefined ? "" : ", moved here from member " + e.moved_from);
    case "refused": return "a resume refused: " + e.why;
    case "disconnected": return "disconnected: " + e.why;
    case "ephemerals_deleted": return e.count + " ephemerals deleted at zxid " + e.zxid + ": " + e.paths.join(" ")
      + (e.count > e.paths.length ? " …" : "");
    case "closed": return "closed by its client (through member " + e.by + ") at zxid " + e.zxid;
    case "expired": return "expired at zxid " + e.zxid;
    default: return e.kind;
  }
}

function sessionLog(log) {
  const rows = log.events.slice().reverse().map((e) => ({
    attrs: { className: "log-event " + e.kind, "data-kind": e.kind },
    cells: [when(e.t), e.applied ? "every member" : "member " + e.member, e.kind, describe(e)],
  }));
  const status = log.open ? "open (timeout " + log.timeout_ms + " ms)" : "gone";
  const kept = "each member keeps a session's last " + log.kept.per_session + " events, for "
    + log.kept.retain_ms / 60000 + " minutes after it ends";
  return [el("h3", { id: "session-log-title" }, "Session " + log.session + ": " + status),
    rows.length ? table(["when", "seen by", "what", ""], rows, { id: "session-log" })
      : el("p", { id: "session-log" }, "No member remembers this session."),
    el("p", { className: "note" }, kept + (log.unanswered.length ? ". Not answering: " + unansweredText(log.unanswered) : ""))];
}
