#!/usr/bin/env python3
"""Loads every page of the built book (docs/book by default) in headless Chromium and fails
on a broken one.

The book is served over HTTP from 127.0.0.1 (a thread of this script), as a web server
would serve it, and Chromium is driven through chromedriver's WebDriver API with nothing
but the Python standard library. After each page has loaded and its scripts have run, it
must have a title, non-empty main content, a table of contents in the sidebar (mdBook fills
it from toc.js), every image loaded (`complete` and `naturalWidth > 0`), and no error in
the browser's console. toc.html (the sidebar itself, for readers without JavaScript) has no
title or main content of its own: it must have links.

Bounded in time (each request has a timeout, the whole run a deadline) and self-cleaning
(chromedriver and the Chromium it started are stopped, the temporary profile removed).

    docs/check-browser.py [BOOK_DIR]

Environment: CHROMIUM (default: chromium), CHROMEDRIVER (default: chromedriver),
BOOK_BROWSER_DEADLINE (seconds for the whole run, default 300).
"""

import functools
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

REQUEST_TIMEOUT = 60  # seconds, for one WebDriver call (a page load is bounded below it)
PAGE_LOAD_MS = 30_000
SCRIPT_MS = 10_000

# Runs in the page after it loaded: what the checks need, as one JSON-able object.
PROBE = r"""
const main = document.querySelector('main');
const sidebar = document.querySelector('#sidebar');
const imgs = Array.from(document.images);
return {
  title: document.title,
  ready: document.readyState,
  mainText: main ? main.innerText.trim().length : -1,
  mainChildren: main ? main.children.length : -1,
  tocLinks: sidebar ? sidebar.querySelectorAll('ol.chapter a[href]').length : -1,
  anyLinks: document.querySelectorAll('a[href]').length,
  images: imgs.map(i => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0})),
};
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriver:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"
        self.session = None

    def call(self, method, path, body=None, timeout=REQUEST_TIMEOUT):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:500]
            raise RuntimeError(f"WebDriver {method} {path}: HTTP {e.code}: {detail}") from None

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.session}{path}", body)


def wait_for(url, deadline):
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def main():
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "book")
    root = os.path.realpath(sys.argv[1] if len(sys.argv) > 1 else default)
    if not os.path.isfile(os.path.join(root, "index.html")):
        print(f"check-browser: no {root}/index.html (build the book first)", file=sys.stderr)
        return 2
    chromium = shutil.which(os.environ.get("CHROMIUM", "chromium"))
    driver_bin = shutil.which(os.environ.get("CHROMEDRIVER", "chromedriver"))
    if not chromium or not driver_bin:
        print("check-browser: chromium and chromedriver are needed "
              "(apt-get install chromium chromium-driver)", file=sys.stderr)
        return 3
    deadline = time.monotonic() + float(os.environ.get("BOOK_BROWSER_DEADLINE", "300"))

    pages = sorted(
        os.path.relpath(os.path.join(d, f), root)
        for d, _, files in os.walk(root)
        for f in files
        if f.endswith(".html")
    )

    # The book over HTTP, from a thread of this process.
    handler = functools.partial(QuietHandler, directory=root)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{httpd.server_address[1]}/"

    tmp = tempfile.mkdtemp(prefix="zooraft-book-browser-")
    port = free_port()
    log = open(os.path.join(tmp, "chromedriver.log"), "w")
    proc = subprocess.Popen([driver_bin, f"--port={port}"], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    wd = WebDriver(port)
    failures = []
    checked = 0
    try:
        if not wait_for(wd.base + "/status", min(deadline, time.monotonic() + 30)):
            print("check-browser: chromedriver did not come up", file=sys.stderr)
            return 1
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": chromium,
                        "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                                 "--disable-dev-shm-usage", "--no-first-run",
                                 f"--user-data-dir={tmp}/profile", "--window-size=1280,900"],
                    },
                    "goog:loggingPrefs": {"browser": "ALL"},
                    "timeouts": {"pageLoad": PAGE_LOAD_MS, "script": SCRIPT_MS},
                }
            }
        }
        created = wd.call("POST", "/session", caps)
        wd.session = created["sessionId"]
        version = created.get("capabilities", {}).get("browserVersion", "?")

        for page in pages:
            if time.monotonic() > deadline:
                failures.append(f"deadline reached before {page}")
                break
            url = site + page.replace(os.sep, "/")
            problems = []
            try:
                wd.s("POST", "/url", {"url": url})
                info = wd.s("POST", "/execute/sync", {"script": PROBE, "args": []})
                logs = wd.s("POST", "/se/log", {"type": "browser"}) or []
            except (RuntimeError, OSError) as e:
                failures.append(f"{page}: {e}")
                continue
            checked += 1
            if info["ready"] != "complete":
                problems.append(f"document not loaded ({info['ready']})")
            if page == "toc.html":
                if info["anyLinks"] == 0:
                    problems.append("the table of contents has no links")
            else:
                if not info["title"].strip():
                    problems.append("no title")
                if info["mainText"] <= 0:
                    problems.append("main content empty" if info["mainText"] == 0 else "no <main>")
                if info["tocLinks"] <= 0:
                    problems.append("sidebar table of contents missing")
            for img in info["images"]:
                if not img["ok"]:
                    problems.append(f"image did not load: {img['src']}")
            for entry in logs:
                # A page without a favicon link makes the browser ask for /favicon.ico
                # (toc.html does): not the book's fault.
                if entry.get("level") == "SEVERE" and "/favicon.ico " not in entry.get("message", ""):
                    problems.append(f"console: {entry.get('message', '')[:200]}")
            status = "ok" if not problems else "FAIL"
            print(f"  {status} {page}: title '{info['title']}', {info['mainText']} chars, "
                  f"{info['tocLinks']} toc links, {len(info['images'])} images")
            failures.extend(f"{page}: {p}" for p in problems)
    finally:
        if wd.session:
            try:
                wd.call("DELETE", f"/session/{wd.session}", timeout=15)
            except (RuntimeError, OSError):
                pass
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
        httpd.shutdown()
        httpd.server_close()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"check-browser: Chromium {version}: {checked} of {len(pages)} pages checked, "
          f"{len(failures)} problems")
    for f in failures:
        print(f"  BROKEN {f}")
    return 1 if failures or checked != len(pages) else 0


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


if __name__ == "__main__":
    sys.exit(main())
