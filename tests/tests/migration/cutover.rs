//! Live migration, second half: `zooraft migrate cutover` turns the zooraft members that
//! observe a running Apache ZooKeeper 3.8 ensemble into a Raft ensemble at ZooKeeper's last
//! zxid, with their clients connected. Real ZooKeeper voters, real zooraft observers, kazoo
//! and Java clients writing through the cut-over; then the trees, sessions and zxids are
//! checked, and the new Raft leader is killed. Register clients run through it all, their
//! history checked for linearizability (`zooraft_tests::registers`). Also: the refusal while
//! ZooKeeper has clients, and a cut-over that is prepared but never committed (ZooKeeper
//! stays in charge; a retry succeeds).

use std::time::Duration;

use zookeeper_client as zc;
use zooraft_tests::kazoo_migrate::{load_every_kind, Background};
use zooraft_tests::live_migration::{wait_serving, zxid_of, LiveMigration};
use zooraft_tests::registers::{Reads, Registers};
use zooraft_tests::rt::{block_on, eventually, runtime, within};
use zooraft_tests::zc::{connect, persistent};
use zooraft_tests::{zooraft_cmd, TestServer};

const WAIT: Duration = Duration::from_secs(60);

/// Runs `zooraft migrate <args>`: (success, output).
fn migrate(args: &[&str]) -> (bool, String) {
    let mut all = vec!["migrate"];
    all.extend_from_slice(args);
    let (ok, text) = zooraft_cmd(&all);
    println!("zooraft migrate {args:?}:\n{text}");
    (ok, text)
}

/// A figure of a kazoo writer's last line (`acked N errors N ...`).
fn figure<'a>(out: &'a str, key: &str) -> &'a str {
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with("acked "))
        .unwrap_or_else(|| panic!("no summary in:\n{out}"));
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == key {
            return words.next().unwrap_or("");
        }
    }
    panic!("no {key} in {line}")
}

/// The Raft leader among the zooraft members (waits for one).
fn raft_leader(m: &LiveMigration) -> usize {
    eventually("a Raft leader among the zooraft members", WAIT, || {
        (0..m.zooraft.len()).find(|i| {
            m.zooraft[*i]
                .as_ref()
                .is_some_and(|s| s.is_running() && s.mode().as_deref() == Some("leader"))
        })
    })
}

