//! ZooKeeper's reconfig (op 16) as a client sees it, pinned against Apache ZooKeeper 3.8
//! with `reconfigEnabled=true`: `/zookeeper/config`'s format and first version, and the
//! refusals (MARSHALLINGERROR for an empty `newMembers` or a non-numeric id, BADVERSION
//! for a stale `curConfigId`, BADARGUMENTS when no voter is left, NEWCONFIGNOQUORUM when
//! the new voters have no synced quorum, and NOAUTH, checked last, for a non-super client;
//! the super user (`DigestAuthenticationProvider.superDigest`) may).
//! Requests are sent as the Java client and kazoo send them: absent strings are null.
//!
//! Then the changes themselves, under writes (5 members, `skipACL=yes`): shrinking 5 -> 3
//! with the leader among the leaving members, a participant made an observer and back;
//! each reply carries the new configuration versioned with its zxid, the data watch on
//! `/zookeeper/config` fires, every member ends with the same configuration and tree, and
//! no acknowledged write is lost.

use std::time::Duration;

use zooraft_tests::admin::{config_text, current_config, line_of, put_opt, reconfig, Admin, CALL};
use zooraft_tests::raw_client::{ConnectOptions, RawClient};
use zooraft_tests::rt::block_on;
use zooraft_tests::rt::eventually;
use zooraft_tests::{against_both, free_port, ServerKind, TestEnsemble, TestServer};

against_both!(
    reconfig_refusals_apache,
    reconfig_refusals_zooraft,
    reconfig_refusals
);

/// A refusal case: what, joining, leaving, newMembers, curConfigId, the error expected.
type Case = (
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
    i64,
    i32,
);

/// `super:test` (ZooKeeper's administrator guide's example) as the digest provider hashes it.
const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";

fn reconfig_refusals(kind: ServerKind) {
    let e = TestEnsemble::start_kind(
        kind,
        3,
        0,
        &[
            ("reconfigEnabled", "true"),
            ("standaloneEnabled", "false"),
            // ZooKeeper turns zoo.cfg keys it does not know into `zookeeper.*` properties.
            ("DigestAuthenticationProvider.superDigest", SUPER_DIGEST),
        ],
    );
    // The super user removes a follower other than the member the client is on.
    let leader = e.leader();
    let gone = (1..3).find(|i| *i != leader).expect("a follower") + 1;
    block_on(async {
        let (mut c, _) = RawClient::connect(e.member(0).addr(), &ConnectOptions::default(), CALL)
            .await
            .expect("a session");
        let text = current_config(&mut c).await;
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines.len(), 4, "{text}");
        for (i, line) in lines[..3].iter().enumerate() {
            let client = e.member(i).port();
            let peer = e.peer_port(i);
            assert!(
                line.starts_with(&format!("server.{}=127.0.0.1:{peer}:", i + 1))
                    && line.ends_with(&format!(":participant;127.0.0.1:{client}")),
                "{line}"
            );
        }
        assert_eq!(lines[3], "version=100000000");
        let three_dead = "server.4=127.0.0.1:1:2;3,server.5=127.0.0.1:4:5;6,\
                          server.6=127.0.0.1:7:8;9";
        let cases: [Case; 6] = [
            ("empty newMembers", None, None, Some(""), -1, -5),
            ("a non-numeric leaving id", None, Some("x"), None, -1, -5),
            ("a stale curConfigId", None, Some("3"), None, 5, -103),
            ("removing every voter", None, Some("1,2,3"), None, -1, -8),
            (
                "three joiners that never started",
                Some(three_dead),
                None,
                None,
                -1,
                -13,
            ),
            (
                "a non-super client",
                None,
                Some("3"),
                None,
                0x1_0000_0000,
                -102,
            ),
        ];
        for (xid, (what, j, l, m, from, err)) in cases.into_iter().enumerate() {
            let r = reconfig(&mut c, 100 + xid as i32, j, l, m, from).await;
            assert_eq!(r.err, err, "{what}");
        }
        // Nothing changed.
        assert_eq!(current_config(&mut c).await, text);
        // The super user may.
        c.auth("digest", b"super:test")
            .await
            .expect("addauth super");
        let leaving = gone.to_string();
        let r = reconfig(&mut c, 200, None, Some(&leaving), None, -1).await;
        assert_eq!(r.err, 0, "the super user's reconfig");
        let after = current_config(&mut c).await;
        assert!(!after.contains(&format!("server.{gone}=")), "{after}");
    });
}

