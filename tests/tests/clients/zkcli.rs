//! zkCli.sh (Debian's `/usr/share/zookeeper/bin/zkCli.sh`) against a real server.
//!
//! Two interactive zkCli sessions are fed commands on stdin. zkCli does not echo commands
//! when stdin is not a terminal, and it prints some answers on stdout ("[a, b]", stats) and
//! others on stderr ("Created /x", "Node does not exist: /x"), so both streams are merged
//! (`2>&1`) and every command is followed by a marker command (`get` of a node that never
//! exists) whose error line closes that command's output. Assertions are on zkCli's exact
//! output lines: created paths with the 10-digit suffix, data, `Stat` lines such as
//! `dataVersion = 1` and `ephemeralOwner = 0x...`, error messages, and `WATCHER::` events.

use zooraft_tests::zkcli::{ZkCli, COMMAND_TIMEOUT};
use zooraft_tests::{ServerKind, TestServer};

/// The value of a `key = value` Stat line, e.g. `stat_field(&out, "dataVersion")`.
fn stat_field<'a>(out: &'a [String], key: &str) -> &'a str {
    let prefix = format!("{key} = ");
    out.iter()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no `{key} = ` line in {out:#?}"))
}

fn hex_field(out: &[String], key: &str) -> i64 {
    let v = stat_field(out, key);
    let hex = v
        .strip_prefix("0x")
        .unwrap_or_else(|| panic!("{key} = {v} is not 0x-prefixed"));
    i64::from_str_radix(hex, 16).unwrap_or_else(|_| panic!("{key} = {v} is not hex"))
}

fn has(out: &[String], line: &str) -> bool {
    out.iter().any(|l| l == line)
}

#[track_caller]
fn assert_line(out: &[String], line: &str) {
    assert!(has(out, line), "expected the line {line:?} in {out:#?}");
}

/// The created path printed by `create`, checking the sequential suffix is 10 digits.
fn created_sequential(out: &[String], prefix: &str) -> String {
    let path = out
        .iter()
        .find_map(|l| l.strip_prefix("Created "))
        .unwrap_or_else(|| panic!("no `Created` line in {out:#?}"));
    let suffix = path
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{path} does not start with {prefix}"));
    assert!(
        suffix.len() == 10 && suffix.bytes().all(|b| b.is_ascii_digit()),
        "sequential suffix of {path} is not 10 digits"
    );
    path.to_string()
}

