//! The book's shell examples that a reader runs as written: every block the book marks
//! `<!-- checked: tests/tests/install/book_examples.rs runs this block -->` runs here, in
//! the book's order (a first session's `fourlw`, a 3-member ensemble on one machine, leader
//! transfer over the AdminServer, a rolling restart), each the text of the page itself.
//!
//! The examples use the documented ports (2181-2183, 2888-2890, 3888-3890, 8080-8082) and
//! `/tmp/zr1..3`, so they run in their own network, mount and process namespaces (as root;
//! CI runs as root): a loopback of their own, a private /tmp, and every process they started
//! gone with the namespace. `target/release/zooraft` (as the book builds it) is the binary
//! under test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use zooraft_tests::{suite_dir, zooraft_binary};

/// The pages, in the order a reader meets the checked blocks.
const PAGES: [&str; 3] = ["first-session.md", "ensembles.md", "operations.md"];
const MARK: &str = "<!-- checked: tests/tests/install/book_examples.rs runs this block -->";
/// The whole tour, bounded (the blocks' own waits have no bound).
const LIMIT: Duration = Duration::from_secs(300);

/// The checked blocks of one page, in order.
fn checked_blocks(page: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        if line.trim() != MARK {
            continue;
        }
        let fence = lines.next().unwrap_or_default();
        assert_eq!(fence.trim(), "```sh", "a checked block must be a sh block");
        let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        blocks.push(body.join("\n"));
    }
    blocks
}

fn book_dir() -> PathBuf {
    suite_dir()
        .parent()
        .expect("the workspace root")
        .join("docs/src")
}

#[test]
fn marked_blocks_are_found() {
    let page = format!("text\n{MARK}\n```sh\necho one\necho two\n```\n{MARK}\n```sh\nx\n```\n");
    assert_eq!(checked_blocks(&page), vec!["echo one\necho two", "x"]);
    let counts: Vec<usize> = PAGES
        .iter()
        .map(|p| checked_blocks(&std::fs::read_to_string(book_dir().join(p)).unwrap()).len())
        .collect();
    assert_eq!(counts, vec![1, 1, 2], "checked blocks per page, {PAGES:?}");
}

/// The script: a standalone server for the first session (as `scripts/run` starts one),
/// stopped; then the other blocks as they stand; then every member must serve.
fn tour(work: &Path) -> String {
    let mut script = String::from("set -u\nip link set lo up\nmount -t tmpfs tmpfs /tmp\n");
    script.push_str(&format!("cd {}\n", work.display()));
    for (i, page) in PAGES.iter().enumerate() {
        let text = std::fs::read_to_string(book_dir().join(page)).expect("read the page");
        for (j, block) in checked_blocks(&text).into_iter().enumerate() {
            let name = format!("{page} block {}", j + 1);
            if i == 0 {
                script.push_str("mkdir -p /tmp/first\n(cd /tmp/first && exec ");
                script.push_str(&format!("{}/target/release/zooraft", work.display()));
                script.push_str(" > /tmp/first/log 2>&1) & first=$!\n");
                script.push_str("for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/2181) 2>/dev/null && break; sleep 0.1; done\n");
            }
            script.push_str(&format!("echo '== {name}'\n{block}\n"));
            script.push_str(&format!(
                "status=$?; [ $status = 0 ] || {{ echo '{name} failed'; exit 1; }}\n"
            ));
            if i == 0 {
                // Stopped (SIGTERM, a clean exit), so its ports are free for the ensemble.
                script.push_str("kill $first && wait $first || { echo 'the first server did not stop cleanly'; exit 1; }\n");
            }
        }
    }
    script.push_str(
        "for p in 2181 2182 2183; do fourlw srvr $p | grep -q Mode || { echo \"$p not serving\"; exit 1; }; done\necho '== all serving'\n",
    );
    script
}

#[test]
fn the_books_shell_examples_run_as_written() {
    assert!(
        is_root() || std::env::var_os("ZOORAFT_TEST_SKIP_ROOT").is_some(),
        "runs the book's examples in namespaces of their own: needs root (or set ZOORAFT_TEST_SKIP_ROOT=1 to skip)"
    );
    if !is_root() {
        return;
    }
    // A work directory outside /tmp (the examples get a /tmp of their own), holding the
    // binary where the book's commands look for it.
    let work = tempfile::tempdir_in("/var/tmp").expect("a work directory");
    std::fs::create_dir_all(work.path().join("target/release")).expect("mkdir");
    std::os::unix::fs::symlink(zooraft_binary(), work.path().join("target/release/zooraft"))
        .expect("link the binary");
    let script = tour(work.path());
    let out = Command::new("timeout")
        .args(["--kill-after=10", &LIMIT.as_secs().to_string()])
        .args([
            "unshare",
            "--net",
            "--mount",
            "--pid",
            "--fork",
            "--mount-proc",
        ])
        .args(["bash", "-c", &script])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the examples");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the book's examples failed:\n{text}");
    assert!(text.contains("== all serving"), "{text}");
    // The transfer was asked of the ensemble's member 1 (its AdminServer on 8080).
    assert!(
        text.contains("\"command\": \"yield_leadership\"") && !text.contains("A standalone server"),
        "{text}"
    );
    println!("{text}");
}

/// Whether this process runs as root.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
                .unwrap_or(false)
        })
        .unwrap_or(false)
}
