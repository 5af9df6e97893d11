//! Migration end to end, against the real thing: Apache ZooKeeper 3.8 started here, loaded
//! by kazoo (`python/zk_migrate.py`) and zkCli.sh with every node and ACL kind, then
//! stopped (cleanly, or killed with -9 under write load); `zooraft import`; zooraft started
//! on the result and compared node by node (data, ACL, every Stat field) with what
//! ZooKeeper served. Also a quorum peer (epoch 1 zxids) whose log holds a reconfig, a fuzzy
//! snapshot with a torn log tail compared with ZooKeeper's own restore of the same files,
//! the way back (`zooraft export`, ZooKeeper started on it), a round trip, damaged inputs,
//! an ensemble, and online backup and restore.
//!
//! ZooKeeper and zooraft both run with a superDigest, so the comparison reads every node
//! whatever its ACL.

use std::path::Path;
use std::time::{Duration, Instant};

use zookeeper_client as zc;
use zooraft_tests::faults::copy_dir;
use zooraft_tests::kazoo_migrate::{load_every_kind, Background};
use zooraft_tests::rt::{block_on, eventually};
use zooraft_tests::tree_dump::{
    assert_same as assert_same_at_least, dump, super_client, Dump, SUPER_DIGEST,
};
use zooraft_tests::zkcli::ZkCli;
use zooraft_tests::{free_port, zooraft_cmd, ServerKind, TestServer};

const LIMIT: Duration = Duration::from_secs(120);

/// A ZooKeeper started for these tests: TTL nodes on, a superDigest, 4 s minimum sessions.
fn zookeeper(port: Option<u16>, extra: &[(&str, &str)]) -> zooraft_tests::TestServerBuilder {
    let mut b = TestServer::builder(ServerKind::Apache)
        .config("extendedTypesEnabled", "true")
        .jvm_property(
            "zookeeper.DigestAuthenticationProvider.superDigest",
            SUPER_DIGEST,
        );
    if let Some(p) = port {
        b = b.port(p);
    }
    for (k, v) in extra {
        b = b.config(k, v);
    }
    b
}

/// A zooraft member set up (not started) on `port`, for an import or restore first.
fn zooraft(port: u16, extra: &[(&str, &str)]) -> TestServer {
    let mut b = TestServer::builder(ServerKind::Zooraft)
        .port(port)
        .config("extendedTypesEnabled", "true")
        .config("DigestAuthenticationProvider.superDigest", SUPER_DIGEST)
        .config("4lw.commands.whitelist", "*");
    for (k, v) in extra {
        b = b.config(k, v);
    }
    b.prepare()
}

fn import(from: &Path, into: &TestServer) -> String {
    let cfg = into.config_path();
    let (ok, text) = zooraft_cmd(&[
        "import",
        "--from",
        from.to_str().expect("utf-8 path"),
        "--config",
        cfg.to_str().expect("utf-8 path"),
    ]);
    assert!(ok, "import failed:\n{text}");
    println!("{text}");
    text
}

/// Reads a session id a kazoo mode wrote (waits for the file, bounded).
fn session_from(file: &Path) -> i64 {
    let text = eventually("a session file", LIMIT, || {
        std::fs::read_to_string(file)
            .ok()
            .filter(|t| t.ends_with('\n'))
    });
    i64::from_str_radix(text.trim(), 16).expect("hex session id")
}

/// Asserts two dumps are equal (and big enough to mean something).
fn assert_same(what: &str, expected: &Dump, found: &Dump) {
    assert_same_at_least(what, expected, found, 600);
}

/// What ZooKeeper's Stat says the next sequential suffix under `parent` is (the stored
/// cversion: visible cversion = stored * 2 - children).
fn next_sequence(dump_stat: &str) -> i64 {
    (stat_field(dump_stat, "cversion") + stat_field(dump_stat, "num_children")) / 2
}

fn create_sequential(hosts: &str, prefix: &str) -> String {
    block_on(async {
        let c = super_client(hosts).await;
        let (_, seq) = c
            .create(
                prefix,
                b"",
                &zc::CreateMode::PersistentSequential.with_acls(zc::Acls::anyone_all()),
            )
            .await
            .unwrap_or_else(|e| panic!("create {prefix}: {e}"));
        format!("{prefix}{seq}")
    })
}

