//! The harness itself: a server starts, answers four-letter words, survives pause/resume and
//! restart on the same port.

use harness::{ServerKind, TestServer};

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