/// Waits until the member at `addr` holds a write for a prepared cut-over (its
/// `zk_migration_held`).
async fn until_held(addr: std::net::SocketAddr) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let mntr = zooraft_tests::four_letter_word(addr, "mntr").unwrap_or_default();
        let held = mntr
            .lines()
            .find_map(|l| l.strip_prefix("zk_migration_held\t"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if held > 0 {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "no write was held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes a cut-over's prepare step by hand (as a coordinator that then does nothing else).
async fn prepare(c: &zc::Client, plan: &str) {
    c.create(
        "/zooraft-cutover",
        format!("zooraft-cutover {plan}").as_bytes(),
        &persistent(),
    )
    .await
    .expect("prepare");
}

/// Waits until every zooraft member holds its clients' writes for a prepared cut-over.
fn prepared(m: &LiveMigration) {
    let all: Vec<usize> = (0..m.zooraft.len()).collect();
    prepared_on(m, &all);
}

/// [`prepared`] for the members `which` (indexes).
fn prepared_on(m: &LiveMigration, which: &[usize]) {
    for &i in which {
        eventually("the member is prepared", WAIT, || {
            (m.observer(i).figure("zk_migration_phase").as_deref() == Some("prepared"))
                .then_some(())
        });
    }
}

/// Creates `path` through `c`, retrying while the member has no leader (the client's
/// connection is lost and comes back); a create that answers NODEEXISTS went through an
/// earlier try.
async fn eventually_async_write(c: &zc::Client, path: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        match c.create(path, b"", &persistent()).await {
            Ok(_) | Err(zc::Error::NodeExists) => return,
            Err(e) if std::time::Instant::now() < deadline => {
                println!("create {path}: {e}; again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("create {path}: {e}"),
        }
    }
}

fn hosts_of(servers: &[&TestServer]) -> String {
    servers
        .iter()
        .map(|s| s.connect_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn cutover_under_load_keeps_every_client_session_and_write() {
    let mut m = LiveMigration::start(3, 3);
    load_every_kind(&m.zookeeper[0]);
    for i in 0..3 {
        m.start_observer(i);
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    // Every client is on a zooraft member, writing through the cut-over: kazoo on each,
    // and the Java client on the last.
    let mut writers: Vec<(String, Background)> = (0..3)
        .map(|i| {
            let root = format!("/w{i}");
            let kazoo = Background::spawn(
                &["write_at", &root, "12", &m.observer(i).connect_string()],
                dir.path().join(format!("w{i}.out")),
            );
            (root, kazoo)
        })
        .collect();
    let mut java = zooraft_tests::java::java_command("MigrationWriter");
    java.args(["/j", "12", &m.observer(2).connect_string()]);
    writers.push((
        "/j".into(),
        Background::command(java, dir.path().join("j.out")),
    ));
    // A client with an ephemeral and a watch, on the first member (its runtime lives as
    // long as the test).
    let rt = runtime();
    let watcher = rt.block_on(async {
        let c = connect(
            &m.observer(0).connect_string(),
            Duration::from_secs(10),
            WAIT,
        )
        .await;
        c.create("/watched", b"before", &persistent())
            .await
            .expect("create");
        c.create(
            "/kept",
            b"",
            &zc::CreateMode::Ephemeral.with_acls(zc::Acls::anyone_all()),
        )
        .await
        .expect("ephemeral");
        let (_, _, w) = c.get_and_watch_data("/watched").await.expect("watch");
        (c, w)
    });
    // Register clients on the zooraft members (sync + read, write, compare-and-set) from
    // before the cut-over to after the new leader's death: their history must be
    // linearizable across the switch from ZooKeeper's ordering to Raft's.
    let observers: Vec<&TestServer> = (0..3).map(|i| m.observer(i)).collect();
    let registers = Registers::start(&rt, &hosts_of(&observers), 3, Reads::AfterSync, 0x5eed);
    // The writers are under way (every member has applied a few hundred of their writes).
    let started = zxid_of(m.observer(0)).expect("zxid");
    let before = eventually("the writers write", WAIT, || {
        let z = (0..3).filter_map(|i| zxid_of(m.observer(i))).min()?;
        (z >= started + 300).then_some(z)
    });
    let (ok, out) = migrate(&["cutover", "--server", &m.observer(1).connect_string()]);
    assert!(ok, "the cut-over failed:\n{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("cutover: "))
        .expect("the cutover line");
    let zxid = i64::from_str_radix(
        line.split("zxid=0x")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .expect("zxid"),
        16,
    )
    .expect("hex zxid");
    let pause_ms: u64 = line
        .split("pause_ms=")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("pause_ms");
    println!("cut over at {zxid:#x} after {before:#x}, pause {pause_ms} ms");
    assert!(line.ends_with("members=4,5,6"), "{line}");
    assert!(zxid >= before);
    // The zooraft members are a Raft ensemble now, writing above ZooKeeper's epoch.
    let leader = raft_leader(&m);
    let zooraft: Vec<&TestServer> = (0..3).map(|i| m.observer(i)).collect();
    let hosts = hosts_of(&zooraft);
    rt.block_on(async {
        let (c, w) = watcher;
        let z = connect(&hosts, Duration::from_secs(10), WAIT).await;
        let (stat, _) = z
            .create("/after", b"", &persistent())
            .await
            .expect("a write after the cut-over");
        assert!(
            stat.czxid >> 32 > zxid >> 32,
            "zxids go on in a later epoch: {:#x} after {zxid:#x}",
            stat.czxid
        );
        // The watch set before the cut-over fires for a change after it; the session
        // that set it is the same and its ephemeral is still there.
        z.set_data("/watched", b"after", None).await.expect("set");
        let event = within("the watch fires", WAIT, w.changed()).await;
        assert_eq!(event.event_type, zc::EventType::NodeDataChanged);
        let (_, kept) = z.get_data("/kept").await.expect("the ephemeral is kept");
        assert_eq!(kept.ephemeral_owner, c.session_id().0);
        // /zookeeper/config names the zooraft members only.
        let (config, _) = z.get_data("/zookeeper/config").await.expect("config");
        let config = String::from_utf8_lossy(&config).to_string();
        for id in [1, 2, 3] {
            assert!(!config.contains(&format!("server.{id}=")), "{config}");
        }
        for id in [4, 5, 6] {
            assert!(config.contains(&format!("server.{id}=")), "{config}");
        }
    });
    // Every writer: no error, no disconnection, the same session, and every acknowledged
    // write in the tree.
    let outs: Vec<(String, String)> = writers
        .iter_mut()
        .map(|(root, w)| (root.clone(), w.wait(WAIT)))
        .collect();
    let check = |hosts: &str| {
        block_on(async {
            let z = connect(hosts, Duration::from_secs(10), WAIT).await;
            for (i, (root, out)) in outs.iter().enumerate() {
                assert_eq!(figure(out, "errors"), "0", "writer {i}:\n{out}");
                assert_eq!(figure(out, "same_session"), "True", "writer {i}:\n{out}");
                assert_eq!(
                    figure(out, "states"),
                    "-",
                    "writer {i} saw its connection change:\n{out}"
                );
                let acked: usize = figure(out, "acked").parse().expect("acked");
                let last_set = figure(out, "last_set");
                let (data, _) = z.get_data(root).await.expect("the writer's root");
                assert_eq!(
                    String::from_utf8_lossy(&data),
                    last_set,
                    "writer {i}'s last set"
                );
                let (children, _) = z.get_children(root).await.expect("children");
                let sequential = children.iter().filter(|c| c.starts_with("q-")).count();
                assert_eq!(
                    sequential, acked,
                    "writer {i}: every acknowledged create is there"
                );
            }
        })
    };
    check(&hosts);
    // The new Raft leader dies: still nothing lost.
    m.observer_mut(leader).kill();
    let rest: Vec<&TestServer> = (0..3)
        .filter(|i| *i != leader)
        .map(|i| m.observer(i))
        .collect();
    let rest = hosts_of(&rest);
    for i in (0..3).filter(|i| *i != leader) {
        wait_serving(m.observer(i));
    }
    check(&rest);
    // A member restarted after the cut-over runs Raft (it does not follow ZooKeeper).
    m.observer_mut(leader).restart();
    wait_serving(m.observer(leader));
    let report = registers.finish(&rt);
    println!("{}", report.summary);
    assert!(
        report.violations.is_empty(),
        "{}",
        report.violations.join("\n")
    );
    let mode = m.observer(leader).mode();
    assert!(
        matches!(mode.as_deref(), Some("leader" | "follower")),
        "{mode:?}"
    );
}

#[test]
fn cutover_is_refused_while_zookeeper_has_clients_and_then_goes_through() {
    let mut m = LiveMigration::start(3, 1);
    let observer = m.start_observer(0).connect_string();
    // A kazoo client on ZooKeeper's second member, until killed.
    let dir = tempfile::tempdir().expect("temporary directory");
    let session_file = dir.path().join("session");
    let on_zookeeper = Background::spawn(
        &[
            "abandon",
            session_file.to_str().expect("utf-8"),
            &m.zookeeper[1].connect_string(),
        ],
        dir.path().join("abandon.out"),
    );
    eventually("the ZooKeeper client is connected", WAIT, || {
        session_file.exists().then_some(())
    });
    let (ok, out) = migrate(&["cutover", "--server", &observer]);
    assert!(!ok, "refused:\n{out}");
    assert!(
        out.contains("server.2"),
        "names the member with clients:\n{out}"
    );
    assert_eq!(
        m.observer(0).mode().as_deref(),
        Some("observer"),
        "nothing changed"
    );
    drop(on_zookeeper);
    // `migrate status` says what each member is.
    let (ok, status) = migrate(&["status", "--server", &observer]);
    assert!(ok);
    assert!(
        status.contains("server.4")
            && status.contains("zooraft")
            && status.contains("phase=following"),
        "{status}"
    );
    let (ok, out) = eventually("the ZooKeeper client's connection is gone", WAIT, || {
        let (ok, out) = migrate(&["cutover", "--server", &observer]);
        (ok || !out.contains("still have clients")).then_some((ok, out))
    });
    assert!(ok, "{out}");
    wait_serving(m.observer(0));
}

#[test]
fn a_cutover_that_never_commits_leaves_zookeeper_in_charge_and_can_be_run_again() {
    let mut m = LiveMigration::start(3, 2);
    m.start_observer(0);
    m.start_observer(1);
    let observer = m.observer(0).connect_string();
    block_on(async {
        // A coordinator that prepares and dies: the members hold writes, then give the
        // cut-over up after its timeout, and the held writes go to ZooKeeper.
        let coordinator = connect(&observer, Duration::from_secs(10), WAIT).await;
        // (Sessions are connected first: a new session is held too.)
        let client = connect(
            &m.observer(1).connect_string(),
            Duration::from_secs(10),
            WAIT,
        )
        .await;
        prepare(&coordinator, "nonce=dead members=4,5 timeout_ms=3000").await;
        prepared(&m);
        // The member holds the write (and says so), then gives it to ZooKeeper when the
        // cut-over's timeout passes.
        let member = m.observer(1).addr();
        let write = within(
            "a held write",
            WAIT,
            client.create("/held", b"", &persistent()),
        );
        let (written, ()) = tokio::join!(write, until_held(member));
        written.expect("the held write goes through after the timeout");
        let zk = connect(&m.zookeeper_hosts(), Duration::from_secs(10), WAIT).await;
        within("sync", WAIT, zk.sync("/held")).await.expect("sync");
        zk.get_data("/held")
            .await
            .expect("ZooKeeper has the held write");
        // Prepared again with a timeout no test waits out, then aborted by deleting the
        // node: the held write goes through at once.
        coordinator
            .delete("/zooraft-cutover", None)
            .await
            .expect("clean up");
        prepare(&coordinator, "nonce=slow members=4,5 timeout_ms=3600000").await;
        prepared(&m);
        let write = within(
            "the held write, released by the abort",
            WAIT,
            client.create("/aborted", b"", &persistent()),
        );
        let abort = async {
            until_held(member).await;
            coordinator
                .delete("/zooraft-cutover", None)
                .await
                .expect("abort");
        };
        let (written, ()) = tokio::join!(write, abort);
        written.expect("released by the abort");
    });
    assert_eq!(m.observer(0).mode().as_deref(), Some("observer"));
    // A real cut-over afterwards succeeds.
    let (ok, out) = migrate(&["cutover", "--server", &observer]);
    assert!(ok, "{out}");
    raft_leader(&m);
}

#[test]
fn an_interrupted_cutover_leaves_zookeeper_in_charge_and_a_retry_succeeds() {
    let mut m = LiveMigration::start(3, 3);
    for i in 0..3 {
        m.start_observer(i);
    }
    let rt = runtime();
    // A client on the third member, connected before anything is held (its session
    // timeout is well above the longest hold here, as it must be for a client to wait
    // through a hold without dropping its connection).
    let client = rt.block_on(connect(
        &m.observer(2).connect_string(),
        Duration::from_secs(30),
        WAIT,
    ));
    // The coordinator prepares through the first member, which then dies: the cut-over
    // can never commit (the coordinator's session is gone with it).
    rt.block_on(async {
        let coordinator = connect(
            &m.observer(0).connect_string(),
            Duration::from_secs(10),
            WAIT,
        )
        .await;
        prepare(&coordinator, "nonce=killed members=4,5,6 timeout_ms=2000").await;
    });
    prepared(&m);
    m.observer_mut(0).kill();
    // The held write is not lost: once the members give the cut-over up, it reaches
    // ZooKeeper, exactly once.
    rt.block_on(async {
        let (stat, _) = within(
            "a write held by an interrupted cut-over",
            WAIT,
            client.create("/held-through-it", b"", &persistent()),
        )
        .await
        .expect("the held write goes through");
        let zk = connect(&m.zookeeper_hosts(), Duration::from_secs(10), WAIT).await;
        within("sync", WAIT, zk.sync("/")).await.expect("sync");
        let (_, on_zk) = zk.get_data("/held-through-it").await.expect("on ZooKeeper");
        assert_eq!(on_zk.czxid, stat.czxid, "one write, one zxid");
    });
    // Prepared again (through another member), and ZooKeeper's leader dies: the members
    // lose their leader, as ZooKeeper's own observers do (their clients reconnect), find
    // the next one, and give the cut-over up; ZooKeeper serves throughout.
    rt.block_on(async {
        let coordinator = connect(
            &m.observer(1).connect_string(),
            Duration::from_secs(10),
            WAIT,
        )
        .await;
        coordinator
            .delete("/zooraft-cutover", None)
            .await
            .expect("the given-up step goes");
        prepare(&coordinator, "nonce=again members=4,5,6 timeout_ms=2000").await;
    });
    prepared_on(&m, &[1, 2]);
    let leader = m.leader();
    m.zookeeper[leader].kill();
    rt.block_on(async {
        eventually_async_write(&client, "/after-leader-died").await;
    });
    // ZooKeeper kept serving; the member comes back; the cut-over is run again.
    m.observer_mut(0).restart();
    wait_serving(m.observer(0));
    let (ok, out) = eventually("every member follows ZooKeeper again", WAIT, || {
        let (ok, out) = migrate(&["cutover", "--server", &m.observer(1).connect_string()]);
        (ok || !out.contains("not following")).then_some((ok, out))
    });
    assert!(ok, "{out}");
    assert!(out.contains("removed /zooraft-cutover"), "{out}");
    raft_leader(&m);
    rt.block_on(async {
        let z = connect(
            &m.observer(1).connect_string(),
            Duration::from_secs(10),
            WAIT,
        )
        .await;
        let (_, stat) = z.get_data("/held-through-it").await.expect("kept");
        assert_eq!(stat.version, 0);
        drop(client);
    });
}

#[test]
fn members_that_missed_the_cutover_join_the_raft_ensemble() {
    let mut m = LiveMigration::start(3, 4);
    for i in 0..4 {
        m.start_observer(i);
    }
    // Members 6 and 7 are down while a coordinator (here by hand, past the command's
    // checks) prepares and commits a cut-over of all four.
    m.observer_mut(2).kill();
    m.observer_mut(3).kill();
    let rt = runtime();
    rt.block_on(async {
        let c = connect(
            &m.observer(0).connect_string(),
            Duration::from_secs(10),
            WAIT,
        )
        .await;
        prepare(&c, "nonce=late members=4,5,6,7 timeout_ms=60000").await;
        prepared_on(&m, &[0, 1]);
        c.create("/zooraft-cutover/commit", b"late", &persistent())
            .await
            .expect("commit");
    });
    // Member 6 comes back with its copy from before: ZooKeeper sends it the commit (a
    // DIFF), it cuts over at the same zxid, and the Raft ensemble has its majority.
    m.observer_mut(2).restart();
    let leader = raft_leader(&m);
    rt.block_on(async {
        let z = connect(
            &m.observer(leader).connect_string(),
            Duration::from_secs(10),
            WAIT,
        )
        .await;
        eventually_async_write(&z, "/written-by-raft").await;
    });
    // ZooKeeper, still running, takes a write after the cut-over (what the command's
    // refusal guards against): it is not in zooraft.
    rt.block_on(async {
        let zk = connect(&m.zookeeper_hosts(), Duration::from_secs(10), WAIT).await;
        zk.create("/zookeeper-after-the-cutover", b"", &persistent())
            .await
            .expect("a write on ZooKeeper");
    });
    // Member 7 comes back wiped: ZooKeeper sends it its whole tree, past the commit; it
    // serves none of it and joins the Raft ensemble empty, caught up by its leader.
    let data = m.observer(3).data_dir();
    for sub in ["zab", "raft"] {
        let _ = std::fs::remove_dir_all(data.join(sub));
    }
    m.observer_mut(3).restart();
    wait_serving(m.observer(3));
    let mode = m.observer(3).mode();
    assert!(
        matches!(mode.as_deref(), Some("leader" | "follower")),
        "{mode:?}"
    );
    rt.block_on(async {
        let z = connect(
            &m.observer(3).connect_string(),
            Duration::from_secs(10),
            WAIT,
        )
        .await;
        within("sync", WAIT, z.sync("/")).await.expect("sync");
        z.get_data("/written-by-raft")
            .await
            .expect("the late member has what Raft committed");
        assert!(
            matches!(
                z.get_data("/zookeeper-after-the-cutover").await,
                Err(zc::Error::NoNode)
            ),
            "ZooKeeper's later tree is not served"
        );
        z.create("/through-the-late-member", b"", &persistent())
            .await
            .expect("a write through it goes through Raft");
    });
    assert!(
        m.observer(3).log_tail().contains("missed the cut-over")
            || std::fs::read_to_string(m.observer(3).log_path())
                .unwrap_or_default()
                .contains("missed the cut-over"),
        "the late member says what happened"
    );
}