fn exists(hosts: &str, path: &str) -> bool {
    block_on(async {
        let c = super_client(hosts).await;
        c.check_stat(path).await.expect("exists").is_some()
    })
}

#[test]
fn import_keeps_tree_stats_sessions_and_sequences() {
    let mut zk = zookeeper(None, &[]).start();
    let port = zk.port();
    let hosts = zk.connect_string();
    load_every_kind(&zk);
    let tmp = tempfile::tempdir().expect("tempdir");
    let held = tmp.path().join("held");
    let go = tmp.path().join("go");
    let mut holder = Background::spawn(
        &["hold", held.to_str().unwrap(), go.to_str().unwrap(), &hosts],
        tmp.path().join("hold.out"),
    );
    let held_session = session_from(&held);
    let abandoned_file = tmp.path().join("abandoned");
    let abandoned = Background::spawn(
        &["abandon", abandoned_file.to_str().unwrap(), &hosts],
        tmp.path().join("abandon.out"),
    );
    let abandoned_session = session_from(&abandoned_file);
    drop(abandoned); // killed: its session lives on in ZooKeeper until it expires
    let expected = dump(&hosts);
    assert!(expected.contains_key("/abandoned/e") && expected.contains_key("/held/e1"));
    assert!(zk.stop(), "ZooKeeper stops cleanly");

    let mut zr = zooraft(port, &[]);
    let report = import(&zk.data_dir(), &zr);
    assert!(report.contains("digest: the tree matches"), "{report}");
    zr.restart();
    let found = dump(&hosts);
    assert_same("zooraft after import", &expected, &found);

    // The held session moves over with its ephemerals.
    std::fs::write(&go, "go").expect("go file");
    let out = holder.wait(LIMIT);
    assert_eq!(
        zooraft_tests::checks::parse_summary(&out),
        Some((5, 0)),
        "holder of session {held_session:#x}:\n{out}"
    );
    // The next sequential create gets the number ZooKeeper would have given.
    let want = next_sequence(&expected["/seq"]);
    let made = create_sequential(&hosts, "/seq/s-");
    assert_eq!(made, format!("/seq/s-{want:010}"));
    // New zxids continue above the imported ones, in a later epoch.
    let last_imported = expected
        .values()
        .map(|v| stat_field(v, "mzxid").max(stat_field(v, "pzxid")))
        .max()
        .expect("zxids");
    let new_czxid = stat_field(&dump(&hosts)[&made], "czxid");
    assert!(new_czxid > last_imported && (new_czxid >> 32) > (last_imported >> 32));
    // The abandoned session's ephemeral expires on zooraft, after its timeout.
    let started = Instant::now();
    eventually("the abandoned ephemeral to expire", LIMIT, || {
        (!exists(&hosts, "/abandoned/e")).then_some(())
    });
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "session {abandoned_session:#x} lived {:?}",
        started.elapsed()
    );
}

/// Leaves a torn record after the last one of the newest log, as a crash in the middle of
/// a write leaves it (kill -9 alone leaves the page cache whole): the header and half the
/// bytes of a copy of the last record, the rest still the file's zero padding. No logged
/// transaction is lost. (Tearing the last record itself failed the import in one run of
/// four: the newest snapshot, taken at the very end, already held that transaction, and
/// the logs then ended before the zxid its digest was taken at; no crash leaves that, as
/// ZooKeeper logs a transaction before it applies it.)
fn tear_last_record(v2: &Path) {
    let newest = std::fs::read_dir(v2)
        .expect("version-2")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let zxid = u64::from_str_radix(name.strip_prefix("log.")?, 16).ok()?;
            Some((zxid, e.path()))
        })
        .max()
        .expect("a log file")
        .1;
    let mut b = std::fs::read(&newest).expect("read log");
    let &(start, len) = log_records(&b).last().expect("a record");
    // A record: checksum (8), length (4), the transaction, an end mark (1).
    let record = 12 + len + 1;
    let end = start + record;
    let torn = b[start..start + 12 + len / 2].to_vec();
    assert!(
        b.len() >= end + record && b[end..end + record].iter().all(|x| *x == 0),
        "no zero padding after the last record of {}",
        newest.display()
    );
    b[end..end + torn.len()].copy_from_slice(&torn);
    std::fs::write(&newest, b).expect("write log");
}

