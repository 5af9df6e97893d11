//! The browser console (`/console/` on the admin port) in a real browser: headless Chromium
//! (Debian's `/usr/bin/chromium`, driven through `/usr/bin/chromedriver`, [`webdriver`])
//! against a 3-member zooraft ensemble whose locks are held by Curator (a mutex, a read lock,
//! a semaphore lease and a leader latch, `tests/java/ConsoleLockHolder.java`), kazoo (a lock
//! with a waiter labelled with an HTML payload, and a semaphore lease,
//! `tests/python/console_locks.py`) and the recipes crate (`lock-contender hold`).
//!
//! Each page must render what the ensemble holds: the three members and the leader (every
//! member's TLS state and disk reserve), the nodes, the sessions (a session on another
//! member with its address, watches and auth ids, `tests/python/console_watcher.py`), each
//! lock's holder and queue. A lock handed over shows its new holder by itself (how soon is
//! printed: 11-192 ms when measured). The recipes crate's holder, killed, shows its
//! session's last moments (connected, disconnected, expired, its lock node deleted). The
//! leadership handed to a chosen member that is killed as soon as it leads is on the
//! timeline, with its successor. The Metrics page charts each interval's latency
//! percentiles. A node whose name and data
//! are HTML and script renders as text and runs nothing (a global the payload would set
//! stays undefined). The super user's actions are refused without the password and work
//! with it. Screenshots of each page go to `<target dir>/console-screenshots/`.

mod scale;
mod webdriver;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use webdriver::{http, Browser};
use zooraft_tests::java::java_command;
use zooraft_tests::rt::eventually;
use zooraft_tests::{free_port, suite_dir, ServerKind, TestEnsemble};

/// The super user's password, and its digest (base64 of SHA-1 of `super:console-secret`).
const PASSWORD: &str = "console-secret";
const DIGEST: &str = "super:oRy5J4JFk4WYCyOnRe2tfB/qIq8=";
/// What the kazoo script names its payload node and writes into it.
const PAYLOAD_NAME: &str = "<img src=x onerror=\"window.pwned=1\">";
const PAYLOAD_DATA: &str = "<script>window.pwned=2</script><b>bold</b>";
/// Bound for anything to show up.
const WAIT: Duration = Duration::from_secs(60);

/// A lock-holding client process: its stdin (closing it ends the process) and its lines.
struct Holder {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    name: &'static str,
}

impl Holder {
    fn start(name: &'static str, mut cmd: Command) -> Holder {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Holder {
            stdin: child.stdin.take(),
            child,
            lines,
            name,
        }
    }

    /// The next line that starts with `prefix`.
    fn expect(&self, prefix: &str) -> String {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(l) => seen.push(l),
                Err(e) => panic!("{}: no {prefix} line ({e}); it said {seen:?}", self.name),
            }
        }
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("holder stdin");
        writeln!(stdin, "{line}").expect("write to holder");
        stdin.flush().expect("flush holder stdin");
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The directory screenshots go to: `<target dir>/console-screenshots`.
fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().expect("test executable");
            // <target>/debug/deps/console-<hash>
            exe.ancestors().nth(3).expect("target dir").to_path_buf()
        });
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).expect("create the screenshot directory");
    dir
}

fn api(port: u16, path: &str) -> Value {
    let (status, body) = http(port, "GET", &format!("/console/api/{path}"), &[], None)
        .unwrap_or_else(|e| panic!("console API {path}: {e}"));
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).expect("console JSON")
}

