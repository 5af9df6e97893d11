//! One-way network cuts between members: member A cannot dial member B while B can still
//! dial A. Each member dials its peers, and a connection carries frames both ways, so a
//! pair stays connected as long as either of them can dial the other (ZooKeeper's learners
//! stay up the same way: their one connection to the leader carries both directions).
//!
//! Every directed subset of a 3-member ensemble's six links is cut in turn (63 shapes):
//! whenever some pair is still connected in either direction (a quorum can form), a write
//! must be acknowledged within a bound; with every pair cut both ways none may be. The
//! time from the cut to the first acknowledged write is printed per shape. The same runs
//! against Apache ZooKeeper 3.8 by hand (`--ignored`), for the book's comparison (docs/src/reliability.md): its
//! followers must dial the leader, so it stays down where they cannot.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use zooraft_tests::conformance::req;
use zooraft_tests::raw_client::{ConnectOptions, RawClient};
use zooraft_tests::rt::block_on;
use zooraft_tests::{ServerKind, TestEnsemble};

/// Longest a write may take to be acknowledged after a cut that leaves a quorum: several
/// election timeouts (500 ms ticks here), on a loaded machine.
const RESUME_WITHIN: Duration = Duration::from_secs(30);
/// One attempt on one member.
const ATTEMPT: Duration = Duration::from_secs(2);
/// The six directed links of three members: (dialler, dialled).
const LINKS: [(usize, usize); 6] = [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)];

/// The links a shape (a bit per entry of [`LINKS`]) cuts.
fn cut_by(shape: u32) -> Vec<(usize, usize)> {
    LINKS
        .iter()
        .enumerate()
        .filter(|(k, _)| shape >> k & 1 == 1)
        .map(|(_, l)| *l)
        .collect()
}

/// Whether some pair of members can still reach each other, in either direction.
fn quorum_possible(cut: &[(usize, usize)]) -> bool {
    [(0, 1), (0, 2), (1, 2)]
        .iter()
        .any(|&(a, b)| !cut.contains(&(a, b)) || !cut.contains(&(b, a)))
}

/// One write attempt through the member at `addr`: true once acknowledged.
async fn write_through(addr: SocketAddr, path: String) -> bool {
    let Ok((mut c, _)) = RawClient::connect(addr, &ConnectOptions::default(), ATTEMPT).await else {
        return false;
    };
    matches!(c.call(&req::create(&path, b"c", 0), ATTEMPT).await, Ok(r) if r.err == 0)
}

/// Tries every member at once, again and again, until a write is acknowledged: how long
/// that took from `since`, and through which member.
async fn first_write(
    e: &TestEnsemble,
    path: &str,
    since: Instant,
    limit: Duration,
) -> Option<(Duration, usize)> {
    let mut round = 0;
    while since.elapsed() < limit {
        round += 1;
        let mut attempts = tokio::task::JoinSet::new();
        for i in 0..3 {
            let addr = e.member(i).addr();
            let path = format!("{path}-{round}-{}", i + 1);
            attempts.spawn(async move { (write_through(addr, path).await, i) });
        }
        while let Some(done) = attempts.join_next().await {
            if let Ok((true, i)) = done {
                return Some((since.elapsed(), i));
            }
        }
    }
    None
}

#[test]
fn writes_resume_under_every_one_way_cut_shape() {
    let outcome = every_shape(ServerKind::Zooraft);
    assert!(outcome.unsafe_.is_empty(), "{}", outcome.unsafe_.join("\n"));
    assert!(
        outcome.unavailable.is_empty(),
        "{}",
        outcome.unavailable.join("\n")
    );
}

/// The same against Apache ZooKeeper 3.8 (its quorum and election links both cut), for the
/// book's comparison; minutes long, so run by hand. ZooKeeper's followers must dial the
/// leader, so it stays down in the shapes where they cannot: those are printed, not failed;
/// only a write without a quorum fails it.
#[test]
#[ignore = "a comparison with Apache ZooKeeper, minutes long: cargo test --test ensemble one_way_cuts -- --ignored"]
fn writes_resume_under_every_one_way_cut_shape_apache() {
    let outcome = every_shape(ServerKind::Apache);
    println!(
        "zookeeper: {} shapes with a quorum stayed unavailable:\n{}",
        outcome.unavailable.len(),
        outcome.unavailable.join("\n")
    );
    assert!(outcome.unsafe_.is_empty(), "{}", outcome.unsafe_.join("\n"));
}

/// What a run of every shape found.
struct Outcome {
    /// Shapes with a quorum in which no write was acknowledged in time.
    unavailable: Vec<String>,
    /// Shapes without a quorum in which a write was acknowledged.
    unsafe_: Vec<String>,
}

fn every_shape(kind: ServerKind) -> Outcome {
    let mut e = TestEnsemble::start_partitionable_kind(kind, 3, 0, &[]);
    let mut took: BTreeMap<u32, (Duration, usize, usize)> = BTreeMap::new();
    let mut unavailable = Vec::new();
    let mut unsafe_ = Vec::new();
    for shape in 1u32..64 {
        let cut = cut_by(shape);
        let leader = e.leader();
        for &(from, to) in &cut {
            e.cut_link(from, to, true);
        }
        let since = Instant::now();
        let path = format!("/shape-{shape:02}");
        if quorum_possible(&cut) {
            match block_on(first_write(&e, &path, since, RESUME_WITHIN)) {
                Some((t, via)) => {
                    took.insert(shape, (t, via, leader));
                }
                None => unavailable.push(format!(
                    "shape {shape:06b} (cut {cut:?}, leader was member {}): no write within \
                     {RESUME_WITHIN:?}",
                    leader + 1
                )),
            }
        } else {
            // Every pair cut both ways: nothing may commit (a short look suffices, the
            // point of the suite is availability, not this).
            if block_on(first_write(&e, &path, since, ATTEMPT * 2)).is_some() {
                unsafe_.push(format!(
                    "shape {shape:06b}: a write committed with no quorum"
                ));
            }
        }
        for &(from, to) in &cut {
            e.cut_link(from, to, false);
        }
        e.wait_all_serving();
    }
    let mut times: Vec<Duration> = took.values().map(|(t, _, _)| *t).collect();
    times.sort();
    for (shape, (t, via, leader)) in &took {
        let cut: Vec<String> = cut_by(*shape)
            .iter()
            .map(|(a, b)| format!("{}->{}", a + 1, b + 1))
            .collect();
        println!(
            "{}: cut {:<36} leader was {}: write through {} after {:>6.0} ms",
            kind.name(),
            cut.join(" "),
            leader + 1,
            via + 1,
            t.as_secs_f64() * 1e3
        );
    }
    if let (Some(median), Some(max)) = (times.get(times.len() / 2), times.last()) {
        println!(
            "{}: {} shapes with a quorum: median {:.0} ms, max {:.0} ms to the first write",
            kind.name(),
            times.len(),
            median.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3
        );
    }
    Outcome {
        unavailable,
        unsafe_,
    }
}