against_both!(
    shrink_and_swap_roles_apache,
    shrink_and_swap_roles_zooraft,
    shrink_and_swap_roles
);

fn shrink_and_swap_roles(kind: ServerKind) {
    let mut e = TestEnsemble::start_kind(kind, 5, 0, zooraft_tests::ensemble::RECONFIG);
    let leader = e.leader();
    // The leader and one follower leave; the admin client talks to a member that stays.
    let other = (0..5).find(|i| *i != leader).expect("a follower");
    let leaving = [leader, other];
    let stays: Vec<usize> = (0..5).filter(|i| !leaving.contains(i)).collect();
    let admin = stays[0];
    let mut acked = Vec::new();
    block_on(async {
        let mut c = Admin::open(e.member(admin).addr()).await;
        let before = c.config().await;
        let session = c.watch_config().await;
        for k in 0..20 {
            acked.push(c.write(&format!("/before-{k}")).await);
        }
        let ids = format!("{},{}", leaving[0] + 1, leaving[1] + 1);
        let (after, zxid) = c.change(None, Some(&ids), -1).await;
        assert_eq!(after.lines().count(), 4, "{after}");
        assert_ne!(after, before);
        if let Some(zxid) = zxid {
            assert_eq!(
                after.lines().last(),
                Some(format!("version={zxid:x}").as_str()),
                "the version is the reconfig's zxid"
            );
        }
        c.expect_config_event(session).await;
        for k in 0..20 {
            acked.push(c.write(&format!("/shrunk-{k}")).await);
        }
        // A participant becomes an observer, then a participant again.
        let target = stays[2];
        let line = line_of(&after, target);
        let as_observer = line.replace(":participant;", ":observer;");
        let (text, _) = c.change(Some(&as_observer), None, -1).await;
        assert_eq!(line_of(&text, target), as_observer);
        let session = c.watch_config().await;
        acked.push(c.write("/observer").await);
        let version = c.config_version().await;
        let (text, _) = c.change(Some(&line), None, version).await;
        assert_eq!(line_of(&text, target), line);
        c.expect_config_event(session).await;
        acked.push(c.write("/participant").await);
    });
    for i in leaving {
        e.member_mut(i).kill();
    }
    // Every remaining member: the same configuration, every acknowledged write.
    let mut texts = Vec::new();
    for i in stays.iter().copied() {
        let addr = e.member(i).addr();
        texts.push(block_on(async {
            let mut c = Admin::open(addr).await;
            c.sync().await;
            for p in &acked {
                let exists = jute::Request::Exists(jute::ExistsRequest {
                    path: p.clone(),
                    watch: false,
                });
                let r = c.call(&exists).await;
                assert_eq!(r.err, 0, "{p} on member {}", i + 1);
            }
            c.config().await
        }));
    }
    assert!(texts.windows(2).all(|w| w[0] == w[1]), "{texts:?}");
    eventually(
        "one leader and no observer left",
        Duration::from_secs(30),
        || {
            let modes: Vec<Option<String>> = stays.iter().map(|i| e.member(*i).mode()).collect();
            let leaders = modes
                .iter()
                .filter(|m| m.as_deref() == Some("leader"))
                .count();
            let observers = modes
                .iter()
                .filter(|m| m.as_deref() == Some("observer"))
                .count();
            (leaders == 1 && observers == 0).then_some(())
        },
    );
    if kind == ServerKind::Zooraft {
        e.converged();
    }
}

against_both!(
    grow_and_replace_apache,
    grow_and_replace_zooraft,
    grow_and_replace
);

/// Starts an empty server `id` that joins: its configuration is the committed one plus
/// itself (as ZooKeeper's manual says a joiner is set up). Returns it and its server string.
fn joiner(kind: ServerKind, id: u64, committed: &str) -> (TestServer, String) {
    joiner_with(kind, id, committed, &[])
}

/// A member's server string on fresh ports (zooraft does not use the election port, but
/// writes it back as given): `(client port, host:quorum:election:participant;host:client)`.
fn fresh_spec() -> (u16, String) {
    let (client, peer, election) = (free_port(), free_port(), free_port());
    let spec = format!("127.0.0.1:{peer}:{election}:participant;127.0.0.1:{client}");
    (client, spec)
}