/// Makes the newest complete snapshot as fuzzy as a snapshot gets: it is renamed 40 zxids back, so
/// the restore replays 40 transactions whose effects it already holds (creates of nodes it
/// has, deletes of nodes it lacks, sequential creates), as when writes go on while
/// ZooKeeper serializes the tree. ZooKeeper's own restore of the same files is the
/// reference.
fn make_fuzzy(v2: &Path) {
    // The newest complete one: a kill in the middle of writing a snapshot leaves it
    // incomplete, and both restores skip it for the one before.
    let complete = |path: &Path, name: &str| {
        let raw = std::fs::read(path).expect("read a snapshot");
        let kind = zkdata::stream::Compression::of_file_name(name);
        zkdata::stream::decompress(kind, raw)
            .is_ok_and(|plain| zkdata::snapshot::looks_complete(&plain))
    };
    let (zxid, path) = std::fs::read_dir(v2)
        .expect("version-2")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let hex = name
                .strip_prefix("snapshot.")?
                .split('.')
                .next()?
                .to_string();
            complete(&e.path(), &name).then_some(())?;
            Some((u64::from_str_radix(&hex, 16).ok()?, e.path()))
        })
        .max()
        .expect("a complete snapshot");
    assert!(zxid > 1000, "snapshot.{zxid:x} is too early to move back");
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let suffix = name.split_once('.').map(|x| x.1).unwrap_or("");
    let suffix = suffix
        .split_once('.')
        .map(|x| format!(".{}", x.1))
        .unwrap_or_default();
    std::fs::rename(&path, v2.join(format!("snapshot.{:x}{suffix}", zxid - 40))).expect("rename");
}

#[test]
fn import_after_kill_9_under_write_load_matches_zookeepers_own_restore() {
    for method in ["gz", "snappy"] {
        // Small snapCount: snapshots are taken (fuzzily) while the writes go on.
        let mut zk = zookeeper(None, &[("snapCount", "300")])
            .jvm_property("zookeeper.snapshot.compression.method", method)
            .start();
        load_every_kind(&zk);
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut writers: Vec<Background> = (0..2)
            .map(|i| {
                Background::spawn(
                    &["write", "30", &zk.connect_string()],
                    tmp.path().join(format!("w{i}")),
                )
            })
            .collect();
        std::thread::sleep(Duration::from_secs(6));
        zk.kill();
        writers.clear();
        tear_last_record(&zk.data_dir().join("version-2"));
        make_fuzzy(&zk.data_dir().join("version-2"));
        let copy = tmp.path().join("copy");
        copy_dir(&zk.data_dir(), &copy);
        let snaps = std::fs::read_dir(copy.join("version-2"))
            .expect("version-2")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(method))
            .count();
        assert!(snaps >= 1, "no {method} snapshot was taken");
        // ZooKeeper's own restore of the same files is the reference.
        zk.restart();
        let expected = dump(&zk.connect_string());
        let port = zk.port();
        zk.kill();
        let mut zr = zooraft(port, &[]);
        let report = import(&copy, &zr);
        assert!(report.contains("digest: the tree matches"), "{report}");
        assert!(report.contains("torn record"), "{report}");
        assert!(
            report.contains("replay errors over the fuzzy snapshot"),
            "{report}"
        );
        zr.restart();
        assert_same(
            &format!("import of a killed ZooKeeper ({method})"),
            &expected,
            &dump(&zr.connect_string()),
        );
    }
}

