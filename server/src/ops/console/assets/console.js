// The zooraft console: the frame: pages, routing, refresh, sign-in. Built with el() and textContent only (console-base.js).
"use strict";

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