/// An ensemble member's builder, set up as the harness sets its members up, with the
/// reconfig settings.
fn member_builder(kind: ServerKind, id: u64, client: u16) -> zooraft_tests::TestServerBuilder {
    let mut b = TestServer::builder(kind)
        .port(client)
        .myid(id)
        .tick_time_ms(500)
        .config("4lw.commands.whitelist", "*")
        .no_wait();
    for (k, v) in zooraft_tests::ensemble::RECONFIG {
        b = b.config(k, v);
    }
    match kind {
        ServerKind::Zooraft => b.config("raftTickMs", "100"),
        ServerKind::Apache => b.config("initLimit", "20").config("syncLimit", "4"),
    }
}

/// [`joiner`] with more zoo.cfg settings.
fn joiner_with(
    kind: ServerKind,
    id: u64,
    committed: &str,
    extra: &[(&str, &str)],
) -> (TestServer, String) {
    let (client, spec) = fresh_spec();
    let mut b = member_builder(kind, id, client);
    for (k, v) in extra {
        b = b.config(k, v);
    }
    for line in committed.lines().filter(|l| l.starts_with("server.")) {
        if let Some((key, value)) = line.split_once('=') {
            b = b.config(key, value);
        }
    }
    b = b.config(&format!("server.{id}"), &spec);
    (b.start(), format!("server.{id}={spec}"))
}

/// Grows 3 -> 5 with two empty servers, then replaces a kill -9'd member by a third empty
/// server under a new id, under a write load from three clients (and the operator's own
/// writes between the steps): every change commits, no write fails but by ConnectionLoss,
/// no session expires, and every member of the final configuration serves the same
/// configuration, tree and every acknowledged write.
fn grow_and_replace(kind: ServerKind) {
    let mut e = TestEnsemble::start_kind(kind, 3, 0, zooraft_tests::ensemble::RECONFIG);
    let leader = e.leader();
    let admin = (leader + 1) % 3;
    let dead = (leader + 2) % 3;
    let mut acked = Vec::new();
    let mut joiners = Vec::new();
    // Several clients write all along (they know the first three members only).
    let rt = zooraft_tests::rt::runtime();
    let (load, writers) = zooraft_tests::load::start(&rt, &e.connect_string(), "/load", 3);
    rt.block_on(async {
        let mut c = Admin::open(e.member(admin).addr()).await;
        let committed = c.config().await;
        for k in 0..20 {
            acked.push(c.write(&format!("/three-{k}")).await);
        }
        let (s4, spec4) = joiner(kind, 4, &committed);
        let (s5, spec5) = joiner(kind, 5, &committed);
        joiners.push(s4);
        joiners.push(s5);
        let (text, _) = c.change(Some(&format!("{spec4},{spec5}")), None, -1).await;
        assert_eq!(text.lines().count(), 6, "{text}");
        for k in 0..20 {
            acked.push(c.write(&format!("/five-{k}")).await);
        }
        // Member `dead` dies for good; an empty server 6 takes its place.
        e.member_mut(dead).kill();
        let (s6, spec6) = joiner(kind, 6, &text);
        joiners.push(s6);
        let leaving = (dead + 1).to_string();
        let (text, _) = c.change(Some(&spec6), Some(&leaving), -1).await;
        assert!(!text.contains(&format!("server.{}=", dead + 1)), "{text}");
        assert!(text.contains("server.6="), "{text}");
        for k in 0..20 {
            acked.push(c.write(&format!("/replaced-{k}")).await);
        }
    });
    let report = zooraft_tests::load::finish(&rt, &load, writers);
    assert!(
        report.failed.is_empty(),
        "writes failed: {:?}",
        report.failed
    );
    assert_eq!(report.expired, 0, "sessions expired");
    assert!(!report.acked.is_empty(), "no write acknowledged under load");
    // Every member of the final configuration: serving, the same configuration and tree.
    let survivors: Vec<&TestServer> = (0..3)
        .filter(|i| *i != dead)
        .map(|i| e.member(i))
        .chain(joiners.iter())
        .collect();
    let mut texts = Vec::new();
    for s in &survivors {
        let addr = s.addr();
        texts.push(block_on(async {
            let mut c = Admin::open(addr).await;
            c.sync().await;
            for p in &acked {
                let exists = jute::Request::Exists(jute::ExistsRequest {
                    path: p.clone(),
                    watch: false,
                });
                assert_eq!(c.call(&exists).await.err, 0, "{p} on {addr}");
            }
            c.config().await
        }));
    }
    assert!(texts.windows(2).all(|w| w[0] == w[1]), "{texts:?}");
    for s in &survivors {
        let missing =
            zooraft_tests::load::missing(&rt, &s.connect_string(), "/load", &report.acked);
        assert!(
            missing.is_empty(),
            "acknowledged but missing on {}: {missing:?}",
            s.addr()
        );
    }
    // The committed configuration is on disk beside zoo.cfg, as ZooKeeper keeps it.
    let last = texts[0].clone();
    let version = last.lines().last().and_then(|l| l.strip_prefix("version="));
    let version = version.expect("a version line");
    let original = e.member(admin);
    let dir = original
        .data_dir()
        .parent()
        .expect("the server's directory")
        .to_path_buf();
    let dynamic = dir.join(format!("zoo.cfg.dynamic.{version}"));
    let written = std::fs::read_to_string(&dynamic)
        .unwrap_or_else(|err| panic!("{}: {err}", dynamic.display()));
    for line in last.lines().filter(|l| l.starts_with("server.")) {
        assert!(written.contains(line), "{line} not in {written}");
    }
    if kind == ServerKind::Zooraft {
        let digests = eventually("equal digests", Duration::from_secs(30), || {
            let d: Vec<String> = survivors
                .iter()
                .filter_map(|s| s.four_letter_word("hash").ok())
                .collect();
            (d.len() == survivors.len() && d.windows(2).all(|w| w[0] == w[1])).then_some(d)
        });
        assert!(!digests.is_empty());
        // A restart with the stale zoo.cfg (servers 1-3 only, as the harness writes it
        // again) uses the committed membership.
        e.member_mut(admin).stop();
        e.member_mut(admin).restart();
        let addr = e.member(admin).addr();
        block_on(async {
            let mut c = Admin::open(addr).await;
            assert_eq!(&c.config().await, &last);
            c.write("/after-restart").await;
        });
    }
}