/// An action POSTed as curl would; the status.
fn post(port: u16, action: &str, password: Option<&str>) -> (u16, String) {
    let auth = password.map(|p| format!("digest super:{p}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    let path = format!("/console/api/action/{action}");
    http(port, "POST", &path, &headers, Some("")).expect("POST an action")
}

/// Waits until `script` (a function body returning a value, `null` for not yet) returns
/// something other than null, and returns it.
fn wait_for(browser: &Browser, what: &str, script: &str) -> Value {
    eventually(what, WAIT, || {
        let v = browser.run(script, vec![]);
        (!v.is_null()).then_some(v)
    })
}

fn save(browser: &Browser, name: &str) {
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    let path = screenshot_dir().join(format!("{name}.png"));
    std::fs::write(&path, png).expect("write a screenshot");
    eprintln!("screenshot: {}", path.display());
}

/// Milliseconds from navigation start until the page first rendered its data.
fn render_time(browser: &Browser) -> f64 {
    let v = wait_for(
        browser,
        "the page to render",
        "const r = document.getElementById('page').getAttribute('data-rendered');
         return r ? Number(r) - performance.timeOrigin : null;",
    );
    v.as_f64().unwrap_or(f64::NAN)
}

/// Percent-encodes a path for a `#tree?path=` URL.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The script that answers a lock directory's holders' sessions (null until it is shown).
fn holders_of(dir: &str) -> String {
    format!(
        "const d = Array.from(document.querySelectorAll('div.lock'))
             .find(x => x.getAttribute('data-path') === {dir:?});
         if (!d) return null;
         return {{holders: Array.from(d.querySelectorAll('tr.holder')).map(r => r.getAttribute('data-session')),
                  waiters: d.querySelectorAll('tr.waiter').length, text: d.textContent}};"
    )
}

#[test]
fn the_console_shows_the_ensemble_in_a_browser() {
    let admin: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let each = |i: usize| {
        vec![
            ("admin.enableServer".to_string(), "true".to_string()),
            ("admin.serverAddress".to_string(), "127.0.0.1".to_string()),
            ("admin.serverPort".to_string(), admin[i].to_string()),
        ]
    };
    let extra = [("zookeeper.DigestAuthenticationProvider.superDigest", DIGEST)];
    let mut ensemble = TestEnsemble::start_each_serving(ServerKind::Zooraft, 3, &extra, &each);
    let connect = ensemble.connect_string();
    let role = |i: usize| api(admin[i], "ensemble")["me"]["role"].clone();
    let leader = eventually("a leader", WAIT, || (0..3).find(|i| role(*i) == "leader"));
    let leader_id = api(admin[leader], "ensemble")["me"]["id"].clone();
    let view = (leader + 1) % 3;
    let port = admin[view];
    let base = format!("http://127.0.0.1:{port}/console/");

    // The lock holders.
    let mut curator_cmd = java_command("ConsoleLockHolder");
    curator_cmd.args([&connect, "/console/curator-lock", "/console/curator-latch"]);
    let curator = Holder::start("curator", curator_cmd);
    let curator_session = curator.expect("HELD ").split_off(5);
    let mut kazoo_cmd = Command::new("python3");
    kazoo_cmd
        .arg(suite_dir().join("python/console_locks.py"))
        // Connected to the member the browser views, so its page knows their addresses.
        .args([
            &ensemble.member(view).connect_string(),
            "/console/kazoo-lock",
            "/console/payload",
        ]);
    let mut kazoo = Holder::start("kazoo", kazoo_cmd);
    let ready = kazoo.expect("READY ");
    let ids: Vec<&str> = ready.split_whitespace().skip(1).collect();
    let (kazoo_a, kazoo_b) = (ids[0].to_string(), ids[1].to_string());
    let mut rust_cmd = Command::new(zooraft_tests::lock_contender_binary());
    rust_cmd.args([
        "hold",
        &connect,
        "/console/rust-lock",
        "10000",
        "127.0.0.1:9",
    ]);
    let rust = Holder::start("lock-contender", rust_cmd);
    rust.expect("ACQUIRED ");

    // A session connected to a member the browser does not view.
    let elsewhere = (view + 1) % 3;
    let mut watcher_cmd = Command::new("python3");
    watcher_cmd
        .arg(suite_dir().join("python/console_watcher.py"))
        .arg(ensemble.member(elsewhere).connect_string());
    let watcher = Holder::start("kazoo-watcher", watcher_cmd);
    let watcher_session = watcher.expect("READY ").split_off(6);

    let browser = Browser::start();
    let mut timings = Vec::new();

    // Ensemble: three members, the leader marked.
    browser.open_fresh(&format!("{base}#ensemble"));
    timings.push(("ensemble", render_time(&browser)));
    let shown = wait_for(
        &browser,
        "three members and the leader",
        "const rows = document.querySelectorAll('#members tr.member');
         const lead = document.querySelector('#members tr.leader');
         return rows.length === 3 && lead ? lead.getAttribute('data-member') : null;",
    );
    assert_eq!(shown.as_str(), Some(leader_id.to_string().as_str()));
    // Every member's TLS state and disk reserve, the other members' from their mntr.
    let figures = wait_for(
        &browser,
        "every member's TLS and disk reserve",
        "const head = Array.from(document.querySelectorAll('#members th')).map(h => h.textContent);
         const tls = head.indexOf('TLS'), reserve = head.indexOf('disk reserve');
         const rows = Array.from(document.querySelectorAll('#members tr.member'));
         const cells = rows.map(r => [r.cells[tls].textContent, r.cells[reserve].textContent]);
         return cells.length === 3 && cells.every(c => c[0] && c[1]) ? cells : null;",
    );
    for cell in figures.as_array().expect("three rows") {
        assert_eq!(cell[0], "none", "no TLS in this ensemble: {figures}");
        assert_eq!(cell[1], "64 MiB", "the default reserve: {figures}");
    }
    save(&browser, "ensemble");

    // Tree: the payload renders as text and runs nothing.
    browser.open_fresh(&format!("{base}#tree?path={}", encode("/console/payload")));
    timings.push(("tree", render_time(&browser)));
    let child = wait_for(
        &browser,
        "the payload node listed",
        "const c = document.querySelector('#children li.child a');
         return c ? c.textContent : null;",
    );
    assert_eq!(child.as_str(), Some(PAYLOAD_NAME));
    let payload = format!("/console/payload/{PAYLOAD_NAME}");
    browser.open(&format!("{base}#tree?path={}", encode(&payload)));
    // The previous node stays on the page until the new one is drawn: wait for its path.
    let data = eventually("the payload's data", WAIT, || {
        let v = browser.run(
            "const p = document.getElementById('node-path'); const d = document.getElementById('data');
             return p && d && p.textContent === arguments[0] ? d.textContent : null;",
            vec![json!(payload)],
        );
        (!v.is_null()).then_some(v)
    });
    assert_eq!(data, json!(PAYLOAD_DATA));
    let ran = browser.run(
        "return {pwned: typeof window.pwned, imgs: document.querySelectorAll('main img').length,
                 scripts: document.querySelectorAll('main script').length,
                 bold: document.querySelectorAll('main b').length};",
        vec![],
    );
    assert_eq!(
        ran,
        json!({"pwned": "undefined", "imgs": 0, "scripts": 0, "bold": 0})
    );
    save(&browser, "tree");

    // Sessions: the holders' sessions are listed.
    browser.open_fresh(&format!("{base}#sessions"));
    timings.push(("sessions", render_time(&browser)));
    for s in [&curator_session, &kazoo_a, &kazoo_b] {
        let script = format!(
            "return document.querySelector('tr.session[data-session=\"{s}\"]') ? true : null;"
        );
        wait_for(&browser, &format!("session {s} listed"), &script);
    }
    let row = browser.run(
        &format!(
            "const r = document.querySelector('tr.session[data-session=\"{kazoo_a}\"]');
             return Array.from(r.cells).map(c => c.textContent);"
        ),
        vec![],
    );
    let cells: Vec<&str> = row
        .as_array()
        .expect("the session's cells")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        cells[1].starts_with("127.0.0.1:"),
        "client address: {cells:?}"
    );
    assert_eq!(cells[2], "this member", "{cells:?}");
    assert!(
        cells[8].contains("ip:127.0.0.1") && cells[8].contains("digest:console-user:"),
        "auth ids: {cells:?}"
    );
    // The session on another member: its figures come from that member.
    let elsewhere_id = api(admin[elsewhere], "ensemble")["me"]["id"].clone();
    let cells = wait_for(
        &browser,
        "the other member's session with its figures",
        &format!(
            "const r = document.querySelector('tr.session[data-session=\"{watcher_session}\"]');
             const c = r && Array.from(r.cells).map(c => c.textContent);
             return c && c[1].startsWith('127.0.0.1:') ? c : null;"
        ),
    );
    assert_eq!(cells[2], format!("member {elsewhere_id}"), "{cells}");
    assert_eq!(cells[7], "2", "its two watches: {cells}");
    let auth = cells[8].as_str().unwrap_or_default();
    assert!(
        auth.contains("ip:127.0.0.1") && auth.contains("digest:elsewhere-user:"),
        "its auth ids: {cells}"
    );
    save(&browser, "sessions");

    // Locks: each library's lock with its holder; the latch's leader.
    browser.open_fresh(&format!("{base}#locks"));
    timings.push(("locks", render_time(&browser)));
    let kz = wait_for(&browser, "kazoo's lock", &holders_of("/console/kazoo-lock"));
    assert_eq!(kz["holders"], json!([kazoo_a]));
    assert_eq!(kz["waiters"], 1);
    assert!(kz["text"].as_str().unwrap_or("").contains("kazoo-a"));
    let cu = wait_for(
        &browser,
        "Curator's lock",
        &holders_of("/console/curator-lock"),
    );
    assert_eq!(cu["holders"], json!([curator_session]));
    let latch = wait_for(
        &browser,
        "Curator's latch",
        &holders_of("/console/curator-latch"),
    );
    assert_eq!(latch["holders"], json!([curator_session]));
    assert!(latch["text"]
        .as_str()
        .unwrap_or("")
        .contains("leader latch"));
    let payload_label = "<img src=x onerror=\"window.pwned=3\">kazoo-b";
    assert!(
        kz["text"].as_str().unwrap_or("").contains(payload_label),
        "the waiter's label as text: {kz}"
    );
    let rw = wait_for(
        &browser,
        "Curator's read-write lock",
        &holders_of("/console/curator-lock-rw"),
    );
    assert_eq!(rw["holders"], json!([curator_session]));
    assert!(rw["text"]
        .as_str()
        .unwrap_or("")
        .contains("read-write lock"));
    let sem = wait_for(
        &browser,
        "Curator's semaphore",
        &holders_of("/console/curator-lock-sem/leases"),
    );
    assert_eq!(sem["holders"], json!([curator_session]));
    assert!(sem["text"]
        .as_str()
        .unwrap_or("")
        .contains("semaphore leases"));
    let sem = wait_for(
        &browser,
        "kazoo's semaphore",
        &holders_of("/console/kazoo-lock-sem"),
    );
    assert_eq!(sem["holders"], json!([kazoo_a]));
    assert!(sem["text"].as_str().unwrap_or("").contains("kazoo-sem"));
    let rs = wait_for(
        &browser,
        "the recipes crate's lock",
        &holders_of("/console/rust-lock"),
    );
    assert_eq!(rs["holders"].as_array().map(Vec::len), Some(1));
    let rust_session = rs["holders"][0].as_str().expect("a session").to_string();
    let ran = browser.run(
        "return {pwned: typeof window.pwned, imgs: document.querySelectorAll('main img').length};",
        vec![],
    );
    assert_eq!(ran, json!({"pwned": "undefined", "imgs": 0}));
    save(&browser, "locks");

    // A handover shows by itself (the page long-polls; nothing reloads it). How soon is
    // measured and printed, not asserted: a timing bound would fail on a loaded machine.
    kazoo.say("release");
    kazoo.expect("RELEASED");
    let released = Instant::now();
    let script = format!(
        "const d = Array.from(document.querySelectorAll('div.lock'))
             .find(x => x.getAttribute('data-path') === '/console/kazoo-lock');
         const h = d ? Array.from(d.querySelectorAll('tr.holder')).map(r => r.getAttribute('data-session')) : [];
         return h.length === 1 && h[0] === {kazoo_b:?} ? true : null;"
    );
    eventually("the new holder shown", Duration::from_secs(5), || {
        (!browser.run(&script, vec![]).is_null()).then_some(())
    });
    let handover = released.elapsed();
    println!("MEASURED console: lock handover shown after {handover:?}");

    // Actions without the password are refused, from curl and from the page.
    for action in [
        "snapshot",
        "close_session?session=0x1",
        "delete?path=/console",
        "request_leadership",
    ] {
        assert_eq!(post(port, action, None).0, 401, "{action} without auth");
        assert_eq!(
            post(port, action, Some("wrong")).0,
            401,
            "{action} with a wrong password"
        );
    }
    let page_refused = browser.run_async(
        "const done = arguments[arguments.length - 1];
         fetch('/console/api/action/snapshot', {method: 'POST'}).then(r => done(r.status));",
        vec![],
    );
    assert_eq!(page_refused, 401);
    assert!(
        browser
            .run(
                "return document.querySelectorAll('button.danger').length;",
                vec![]
            )
            .as_u64()
            == Some(0),
        "a read-only viewer sees no action buttons"
    );

    // With the password: sign in, delete the stuck holder after a confirmation naming its
    // session, close a session, take a snapshot.
    browser.run(
        "document.getElementById('password').value = arguments[0];
         document.getElementById('login').requestSubmit();",
        vec![json!(PASSWORD)],
    );
    wait_for(
        &browser,
        "signed in",
        "return document.getElementById('who').textContent === 'super user' ? true : null;",
    );
    let question = wait_for(
        &browser,
        "the confirmation",
        "const d = Array.from(document.querySelectorAll('div.lock'))
             .find(x => x.getAttribute('data-path') === '/console/kazoo-lock');
         const b = d && d.querySelector('tr.holder button.danger');
         if (!b) return null;
         b.click();
         const c = d.querySelector('tr.holder .confirm');
         return c ? c.textContent : null;",
    );
    assert!(
        question.as_str().unwrap_or("").contains(&kazoo_b),
        "the confirmation names the holder's session: {question}"
    );
    browser.run(
        "document.querySelector('tr.holder .confirm-yes').click();",
        vec![],
    );
    eventually("the deleted holder gone", WAIT, || {
        let v = browser.run(&holders_of("/console/kazoo-lock"), vec![]);
        (v.is_null() || v["holders"] == json!([])).then_some(())
    });
    browser.open(&format!("{base}#sessions"));
    let row = format!("tr.session[data-session=\"{kazoo_a}\"]");
    wait_for(
        &browser,
        "the close button",
        &format!(
            "const r = document.querySelector('{row}'); const b = r && r.querySelector('button.danger');
             if (!b) return null; b.click(); return true;"
        ),
    );
    browser.run(
        &format!("document.querySelector('{row} .confirm-yes').click();"),
        vec![],
    );
    eventually("the closed session gone", WAIT, || {
        let gone = !api(port, "sessions")["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .any(|s| s["id"] == kazoo_a);
        gone.then_some(())
    });
    // An expired session's last moments: the recipes crate's holder is killed, its
    // session (10 s) expires, and the search shows what the members saw of it.
    // Killed before its standard input closes: at end of input it would let go of its lock
    // itself, and the expiry would delete nothing.
    let mut rust = rust;
    rust.child.kill().expect("kill lock-contender");
    let _ = rust.child.wait();
    drop(rust);
    let killed = Instant::now();
    browser.open(&format!("{base}#sessions"));
    wait_for(
        &browser,
        "the session search",
        &format!(
            "const i = document.getElementById('session-id'); if (!i) return null;
             i.value = '{rust_session}';
             document.getElementById('session-search').requestSubmit(); return true;"
        ),
    );
    let log = eventually("the expiry in the session's log", WAIT, || {
        let v = browser.run(
            "const t = document.getElementById('session-log-title');
             const rows = Array.from(document.querySelectorAll('#session-log tr.log-event'));
             const kinds = rows.map(r => r.getAttribute('data-kind'));
             return t && kinds.includes('expired') && kinds.includes('disconnected')
                 ? {title: t.textContent, kinds, text: rows.map(r => r.textContent)} : null;",
            vec![],
        );
        (!v.is_null()).then_some(v)
    });
    eprintln!(
        "session {rust_session} killed; its expiry shown after {:?}: {log}",
        killed.elapsed()
    );
    assert!(
        log["title"].as_str().unwrap_or("").contains("gone"),
        "{log}"
    );
    let kinds: Vec<&str> = log["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for kind in [
        "created",
        "connected",
        "disconnected",
        "ephemerals_deleted",
        "expired",
    ] {
        assert!(kinds.contains(&kind), "{kind} in the log: {log}");
    }
    let text = log["text"].to_string();
    assert!(
        text.contains("/console/rust-lock/") && text.contains("from 127.0.0.1:"),
        "the deleted lock node and the client's address: {log}"
    );
    save(&browser, "session-log");
    assert_eq!(post(port, "snapshot", Some(PASSWORD)).0, 200);
    browser.open(&format!("{base}#ensemble"));
    wait_for(
        &browser,
        "the snapshot button",
        "const b = document.getElementById('snapshot'); if (!b) return null; b.click(); return true;",
    );
    wait_for(
        &browser,
        "the snapshot taken",
        "return document.getElementById('notice').textContent.startsWith('snapshot of') ? true : null;",
    );

    // The leadership handed to the member that is neither the leader nor the one viewed.
    let third = (0..3)
        .find(|i| *i != leader && *i != view)
        .expect("a third member");
    let third_id = api(admin[third], "ensemble")["me"]["id"].clone();
    let row = format!("#members tr[data-member=\"{third_id}\"]");
    let question = wait_for(
        &browser,
        "the make-leader button",
        &format!(
            "const b = document.querySelector('{row} button.danger'); if (!b) return null;
             b.click(); const c = document.querySelector('{row} .confirm');
             return c ? c.textContent : null;"
        ),
    );
    assert!(question
        .as_str()
        .unwrap_or("")
        .contains(&format!("server {third_id}?")));
    browser.run(
        &format!("document.querySelector('{row} .confirm-yes').click();"),
        vec![],
    );
    let asked = Instant::now();
    eventually("the chosen member leads", WAIT, || {
        (role(third) == "leader").then_some(())
    });
    // Killed at once: its tenure must still be on the timeline (the Raft loop records each
    // leader it sees, however short its tenure).
    let (leader, leader_id) = (third, third_id);
    ensemble.member_mut(leader).kill();
    eprintln!(
        "leadership handed to {leader_id}, killed {:?} after the ask",
        asked.elapsed()
    );
    browser.open(&format!("{base}#ensemble"));
    let new_leader = wait_for(
        &browser,
        "a new leader shown",
        &format!(
            "const lead = document.querySelector('#members tr.leader');
             const m = lead && lead.getAttribute('data-member');
             return m && m !== '{leader_id}' ? m : null;"
        ),
    );
    eprintln!("leader {leader_id} killed; the console shows {new_leader}");
    let new_leader = new_leader.as_str().unwrap_or_default().to_string();
    let script = format!(
        "const rows = Array.from(document.querySelectorAll('#timeline tr.event.leader'));
         // The old leader's end (to none, or straight to the new one) and the new one's
         // start: whether the member saw the leaderless moment depends on timing.
         const marks = document.querySelectorAll('#timeline-strip line.mark.leader').length;
         const ok = rows.some(r => r.textContent.includes('was {leader_id}'))
             && rows.some(r => r.textContent.includes('leader {leader_id} '))
             && rows.some(r => r.textContent.includes('leader {new_leader} '))
             && marks === rows.length;
         return {{ok, rows: rows.map(r => r.textContent), marks,
                  notice: document.getElementById('notice').textContent}};"
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let seen = browser.run(&script, vec![]);
        if seen["ok"] == true {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the leader change ({leader_id} to {new_leader}) not on the timeline: {seen}\n\
             samples: {}\ntimeline: {}\nlog: {}",
            api(port, "metrics")["samples"]
                .as_array()
                .map_or(0, Vec::len),
            api(port, "ensemble")["timeline"],
            ensemble.member(view).log_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    save(&browser, "ensemble-after-leader-kill");

    // Metrics: a chart per figure group, drawn from at least one sample.
    browser.open_fresh(&format!("{base}#metrics"));
    timings.push(("metrics", render_time(&browser)));
    let charts = wait_for(
        &browser,
        "the charts",
        "const c = document.querySelectorAll('#charts svg.chart');
         return c.length ? c.length : null;",
    );
    assert_eq!(charts, 7);
    // Latency percentiles of each interval: p50 and p99 of reads, writes and fsyncs.
    let series = browser.run(
        "return Array.from(document.querySelectorAll('#charts polyline'))
             .map(p => p.getAttribute('data-series'));",
        vec![],
    );
    for key in ["readlatency", "updatelatency", "fsynctime"] {
        for q in ["p50", "p99"] {
            let name = format!("{key}_{q}");
            assert!(
                series.as_array().is_some_and(|a| a.contains(&json!(name))),
                "{name} charted: {series}"
            );
        }
    }
    save(&browser, "metrics");

    eprintln!("page render times (ms from navigation): {timings:?}");
    drop(browser);
    drop((curator, kazoo, watcher));
}