#[test]
fn export_starts_zookeeper_and_round_trips() {
    let mut zk = zookeeper(None, &[]).start();
    let port = zk.port();
    load_every_kind(&zk);
    let original = dump(&zk.connect_string());
    assert!(zk.stop());
    // ZooKeeper -> zooraft.
    let mut zr = zooraft(port, &[]);
    import(&zk.data_dir(), &zr);
    zr.restart();
    assert_same("zooraft", &original, &dump(&zr.connect_string()));
    assert!(zr.stop());
    // zooraft -> ZooKeeper, with each compression.
    for (i, compression) in ["none", "gz", "snappy"].into_iter().enumerate() {
        let mut back = zookeeper(Some(port), &[]).prepare();
        let cfg = zr.config_path();
        let (ok, text) = zooraft_cmd(&[
            "export",
            "--to",
            back.data_dir().to_str().unwrap(),
            "--compression",
            compression,
            "--config",
            cfg.to_str().unwrap(),
        ]);
        assert!(ok, "export failed:\n{text}");
        let epoch = std::fs::read_to_string(back.data_dir().join("version-2/currentEpoch"))
            .expect("currentEpoch");
        // zooraft's own transactions (our clients' sessions) are in the epoch after the import.
        assert!(epoch.parse::<i64>().expect("decimal epoch") >= 2, "{epoch}");
        back.restart();
        assert_same(
            &format!("ZooKeeper on the export ({compression})"),
            &original,
            &dump(&back.connect_string()),
        );
        // ZooKeeper read the digest the export wrote, and the tree matched it.
        let log = std::fs::read_to_string(back.log_path()).expect("ZooKeeper's log");
        assert!(
            log.contains("The digest in the snapshot has digest version of 2")
                && !log.contains("Digests are not matching"),
            "{log}"
        );
        if i == 0 {
            // ZooKeeper numbers the next sequential child as zooraft would.
            let want = next_sequence(&original["/seq"]);
            assert_eq!(
                create_sequential(&back.connect_string(), "/seq/s-"),
                format!("/seq/s-{want:010}")
            );
        }
        assert!(back.stop());
        if i == 1 {
            // ... -> zooraft again: equal to the original all the way round.
            let mut again = zooraft(port, &[]);
            import(&back.data_dir(), &again);
            again.restart();
            assert_same("round trip", &original, &dump(&again.connect_string()));
        }
    }
}

/// Offsets of every log record: (start, length of the transaction bytes).
fn log_records(file: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 16;
    while pos + 12 <= file.len() {
        let len = i32::from_be_bytes(file[pos + 8..pos + 12].try_into().unwrap());
        if len <= 0 || pos + 12 + len as usize + 1 > file.len() {
            break;
        }
        out.push((pos, len as usize));
        pos += 12 + len as usize + 1;
    }
    out
}

