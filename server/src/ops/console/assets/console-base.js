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

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1f6fd1", "#d1431f", "#2a9d4b", "#8a3fd1"];

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