against_both!(
    leader_killed_mid_reconfig_apache,
    leader_killed_mid_reconfig_zooraft,
    leader_killed_mid_reconfig
);

/// Where the leader is killed in a reconfig.
#[derive(Clone, Copy, Debug)]
enum KillAt {
    /// This long after the reconfig is sent (ZooKeeper's phases cannot be seen from outside).
    Delay(u64),
    /// At a zooraft test hook (`server/src/raft/test_hooks.rs`), where the leader holds
    /// until it is killed.
    Hook(&'static str),
}

/// The hooks' names, as the server's `test_hooks` module has them.
const BEFORE_JOINT: &str = "hold-before-joint";
const IN_JOINT: &str = "hold-in-joint";

/// The leader is killed in the middle of a reconfig that grows 3 -> 5. On zooraft exactly
/// before the joint configuration is proposed (the joiners are learners, caught up) and
/// exactly once it is committed (the leader holds in it): the reconfig committed, so the
/// next leader carries it out. On ZooKeeper right after the reconfig is sent and a moment
/// later. Either way the ensemble keeps serving and every member ends with the old
/// configuration or the new one, the same on all; on zooraft, Raft's membership on every
/// member is then that configuration's, with no joint configuration left.
fn leader_killed_mid_reconfig(kind: ServerKind) {
    let points = match kind {
        ServerKind::Apache => [KillAt::Delay(0), KillAt::Delay(300)],
        ServerKind::Zooraft => [KillAt::Hook(BEFORE_JOINT), KillAt::Hook(IN_JOINT)],
    };
    for at in points {
        let mut e = TestEnsemble::start_kind(kind, 3, 0, zooraft_tests::ensemble::RECONFIG);
        let leader = e.leader();
        let admin = (leader + 1) % 3;
        let addr = e.member(admin).addr();
        let hook_files: Vec<std::path::PathBuf> = match at {
            KillAt::Hook(point) => (0..3).map(|i| e.member(i).data_dir().join(point)).collect(),
            KillAt::Delay(_) => Vec::new(),
        };
        for (i, f) in hook_files.iter().enumerate() {
            e.member(i).require_test_hooks();
            std::fs::write(f, b"").expect("a hook file");
        }
        let leader_log = e.member(leader).log_path();
        let mut joiners = Vec::new();
        let (before, after, answer) = block_on(async {
            let mut c = Admin::open(addr).await;
            let before = c.config().await;
            let (s4, spec4) = joiner(kind, 4, &before);
            let (s5, spec5) = joiner(kind, 5, &before);
            joiners.push(s4);
            joiners.push(s5);
            let mut body = Vec::new();
            put_opt(&mut body, Some(&format!("{spec4},{spec5}")));
            put_opt(&mut body, None);
            put_opt(&mut body, None);
            body.extend_from_slice(&(-1i64).to_be_bytes());
            c.c.send_op(900, 16, &body).await.expect("send reconfig");
            match at {
                KillAt::Delay(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                KillAt::Hook(point) => {
                    let line = format!("test hook: holding at {point}");
                    let deadline = std::time::Instant::now() + Duration::from_secs(60);
                    while !std::fs::read_to_string(&leader_log)
                        .unwrap_or_default()
                        .contains(&line)
                    {
                        assert!(
                            std::time::Instant::now() < deadline,
                            "the leader never held at {point}"
                        );
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            e.member_mut(leader).kill();
            for f in &hook_files {
                let _ = std::fs::remove_file(f);
            }
            let answer = c.c.wait_reply(900, CALL).await.map(|r| r.err);
            eprintln!("leader killed at {at:?}: the reconfig's answer {answer:?}");
            c.reconnect().await;
            c.write("/after-the-kill").await;
            let after = c.config().await;
            (before, after, answer)
        });
        let grown = after.lines().count() == 6;
        assert!(after == before || grown, "neither old nor new: {after}");
        if let KillAt::Hook(point) = at {
            // The reconfig committed before the hook was reached: it was answered, and
            // the next leader carried it out.
            assert_eq!(answer.ok(), Some(0), "the reconfig's answer ({point})");
            assert!(grown, "{point}: {after}");
        }
        // The same configuration everywhere, and the joiners serve if they were added.
        let members: Vec<&TestServer> = (0..3)
            .filter(|i| *i != leader)
            .map(|i| e.member(i))
            .chain(joiners.iter().filter(|_| grown))
            .collect();
        for s in &members {
            let addr = s.addr();
            let text = block_on(async {
                let mut c = Admin::open(addr).await;
                c.sync().await;
                c.config().await
            });
            assert_eq!(text, after, "on {addr}");
        }
        if kind == ServerKind::Zooraft {
            // Raft's membership follows on every member: the new voters, nobody outgoing.
            let voters: Vec<u64> = if grown {
                vec![1, 2, 3, 4, 5]
            } else {
                vec![1, 2, 3]
            };
            eventually("Raft's membership", Duration::from_secs(60), || {
                members
                    .iter()
                    .all(|s| last_membership(s) == Some((voters.clone(), vec![], vec![])))
                    .then_some(())
            });
        }
    }
}

against_both!(
    a_member_that_never_starts_apache,
    a_member_that_never_starts_zooraft,
    a_member_that_never_starts
);

/// Adding a member that never starts: three synced voters of four are still a quorum, so
/// the reconfig commits; the ensemble keeps serving, and the member can be removed again.
fn a_member_that_never_starts(kind: ServerKind) {
    let e = TestEnsemble::start_kind(kind, 3, 0, zooraft_tests::ensemble::RECONFIG);
    let leader = e.leader();
    let addr = e.member((leader + 1) % 3).addr();
    block_on(async {
        let mut c = Admin::open(addr).await;
        let before = c.config().await;
        let ghost = format!(
            "server.4=127.0.0.1:{}:{}:participant;127.0.0.1:{}",
            free_port(),
            free_port(),
            free_port()
        );
        let (text, _) = c.change(Some(&ghost), None, -1).await;
        assert!(text.contains(&ghost), "{text}");
        c.write("/with-a-ghost").await;
        let (text, _) = c.change(None, Some("4"), -1).await;
        assert!(!text.contains("server.4="), "{text}");
        assert_eq!(text.lines().count(), before.lines().count());
        c.write("/ghost-gone").await;
    });
}

against_both!(
    zkcli_reconfig_apache,
    zkcli_reconfig_zooraft,
    zkcli_reconfig
);

/// zkCli.sh's `config` and `reconfig -remove/-add`, as an operator types them.
fn zkcli_reconfig(kind: ServerKind) {
    let e = TestEnsemble::start_kind(kind, 3, 0, zooraft_tests::ensemble::RECONFIG);
    let leader = e.leader();
    let connected = e.member((leader + 1) % 3);
    let gone = (leader + 2) % 3 + 1;
    // zooraft's leader states the first configuration just after it is elected.
    block_on(async { Admin::open(connected.addr()).await.config().await });
    let mut cli = zooraft_tests::zkcli::ZkCli::start("zkcli-reconfig", connected);
    let config = cli.run("config");
    let line = config
        .iter()
        .find(|l| l.starts_with(&format!("server.{gone}=")))
        .cloned()
        .unwrap_or_else(|| panic!("no server.{gone} in {config:?}"));
    assert!(
        config.iter().any(|l| l == "version=100000000"),
        "{config:?}"
    );
    // `-v`: a stale version is refused (BADVERSION, which zkCli words "version No is not
    // valid"), the current one (hexadecimal, as `config` shows it) accepted.
    let stale = cli.run(&format!("reconfig -remove {gone} -v 12345"));
    assert!(
        stale.iter().any(|l| l.contains("version No is not valid")),
        "{stale:?}"
    );
    let version = config
        .iter()
        .find_map(|l| l.strip_prefix("version="))
        .expect("a version line")
        .to_string();
    let removed = cli.run(&format!("reconfig -remove {gone} -v {version}"));
    assert!(
        removed.iter().any(|l| l.starts_with("version=")),
        "{removed:?}"
    );
    assert!(!removed.contains(&line), "{removed:?}");
    // The next change, at once: the first was in effect when it was answered.
    let added = cli.run(&format!("reconfig -add {line}"));
    assert!(added.contains(&line), "{added:?}");
    cli.quit();
}

against_both!(
    standalone_reconfig_apache,
    standalone_reconfig_zooraft,
    standalone_reconfig
);

/// A standalone server has no quorum to reconfigure: with `reconfigEnabled` a reconfig is
/// UNIMPLEMENTED (even for a client that is not the super user), without it
/// RECONFIGDISABLED, as ZooKeeper's standalone answers.
fn standalone_reconfig(kind: ServerKind) {
    for (enabled, err) in [("true", -6), ("false", -123)] {
        let server = TestServer::builder(kind)
            .config("reconfigEnabled", enabled)
            .start();
        block_on(async {
            let (mut c, _) = RawClient::connect(server.addr(), &ConnectOptions::default(), CALL)
                .await
                .expect("a session");
            let r = reconfig(&mut c, 1, None, Some("2"), None, -1).await;
            assert_eq!(r.err, err, "reconfigEnabled={enabled}");
        });
    }
}

against_both!(
    back_to_back_reconfigs_apache,
    back_to_back_reconfigs_zooraft,
    back_to_back_reconfigs
);

/// Each reconfig sent the moment the previous one answered: a member that never starts
/// added and removed, three times, then a follower removed and added back, three times.
/// ZooKeeper answers a reconfig once the new configuration is in effect, so none of them
/// gets RECONFIGINPROGRESS; every one succeeds, and the ensemble ends as it began.
fn back_to_back_reconfigs(kind: ServerKind) {
    let e = TestEnsemble::start_kind(kind, 3, 0, zooraft_tests::ensemble::RECONFIG);
    let leader = e.leader();
    let admin = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    block_on(async {
        let (mut c, _) =
            RawClient::connect(e.member(admin).addr(), &ConnectOptions::default(), CALL)
                .await
                .expect("a session");
        let before = current_config(&mut c).await;
        let line = line_of(&before, other);
        let (_, ghost) = fresh_spec();
        let ghost = format!("server.4={ghost}");
        let other_id = (other + 1).to_string();
        let ghost_steps = [(Some(ghost.as_str()), None), (None, Some("4"))];
        let member_steps = [(None, Some(other_id.as_str())), (Some(line.as_str()), None)];
        let mut xid = 1000;
        for steps in [ghost_steps, member_steps] {
            for round in 0..3 {
                for (joining, leaving) in steps {
                    xid += 1;
                    let r = reconfig(&mut c, xid, joining, leaving, None, -1).await;
                    assert_eq!(
                        r.err, 0,
                        "round {round}: joining {joining:?}, leaving {leaving:?}"
                    );
                }
            }
        }
        let after = current_config(&mut c).await;
        let servers = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| l.starts_with("server."))
                .map(String::from)
                .collect()
        };
        assert_eq!(servers(&after), servers(&before));
    });
}

against_both!(
    config_served_from_the_start_apache,
    config_served_from_the_start_zooraft,
    config_served_from_the_start
);

/// `/zookeeper/config` holds the configuration from the start, as ZooKeeper serves its
/// own: a member alone (its peers not started yet) that serves read-only clients answers
/// with zoo.cfg's membership at version 0 (no leader has stated it at 100000000 yet);
/// once the other two run, a reconfig sent the moment the member serves read-write
/// succeeds.
fn config_served_from_the_start(kind: ServerKind) {
    let specs: Vec<(u16, String)> = (0..3).map(|_| fresh_spec()).collect();
    let start = |i: usize| {
        let mut b = member_builder(kind, i as u64 + 1, specs[i].0)
            .config("readonlymode.enabled", "true")
            .config("localSessionsEnabled", "true");
        if kind == ServerKind::Apache {
            b = b.jvm_property("readonlymode.enabled", "true");
        }
        for (j, (_, spec)) in specs.iter().enumerate() {
            b = b.config(&format!("server.{}", j + 1), spec);
        }
        b.start()
    };
    let first = start(0);
    let addr = first.addr();
    let connect = |read_only: bool| async move {
        let options = ConnectOptions {
            read_only: Some(read_only),
            ..ConnectOptions::default()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok((mut c, hs)) = RawClient::connect(addr, &options, CALL).await {
                // (ZooKeeper closes the read-only server's connections as it turns
                // read-write: a session that answers is one of the read-write server.)
                let exists = jute::Request::Exists(jute::ExistsRequest {
                    path: "/".into(),
                    watch: false,
                });
                let answers = read_only || c.call(&exists, CALL).await.is_ok();
                if answers && (read_only || hs.response.read_only != Some(true)) {
                    return c;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "member 1 never served"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    block_on(async {
        let mut c = connect(true).await;
        let text = current_config(&mut c).await;
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines.len(), 4, "{text}");
        // Each line as zoo.cfg gives it, the election port included.
        for (j, (_, spec)) in specs.iter().enumerate() {
            assert_eq!(lines[j], format!("server.{}={spec}", j + 1), "{text}");
        }
        // (Version 0: no leader has stated the first configuration yet.)
        assert_eq!(lines[3], "version=0");
    });
    let others: Vec<TestServer> = (1..3).map(start).collect();
    block_on(async {
        let mut c = connect(false).await;
        // A follower leaves (the leader's leaving would drop the connection on ZooKeeper).
        let leaving = if others[0].mode().as_deref() == Some("leader") {
            3
        } else {
            2
        };
        let r = reconfig(&mut c, 1, None, Some(&leaving.to_string()), None, -1).await;
        assert_eq!(r.err, 0, "a reconfig as soon as the member serves");
        let text = config_text(&r);
        assert!(!text.contains(&format!("server.{leaving}=")), "{text}");
    });
}

against_both!(
    a_joiner_syncs_before_it_is_added_apache,
    a_joiner_syncs_before_it_is_added_zooraft,
    a_joiner_syncs_before_it_is_added
);

/// A server started with the current members plus itself syncs with the leader before any
/// reconfig names it, as ZooKeeper's does: `srvr` says `Mode: follower` and it serves the
/// ensemble's tree (so an operator sees it is ready before adding it); the configuration
/// does not name it until the reconfig, and after it the server is a follower still.
fn a_joiner_syncs_before_it_is_added(kind: ServerKind) {
    let e = TestEnsemble::start_kind(kind, 3, 0, zooraft_tests::ensemble::RECONFIG);
    let admin = e.member((e.leader() + 1) % 3).addr();
    let (committed, written) = block_on(async {
        let mut c = Admin::open(admin).await;
        let written = c.write("/before-the-joiner").await;
        (c.config().await, written)
    });
    let (joiner4, spec4) = joiner(kind, 4, &committed);
    eventually(
        "the joiner syncs as a follower",
        Duration::from_secs(60),
        || (joiner4.mode().as_deref() == Some("follower")).then_some(()),
    );
    block_on(async {
        let mut j = Admin::open(joiner4.addr()).await;
        j.sync().await;
        assert!(j.exists("/before-the-joiner").await, "{written:?}");
        // The configuration does not name it yet.
        assert_eq!(j.config().await, committed);
        let mut c = Admin::open(admin).await;
        let (after, _) = c.change(Some(&spec4), None, -1).await;
        assert!(after.contains(&spec4), "{after}");
    });
    eventually(
        "the joiner, added, is a follower",
        Duration::from_secs(60),
        || (joiner4.mode().as_deref() == Some("follower")).then_some(()),
    );
    let texts: Vec<String> = [admin, joiner4.addr()]
        .into_iter()
        .map(|addr| {
            block_on(async {
                let mut c = Admin::open(addr).await;
                c.sync().await;
                c.config().await
            })
        })
        .collect();
    assert_eq!(texts[0], texts[1]);
    assert!(texts[1].contains(&spec4), "{}", texts[1]);
}

/// A member that joins after the leader compacted its log (a snapshot every 100 entries,
/// 10 kept behind it) catches up from a snapshot: it installs one, then serves the same
/// configuration, tree and digest as the others.
#[test]
fn a_joiner_catches_up_from_a_snapshot() {
    let compact = [("snapshotEntries", "100"), ("snapshotRetainEntries", "10")];
    let settings: Vec<(&str, &str)> = zooraft_tests::ensemble::RECONFIG
        .iter()
        .chain(compact.iter())
        .copied()
        .collect();
    let e = TestEnsemble::start_kind(ServerKind::Zooraft, 3, 0, &settings);
    let leader = e.leader();
    let addr = e.member((leader + 1) % 3).addr();
    let mut joiners = Vec::new();
    block_on(async {
        let mut c = Admin::open(addr).await;
        for k in 0..400 {
            c.write(&format!("/before-{k}")).await;
        }
        let committed = c.config().await;
        let (s4, spec4) = joiner_with(ServerKind::Zooraft, 4, &committed, &compact);
        joiners.push(s4);
        let (text, _) = c.change(Some(&spec4), None, -1).await;
        assert!(text.contains("server.4="), "{text}");
        c.write("/after-the-join").await;
    });
    let joined = &joiners[0];
    let members: Vec<&TestServer> = (0..3).map(|i| e.member(i)).chain([joined]).collect();
    eventually("the joiner serves", Duration::from_secs(60), || {
        joined.is_serving().then_some(())
    });
    let hashes = || -> Vec<String> {
        members
            .iter()
            .map(|s| s.four_letter_word("hash").unwrap_or_default())
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !hashes()
        .windows(2)
        .all(|w| w[0] == w[1] && !w[0].is_empty())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "digests differ: {:?}; the joiner's log:\n{}",
            hashes(),
            joined.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = std::fs::read_to_string(joined.log_path()).unwrap_or_default();
    assert!(
        log.contains("installing snapshot from the leader"),
        "the joiner caught up from a snapshot; log:\n{}",
        joined.log_tail()
    );
    let configs: Vec<String> = members
        .iter()
        .map(|s| {
            let addr = s.addr();
            block_on(async {
                let mut c = Admin::open(addr).await;
                c.sync().await;
                c.config().await
            })
        })
        .collect();
    assert!(configs.windows(2).all(|w| w[0] == w[1]), "{configs:?}");
}

/// A zooraft member's Raft membership as its log last said: voters, outgoing voters (a
/// joint configuration), learners, each sorted.
fn last_membership(s: &TestServer) -> Option<(Vec<u64>, Vec<u64>, Vec<u64>)> {
    let log = std::fs::read_to_string(s.log_path()).unwrap_or_default();
    let line = log
        .lines()
        .rfind(|l| l.contains("membership is now voters"))?
        .to_string();
    let list = |after: &str| -> Option<Vec<u64>> {
        let rest = line.split(after).nth(1)?;
        let inside = rest.strip_prefix('[')?.split(']').next()?;
        let mut ids: Vec<u64> = inside
            .split(',')
            .filter_map(|x| x.trim().parse().ok())
            .collect();
        ids.sort_unstable();
        Some(ids)
    };
    Some((list("voters ")?, list("(outgoing ")?, list("learners ")?))
}

/// With reconfig on, members reach each other at the committed configuration's addresses,
/// which routes around per-link proxies; `TestEnsemble::isolate` then cuts a zooraft member
/// off by its test hook (the chaos suite's reconfig scenario relies on it). An isolated
/// leader loses leadership to the others, who keep serving; healed, it rejoins and
/// catches up.
#[test]
fn a_member_is_isolated_by_its_hook() {
    let e = TestEnsemble::start_kind(ServerKind::Zooraft, 3, 0, zooraft_tests::ensemble::RECONFIG);
    let leader = e.leader();
    e.isolate(leader);
    let next = eventually("a leader among the others", Duration::from_secs(60), || {
        (0..3)
            .filter(|i| *i != leader)
            .find(|i| e.member(*i).mode().as_deref() == Some("leader"))
    });
    let log = std::fs::read_to_string(e.member(leader).log_path()).unwrap_or_default();
    assert!(
        log.contains("test hook: peer links cut"),
        "{}",
        e.member(leader).log_tail()
    );
    block_on(async {
        let mut c = Admin::open(e.member(next).addr()).await;
        c.write("/while-isolated").await;
    });
    e.heal(leader);
    eventually(
        "the isolated member serves again",
        Duration::from_secs(60),
        || e.member(leader).is_serving().then_some(()),
    );
    e.converged();
}