fn scenario(kind: ServerKind) {
    let server = TestServer::start(kind);
    let mut a = ZkCli::start("a", &server);

    // Creates: plain, ephemeral-sequential, persistent-sequential.
    assert_line(&a.run("create /cli \"hello\""), "Created /cli");
    let eph = created_sequential(&a.run("create -s -e /cli/eph- \"e\""), "/cli/eph-");
    assert_eq!(eph, "/cli/eph-0000000000");
    let seq = created_sequential(&a.run("create -s /cli/seq- s"), "/cli/seq-");
    assert_eq!(seq, "/cli/seq-0000000001");
    assert_line(&a.run("create /cli/child c"), "Created /cli/child");

    // ls prints the children sorted; ls -s adds the parent's Stat.
    let ls = a.run("ls /cli");
    assert_eq!(ls, vec!["[child, eph-0000000000, seq-0000000001]"]);
    let ls_s = a.run("ls -s /cli");
    assert_line(&ls_s, "[child, eph-0000000000, seq-0000000001]");
    assert_eq!(stat_field(&ls_s, "numChildren"), "3");
    assert_eq!(stat_field(&ls_s, "cversion"), "3");
    assert_eq!(stat_field(&ls_s, "dataVersion"), "0");
    assert_eq!(stat_field(&ls_s, "dataLength"), "5");
    assert_eq!(hex_field(&ls_s, "ephemeralOwner"), 0);
    assert_eq!(
        hex_field(&ls_s, "pZxid"),
        {
            let child = a.run("stat /cli/child");
            hex_field(&child, "cZxid")
        },
        "pZxid is the last child create's zxid"
    );

    // get -s of the ephemeral: data, then its Stat with the session as owner.
    let get = a.run("get -s /cli/eph-0000000000");
    assert_eq!(get[0], "e", "data comes first: {get:#?}");
    assert_eq!(stat_field(&get, "dataLength"), "1");
    assert_eq!(stat_field(&get, "dataVersion"), "0");
    assert_eq!(stat_field(&get, "numChildren"), "0");
    let owner = hex_field(&get, "ephemeralOwner");
    assert_ne!(owner, 0, "an ephemeral has an owner");
    assert_eq!(hex_field(&get, "cZxid"), hex_field(&get, "mZxid"));
    // ctime as java.util.Date prints it, e.g. `Sun Nov 22 01:47:14 UTC 2026`: a real clock time.
    let ctime: Vec<&str> = stat_field(&get, "ctime").split_whitespace().collect();
    let year: u32 = ctime.last().and_then(|y| y.parse().ok()).unwrap_or(0);
    assert!(ctime.len() == 6 && year >= 2024, "ctime {ctime:?}");

    assert_eq!(a.run("getEphemerals /cli"), vec!["[/cli/eph-0000000000]"]);
    assert_eq!(a.run("getAllChildrenNumber /cli"), vec!["3"]);

    // set, then stat shows the new version and length; czxid stays, mzxid moves.
    assert_eq!(a.run("set /cli \"world\""), Vec::<String>::new());
    let stat = a.run("stat /cli");
    assert_eq!(stat_field(&stat, "dataVersion"), "1");
    assert_eq!(stat_field(&stat, "dataLength"), "5");
    assert_eq!(stat_field(&stat, "numChildren"), "3");
    assert_eq!(hex_field(&stat, "cZxid"), hex_field(&ls_s, "cZxid"));
    assert!(hex_field(&stat, "mZxid") > hex_field(&stat, "cZxid"));
    let set_s = a.run("set -s /cli again");
    assert_eq!(stat_field(&set_s, "dataVersion"), "2");

    // Errors as zkCli words them.
    assert_eq!(
        a.run("set -v 9 /cli x"),
        vec!["version No is not valid : /cli"]
    );
    assert_eq!(
        a.run("delete -v 9 /cli/child"),
        vec!["version No is not valid : /cli/child"]
    );
    assert_eq!(a.run("create /cli"), vec!["Node already exists: /cli"]);
    assert_eq!(a.run("delete /cli"), vec!["Node not empty: /cli"]);
    assert_eq!(a.run("stat /nope"), vec!["Node does not exist: /nope"]);
    assert_eq!(
        a.run("create /nope/kid"),
        vec!["Node does not exist: /nope/kid"]
    );
    assert_eq!(a.run("sync /cli"), vec!["Sync is OK"]);

    // Watches: data (get -w), child (ls -w), exists on a missing node (stat -w).
    assert_eq!(a.run("get -w /cli"), vec!["again"]);
    a.run("ls -w /cli");
    assert_eq!(
        a.run("stat -w /cli-new"),
        vec!["Node does not exist: /cli-new"]
    );

    // A second session makes the changes; session a prints the events.
    let mut b = ZkCli::start("b", &server);
    assert_eq!(b.run("set /cli changed"), Vec::<String>::new());
    a.wait_for_line(
        "WatchedEvent state:SyncConnected type:NodeDataChanged path:/cli",
        COMMAND_TIMEOUT,
    );
    assert_line(&b.run("create /cli/other"), "Created /cli/other");
    a.wait_for_line(
        "WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/cli",
        COMMAND_TIMEOUT,
    );
    assert_line(&b.run("create /cli-new"), "Created /cli-new");
    a.wait_for_line(
        "WatchedEvent state:SyncConnected type:NodeCreated path:/cli-new",
        COMMAND_TIMEOUT,
    );
    let b_get = b.run("get -s /cli");
    assert_eq!(b_get[0], "changed");
    assert_eq!(stat_field(&b_get, "dataVersion"), "3");
    // b sees a's ephemeral, owned by a's session.
    let b_eph = b.run("stat /cli/eph-0000000000");
    assert_eq!(hex_field(&b_eph, "ephemeralOwner"), owner);

    // b's ephemeral goes when b quits.
    assert_line(&b.run("create -e /eph-b"), "Created /eph-b");
    let b_all = b.quit();
    assert!(
        has(&b_all, "WatchedEvent state:Closed type:None path:null"),
        "b's output ends with a Closed event: {b_all:#?}"
    );
    assert_eq!(a.run("stat /eph-b"), vec!["Node does not exist: /eph-b"]);

    // delete and deleteall.
    assert_eq!(a.run("delete /cli/child"), Vec::<String>::new());
    assert_eq!(
        a.run("ls /cli"),
        vec!["[eph-0000000000, other, seq-0000000001]"]
    );
    assert_eq!(a.run("deleteall /cli"), Vec::<String>::new());
    assert_eq!(a.run("ls /"), vec!["[cli-new, zookeeper]"]);
    assert_eq!(a.run("get /cli"), vec!["Node does not exist: /cli"]);

    let all = a.quit();
    assert!(
        has(&all, "WatchedEvent state:Closed type:None path:null"),
        "a's output ends with a Closed event"
    );
}

zooraft_tests::against_both!(zkcli_session_apache, zkcli_session_zooraft, scenario);