#[test]
fn damaged_inputs_are_clear_errors_and_leave_the_target_untouched() {
    let mut zk = zookeeper(None, &[]).start();
    load_every_kind(&zk);
    assert!(zk.stop());
    let v2 = zk.data_dir().join("version-2");
    let log_name = std::fs::read_dir(&v2)
        .expect("version-2")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("log."))
        .expect("a log file");
    const SNAP_NAME: &str = "snapshot.0";
    let snap_name = SNAP_NAME;
    type Damage = Box<dyn Fn(&Path)>;
    let log = log_name.clone();
    let cases: Vec<(&str, Damage, Vec<String>)> = vec![
        (
            "truncated snapshot",
            Box::new(|d: &Path| {
                let p = d.join(SNAP_NAME);
                let b = std::fs::read(&p).unwrap();
                std::fs::write(&p, &b[..b.len() * 2 / 3]).unwrap();
            }),
            vec!["snapshot.0".into(), "incomplete".into()],
        ),
        (
            "bad CRC in the middle of the log",
            Box::new(move |d: &Path| {
                let p = d.join(&log);
                let mut b = std::fs::read(&p).unwrap();
                let recs = log_records(&b);
                let (start, len) = recs[recs.len() / 2];
                b[start + 12 + len / 2] ^= 0x5a;
                std::fs::write(&p, b).unwrap();
            }),
            vec![log_name.clone(), "checksum".into(), "offset".into()],
        ),
        (
            "a gap in the log",
            Box::new({
                let log = log_name.clone();
                move |d: &Path| {
                    let p = d.join(&log);
                    let b = std::fs::read(&p).unwrap();
                    let recs = log_records(&b);
                    let (start, len) = recs[recs.len() / 2];
                    let mut cut = b[..start].to_vec();
                    cut.extend_from_slice(&b[start + 12 + len + 1..]);
                    std::fs::write(&p, cut).unwrap();
                }
            }),
            vec!["gap".into(), log_name.clone()],
        ),
        (
            "a future log format version",
            Box::new({
                let log = log_name.clone();
                move |d: &Path| {
                    let p = d.join(&log);
                    let mut b = std::fs::read(&p).unwrap();
                    b[7] = 3;
                    std::fs::write(&p, b).unwrap();
                }
            }),
            vec!["version 3".into(), log_name.clone(), "offset 4".into()],
        ),
        (
            "a future snapshot format version",
            Box::new(|d: &Path| {
                let p = d.join(SNAP_NAME);
                let mut b = std::fs::read(&p).unwrap();
                b[7] = 3;
                std::fs::write(&p, b).unwrap();
            }),
            vec!["version 3".into(), "snapshot.0".into()],
        ),
    ];
    let target = zooraft(free_port(), &[]);
    let cfg = target.config_path();
    for (name, damage, words) in cases {
        let copy = tempfile::tempdir().expect("tempdir");
        copy_dir(&zk.data_dir(), copy.path());
        // Only the first snapshot, so the damaged one cannot be skipped for another.
        for e in std::fs::read_dir(copy.path().join("version-2"))
            .unwrap()
            .flatten()
        {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("snapshot.") && n != snap_name {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        damage(&copy.path().join("version-2"));
        let (ok, text) = zooraft_cmd(&[
            "import",
            "--from",
            copy.path().to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ]);
        assert!(!ok, "{name}: import succeeded:\n{text}");
        for w in &words {
            assert!(text.contains(w.as_str()), "{name}: no {w:?} in:\n{text}");
        }
        assert!(!text.contains("panicked"), "{name}: {text}");
        assert!(
            !target.data_dir().join("raft").exists(),
            "{name}: the target was written"
        );
    }
}

#[test]
fn an_ensemble_member_imports_and_the_others_catch_up_by_snapshot() {
    let mut zk = zookeeper(None, &[]).start();
    load_every_kind(&zk);
    let expected = dump(&zk.connect_string());
    assert!(zk.stop());
    let mut members = ensemble(|_| Vec::new());
    import(&zk.data_dir(), &members[0]);
    // The imported member first, then the empty ones one by one (see the book, docs/src/migration.md).
    members[0].respawn();
    std::thread::sleep(Duration::from_secs(1));
    for m in members.iter_mut().skip(1) {
        m.respawn();
        std::thread::sleep(Duration::from_millis(500));
    }
    for m in members.iter_mut() {
        m.wait_ready();
    }
    for (i, m) in members.iter().enumerate() {
        assert_same(
            &format!("member {}", i + 1),
            &expected,
            &dump(&m.connect_string()),
        );
    }
    // Writes go on in a later epoch on every member.
    let made = create_sequential(&members[1].connect_string(), "/seq/s-");
    let want = next_sequence(&expected["/seq"]);
    assert_eq!(made, format!("/seq/s-{want:010}"));
}

/// A write load on zooraft: creates under /load (never deleted, never changed) and a
/// counter in /load's data, until `stop`.
async fn write_load(hosts: String, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> u64 {
    let c = zooraft_tests::zc::connect(&hosts, Duration::from_secs(20), LIMIT).await;
    let _ = c
        .create("/load", b"", &zooraft_tests::zc::persistent())
        .await;
    let mut n = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let path = format!("/load/n{n:07}");
        if c.create(&path, b"x", &zooraft_tests::zc::persistent())
            .await
            .is_ok()
        {
            let _ = c.set_data("/load", n.to_string().as_bytes(), None).await;
            n += 1;
        }
    }
    n
}

/// `zooraft restore FILE --config CFG`.
fn restore(file: &Path, cfg: &Path) -> (bool, String) {
    zooraft_cmd(&[
        "restore",
        file.to_str().expect("utf-8 path"),
        "--config",
        cfg.to_str().expect("utf-8 path"),
    ])
}

fn stat_field(v: &str, name: &str) -> i64 {
    v.split(&format!(" {name}: "))
        .nth(1)
        .and_then(|s| s.split([',', ' ']).next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {v}"))
}

#[test]
fn backup_under_write_load_restores_the_state_at_its_zxid() {
    let admin = free_port();
    let mut live = TestServer::builder(ServerKind::Zooraft)
        .config("extendedTypesEnabled", "true")
        .config("DigestAuthenticationProvider.superDigest", SUPER_DIGEST)
        .config("admin.serverPort", &admin.to_string())
        .config("admin.serverAddress", "127.0.0.1")
        .start();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rt = zooraft_tests::rt::runtime();
    let load = rt.spawn(write_load(live.connect_string(), stop.clone()));
    std::thread::sleep(Duration::from_secs(2));
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("backup.zrbk");
    let server = format!("127.0.0.1:{admin}");
    // Without the password: refused.
    let (ok, text) = zooraft_cmd(&[
        "backup",
        "--server",
        &server,
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(!ok && text.contains("401"), "{text}");
    let (ok, text) = zooraft_cmd(&[
        "backup",
        "--server",
        &server,
        "--auth",
        "super:secret",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = rt.block_on(load).expect("load task");
    assert!(written > 10, "only {written} writes");
    let zxid_text = text
        .split("at zxid ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .expect("zxid");
    let backup_zxid = i64::from_str_radix(zxid_text.trim_start_matches("0x"), 16).expect("hex");
    let final_state = dump(&live.connect_string());
    assert!(live.stop());

    let mut restored = zooraft(free_port(), &[]);
    let cfg = restored.config_path();
    let (ok, text) = restore(&file, &cfg);
    assert!(ok, "{text}");
    // A second restore into the same member is refused.
    let (ok, text2) = restore(&file, &cfg);
    assert!(!ok && text2.contains("already holds"), "{text2}");
    restored.restart();
    let got = dump(&restored.connect_string());
    // The restored tree is the live one as it was at the backup's zxid: the nodes created
    // by then, unchanged since, and none after.
    let at_backup: Dump = final_state
        .iter()
        .filter(|(p, v)| p.starts_with("/load/") && stat_field(v, "czxid") <= backup_zxid)
        .map(|(p, v)| (p.clone(), v.clone()))
        .collect();
    let got_load: Dump = got
        .iter()
        .filter(|(p, _)| p.starts_with("/load/"))
        .map(|(p, v)| (p.clone(), v.clone()))
        .collect();
    assert!(!at_backup.is_empty() && at_backup.len() < written as usize);
    assert_eq!(
        got_load, at_backup,
        "restore at zxid {backup_zxid:#x} ({text})"
    );
    let counter = stat_field(&got["/load"], "mzxid");
    assert!(counter <= backup_zxid);
    for v in got.values() {
        assert!(stat_field(v, "mzxid") <= backup_zxid && stat_field(v, "pzxid") <= backup_zxid);
    }
}

/// Three zooraft members set up (not started); `extra(i)` adds member i's own lines.
fn ensemble(extra: impl Fn(usize) -> Vec<(String, String)>) -> Vec<TestServer> {
    let client_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let peer_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    (0..3)
        .map(|i| {
            let mut b = TestServer::builder(ServerKind::Zooraft)
                .port(client_ports[i])
                .myid(i as u64 + 1)
                .config("extendedTypesEnabled", "true")
                .config("DigestAuthenticationProvider.superDigest", SUPER_DIGEST)
                .config("4lw.commands.whitelist", "*")
                .config("raftTickMs", "100")
                .no_wait();
            for j in 0..3 {
                b = b.config(
                    &format!("server.{}", j + 1),
                    &format!("127.0.0.1:{}:0;{}", peer_ports[j], client_ports[j]),
                );
            }
            for (k, v) in extra(i) {
                b = b.config(&k, &v);
            }
            b.prepare()
        })
        .collect()
}

/// The `zxid`/`digest` words of a backup report.
fn backup_summary(text: &str) -> (String, String) {
    let word = |after: &str| {
        text.split(after)
            .nth(1)
            .and_then(|s| s.split([':', ',', ' ']).next())
            .unwrap_or_else(|| panic!("no {after:?} in {text}"))
            .to_string()
    };
    (word("at zxid "), word("digest "))
}

#[test]
fn a_backup_of_a_follower_equals_one_of_the_leader() {
    let admin: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut members = ensemble(|i| {
        vec![
            ("admin.serverPort".into(), admin[i].to_string()),
            ("admin.serverAddress".into(), "127.0.0.1".into()),
        ]
    });
    for m in members.iter_mut() {
        m.respawn();
    }
    for m in members.iter_mut() {
        m.wait_ready();
    }
    let hosts: Vec<String> = members.iter().map(|m| m.connect_string()).collect();
    block_on(async {
        let c = zooraft_tests::zc::connect(&hosts.join(","), Duration::from_secs(20), LIMIT).await;
        for i in 0..200 {
            c.create(&format!("/b{i}"), b"v", &zooraft_tests::zc::persistent())
                .await
                .expect("create");
        }
    });
    // Every member has applied everything (same zxid and digest from `hash`).
    eventually("the members to converge", LIMIT, || {
        let d: Vec<String> = members
            .iter()
            .map(|m| m.four_letter_word("hash").unwrap_or_default())
            .collect();
        (!d[0].is_empty() && d.iter().all(|x| *x == d[0])).then_some(())
    });
    let tmp = tempfile::tempdir().expect("tempdir");
    let summaries: Vec<(String, String)> = (0..3)
        .map(|i| {
            let file = tmp.path().join(format!("m{i}.zrbk"));
            let (ok, text) = zooraft_cmd(&[
                "backup",
                "--server",
                &format!("127.0.0.1:{}", admin[i]),
                "--auth",
                "super:secret",
                "--out",
                file.to_str().unwrap(),
            ]);
            assert!(ok, "{text}");
            backup_summary(&text)
        })
        .collect();
    let modes: Vec<Option<String>> = members.iter().map(|m| m.mode()).collect();
    assert!(
        modes.iter().any(|m| m.as_deref() == Some("leader")),
        "{modes:?}"
    );
    assert!(
        summaries.iter().all(|s| *s == summaries[0]),
        "backups differ: {summaries:?} (modes {modes:?})"
    );
    // A whole ensemble restored from the follower's backup serves the same tree.
    let expected = dump(&hosts[0]);
    let follower = modes
        .iter()
        .position(|m| m.as_deref() == Some("follower"))
        .expect("a follower");
    for m in members.iter_mut() {
        assert!(m.stop());
    }
    let mut fresh = ensemble(|_| Vec::new());
    let file = tmp.path().join(format!("m{follower}.zrbk"));
    for m in fresh.iter_mut() {
        let cfg = m.config_path();
        let (ok, text) = restore(&file, &cfg);
        assert!(ok, "{text}");
        m.respawn();
    }
    for m in fresh.iter_mut() {
        m.wait_ready();
    }
    for m in &fresh {
        let got = dump(&m.connect_string());
        assert_eq!(got, expected);
    }
}

#[test]
fn import_of_a_quorum_peer_with_a_logged_reconfig() {
    let port = free_port();
    let (peer, election) = (free_port(), free_port());
    let mut zk = zookeeper(
        Some(port),
        &[
            ("standaloneEnabled", "false"),
            ("reconfigEnabled", "true"),
            ("initLimit", "10"),
            ("syncLimit", "5"),
            (
                "server.1",
                &format!("127.0.0.1:{peer}:{election}:participant;127.0.0.1:{port}"),
            ),
        ],
    )
    .myid(1)
    .quorum_peer()
    .start();
    load_every_kind(&zk);
    // A reconfig (logged as its own transaction type) adding an observer.
    let mut cli = ZkCli::start("reconfig", &zk);
    cli.run("addauth digest super:secret");
    let out = cli.run(&format!(
        "reconfig -add server.2=127.0.0.1:{}:{}:observer;127.0.0.1:{}",
        free_port(),
        free_port(),
        free_port()
    ));
    cli.quit();
    let expected = dump(&zk.connect_string());
    let config = &expected["/zookeeper/config"];
    assert!(
        config.contains("observer") || format!("{out:?}").contains("observer"),
        "{out:?}"
    );
    assert!(zk.stop());
    let epoch: i64 = std::fs::read_to_string(zk.data_dir().join("version-2/currentEpoch"))
        .expect("a quorum peer's currentEpoch")
        .trim()
        .parse()
        .expect("decimal");
    assert!(epoch >= 1);
    let mut zr = zooraft(port, &[]);
    let report = import(&zk.data_dir(), &zr);
    assert!(report.contains("digest: the tree matches"), "{report}");
    zr.restart();
    assert_same(
        "import of a quorum peer",
        &expected,
        &dump(&zr.connect_string()),
    );
}
