//! Locks during a live migration from Apache ZooKeeper: Curator and the recipes' own mutex
//! contend for one lock path from ZooKeeper members and from zooraft members observing the
//! same ensemble (`migrateFromZooKeeper`), then kazoo and the recipes, every contender on
//! zooraft members, through `zooraft migrate cutover`. The contenders' log shows no two critical
//! sections overlapping, acquisitions in node order with increasing fencing tokens, and the
//! fenced counter holding every increment.

use crate::common;

use std::time::Duration;

use zooraft_recipes::CreateMode;
use zooraft_tests::live_migration::LiveMigration;

use common::{
    check_log, children, client, curator_contender, kazoo_contender, read_log, run_all,
    rust_contender,
};

const LOCK: &str = "/locks/migration";
const COUNTER: &str = "/counters/migration";

#[test]
fn one_lock_across_zookeeper_and_zooraft_members_and_through_the_cutover() {
    let mut m = LiveMigration::start(3, 2);
    m.start_observer(0);
    m.start_observer(1);
    let zookeeper = m.zookeeper[0].connect_string();
    let (four, five) = (
        m.observer(0).connect_string(),
        m.observer(1).connect_string(),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let admin = client(&four).await;
        for p in ["/locks", LOCK, "/counters"] {
            admin.create(p, b"", CreateMode::Persistent).await.expect(p);
        }
        admin
            .create(COUNTER, b"0", CreateMode::Persistent)
            .await
            .expect("counter");
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("sections.log");
        // Curator on ZooKeeper and the recipes (Curator's layout) on both zooraft members,
        // one lock. (kazoo is kept for the second part: it takes Curator's nodes for
        // contenders, but Curator does not take kazoo's, so those two must not share a lock.)
        run_all(
            vec![
                curator_contender(&zookeeper, LOCK, 2, 4, &log),
                rust_contender(&four, LOCK, 2, 4, &log, None),
                rust_contender(&five, LOCK, 2, 4, &log, Some(COUNTER)),
            ],
            Duration::from_secs(150),
        )
        .await;
        let mut entries = read_log(&log);
        assert_eq!(entries.len(), 24, "every critical section is logged");
        check_log(&mut entries);
        admin.close().await;

        // Every contender on zooraft members, and the cut-over in the middle of it.
        let log = dir.path().join("cutover.log");
        let contenders = tokio::spawn(run_all(
            vec![
                kazoo_contender(&four, LOCK, 2, 30, &log),
                rust_contender(&five, LOCK, 2, 30, &log, Some(COUNTER)),
            ],
            Duration::from_secs(150),
        ));
        // The contenders are under way before the cut-over starts.
        common::eventually(Duration::from_secs(60), "ten critical sections", || {
            let log = log.clone();
            async move { std::fs::read_to_string(&log).is_ok_and(|t| t.matches('\n').count() >= 10) }
        })
        .await;
        let cutover = tokio::task::spawn_blocking({
            let four = four.clone();
            move || zooraft_tests::zooraft_cmd(&["migrate", "cutover", "--server", &four])
        })
        .await
        .expect("cutover task");
        assert!(cutover.0, "{}", cutover.1);
        contenders.await.expect("contenders");
        let mut entries = read_log(&log);
        assert_eq!(entries.len(), 120, "every critical section is logged");
        check_log(&mut entries);
        let admin = client(&four).await;
        let (data, _) = admin.get_data(COUNTER).await.expect("counter");
        assert_eq!(
            String::from_utf8_lossy(&data),
            "68",
            "every fenced increment of the recipes' contenders is there (8 + 60)"
        );
        assert!(children(&admin, LOCK).await.is_empty(), "lock nodes left");
        admin.close().await;
    });
}
