//! The differential conformance suite: every scenario runs against Apache ZooKeeper 3.8
//! and against zooraft (or, with `CONFORMANCE_TARGET=zookeeper`, a second Apache
//! ZooKeeper); normalized transcripts must match. One test per group; each prints
//! `conformance[<group>]: N passed, N failed` and the running total
//! `conformance: N passed, N failed`. See `zooraft_tests::conformance` for the knobs.

use zooraft_tests::conformance::{run_group, scenarios, Group};

fn run(group: Group) {
    let s = run_group(group, scenarios::all(group));
    assert_eq!(
        s.failed,
        0,
        "conformance[{}]: {} of {} scenarios failed (diffs above)",
        group.name(),
        s.failed,
        s.passed + s.failed
    );
}

#[test]
fn conformance_core() {
    run(Group::Core);
}

#[test]
fn conformance_extended() {
    run(Group::Extended);
}
