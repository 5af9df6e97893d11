//! The console's pages at 100,000 znodes and 1,000 sessions: each renders in headless
//! Chromium (the issue asks for "well under a second on loopback"), and the time from
//! navigation is printed (`MEASURED`) for the book and the closing notes. It is not asserted:
//! a timing bound in a test fails on a loaded machine and measures nothing.
//!
//! The tree: `/wide` with 50,000 children (a node the Tree page must page through) and
//! `/deep/dNNN` 500 directories of 100 children each. The sessions: 1,000 opened by raw
//! handshakes and left to expire (30 s timeout; the pages are read well before).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;
use zooraft_tests::rt::{block_on, within};
use zooraft_tests::tls_probe::new_session_frame;
use zooraft_tests::zc::{connect, persistent};
use zooraft_tests::{free_port, ServerKind, TestServer};

use crate::webdriver::Browser;
use crate::{api, post, render_time, save, wait_for};

const WIDE: usize = 50_000;
const DIRS: usize = 500;
const PER_DIR: usize = 100;
const SESSIONS: usize = 1_000;
/// Pipelined creates in flight per window.
const WINDOW: usize = 2_000;

/// Creates `paths` pipelined, `WINDOW` at a time, over `clients`.
fn create_all(hosts: &str, paths: Vec<String>) {
    block_on(async {
        let mut clients = Vec::new();
        for _ in 0..4 {
            clients.push(connect(hosts, Duration::from_secs(30), Duration::from_secs(30)).await);
        }
        for window in paths.chunks(WINDOW) {
            let mut tasks = tokio::task::JoinSet::new();
            for (i, path) in window.iter().enumerate() {
                let c = clients[i % clients.len()].clone();
                let path = path.clone();
                tasks.spawn(async move { c.create(&path, b"v", &persistent()).await });
            }
            while let Some(r) = within("create", Duration::from_secs(120), tasks.join_next()).await
            {
                r.expect("create task").expect("create");
            }
        }
    });
}

/// Opens a session with a raw handshake and drops the connection (the session lives on
/// until its timeout).
fn open_session(port: u16) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    s.write_all(&new_session_frame())
        .expect("send ConnectRequest");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a ConnectResponse");
}

#[test]
fn pages_render_within_a_second_at_100k_znodes_and_1000_sessions() {
    let admin = free_port();
    let server = TestServer::builder(ServerKind::Zooraft)
        .config("admin.enableServer", "true")
        .config("admin.serverAddress", "127.0.0.1")
        .config("admin.serverPort", &admin.to_string())
        .config("maxClientCnxns", "0")
        .start();
    let hosts = server.connect_string();
    let started = Instant::now();
    let mut parents = vec!["/wide".to_string(), "/deep".to_string()];
    parents.extend((0..DIRS).map(|d| format!("/deep/d{d:03}")));
    create_all(&hosts, parents[..2].to_vec());
    create_all(&hosts, parents[2..].to_vec());
    let mut leaves: Vec<String> = (0..WIDE).map(|i| format!("/wide/n{i:06}")).collect();
    for d in 0..DIRS {
        leaves.extend((0..PER_DIR).map(|i| format!("/deep/d{d:03}/n{i:03}")));
    }
    create_all(&hosts, leaves);
    eprintln!(
        "created {} znodes in {:?}",
        WIDE + DIRS * PER_DIR + DIRS + 2,
        started.elapsed()
    );
    let sessions_started = Instant::now();
    for _ in 0..SESSIONS {
        open_session(server.port());
    }
    eprintln!(
        "opened {SESSIONS} sessions in {:?}",
        sessions_started.elapsed()
    );
    let me = api(admin, "ensemble")["me"].clone();
    assert!(me["znodes"].as_u64().unwrap_or(0) >= 100_000, "{me}");
    assert!(
        me["sessions"].as_u64().unwrap_or(0) >= SESSIONS as u64,
        "{me}"
    );

    let browser = Browser::start();
    let base = format!("http://127.0.0.1:{admin}/console/");
    let pages: [(&str, &str, &str); 6] = [
        ("ensemble", "#ensemble", "document.getElementById('me')"),
        (
            "tree /",
            "#tree?path=%2F",
            "document.querySelector('#children li.child')",
        ),
        (
            "tree /wide (50,000 children)",
            "#tree?path=%2Fwide&offset=25000",
            "document.querySelectorAll('#children li.child').length === 100",
        ),
        (
            "sessions (1,000)",
            "#sessions",
            "document.querySelectorAll('tr.session').length >= 1000",
        ),
        ("locks", "#locks", "document.querySelector('h2')"),
        ("metrics", "#metrics", "document.querySelector('svg.chart')"),
    ];
    let mut times = Vec::new();
    for (name, hash, ready) in pages {
        // Once to warm the browser's cache of the static files, as a returning viewer has it.
        browser.open_fresh(&format!("{base}{hash}"));
        render_time(&browser);
        browser.open_fresh(&format!("{base}{hash}"));
        wait_for(&browser, name, &format!("return ({ready}) ? true : null;"));
        let ms = render_time(&browser);
        times.push((name, ms));
        // "tree /" and "tree /wide ..." apart: the first word and the path's.
        let file: String = name
            .split(['(', ' '])
            .filter(|w| !w.is_empty())
            .take(2)
            .collect::<Vec<_>>()
            .join("-")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        save(&browser, &format!("scale-{}", file.trim_matches('-')));
    }
    // No super digest here: the actions are refused even with a password.
    assert_eq!(post(admin, "snapshot", Some("anything")).0, 403);
    let fetched = api(admin, "node?path=%2Fwide&offset=49950&limit=100");
    assert_eq!(fetched["children"]["total"], Value::from(WIDE));
    println!(
        "MEASURED console render times at 100k znodes and {SESSIONS} sessions (ms from \
         navigation): {times:?}"
    );
}
