//! The harness itself: a server starts, answers four-letter words, survives pause/resume and
//! restart on the same port.

use zooraft_tests::{ServerKind, TestServer};

#[test]
fn apache_zookeeper_starts_and_restarts() {
    let mut zk = TestServer::start(ServerKind::Apache);
    let srvr = zk.four_letter_word("srvr").unwrap();
    assert!(
        srvr.contains("Mode: standalone"),
        "srvr said: {srvr:?}\n{}",
        zk.log_tail()
    );
    zk.pause();
    zk.resume();
    zk.restart();
    assert_eq!(zk.four_letter_word("ruok").unwrap(), "imok");
}

/// Whether a process id still names a process (a reaped child no longer does).
fn process_exists(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[test]
fn apache_zookeeper_ensemble_elects_fails_over_and_cleans_up() {
    let mut e = zooraft_tests::TestEnsemble::start_kind(ServerKind::Apache, 3, 1, &[]);
    assert_eq!(
        e.member(3).mode().as_deref(),
        Some("observer"),
        "member 4 is not an observer; log:\n{}",
        e.member(3).log_tail()
    );
    let leader = e.leader();
    for i in (0..3).filter(|i| *i != leader) {
        assert_eq!(
            e.member(i).mode().as_deref(),
            Some("follower"),
            "member {} is not a follower; log:\n{}",
            i + 1,
            e.member(i).log_tail()
        );
    }
    e.member_mut(leader).kill();
    assert!(!e.member(leader).is_running());
    assert!(
        !e.connect_string()
            .contains(&e.member(leader).connect_string()),
        "a killed member stays out of the connect string"
    );
    let next = e.leader();
    assert_ne!(next, leader, "the killed member cannot lead");
    e.member_mut(leader).restart();
    assert_eq!(e.member(leader).mode().as_deref(), Some("follower"));
    assert_eq!(e.leader(), next, "a restarted member rejoins as a follower");
    let pids: Vec<u32> = (0..4).filter_map(|i| e.member(i).pid()).collect();
    assert_eq!(pids.len(), 4);
    drop(e);
    for pid in pids {
        assert!(
            !process_exists(pid),
            "member process {pid} outlived the ensemble"
        );
    }
}
