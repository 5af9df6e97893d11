//! The two Rust ZooKeeper clients against a real server, Apache ZooKeeper and zooraft alike:
//!
//! * [`zookeeper_async`] (the client the `recipes` crate builds on): CRUD with `Stat` checks,
//!   ephemeral and sequential nodes, data/child/exists watches, ephemeral cleanup on close,
//!   and session expiry seen by the client after a network partition.
//! * [`zookeeper_client`] (kezhuw's client): the same basics through create2, plus multi
//!   (success and rollback), multiRead, sync, persistent and persistent-recursive watches,
//!   getEphemerals/getAllChildrenNumber, resuming a session by id and password from another
//!   client object, and expiry observed after a partition or when another connection closes
//!   the session.
//!
//! Both are real clients with their own connection and session state machines, so these
//! catch what a hand-written protocol test does not: a reply shape one of them decodes
//! differently, a watch re-armed or lost on reconnect, a session state they report wrongly.
//! Partitions go through the harness's loopback [`zooraft_tests::proxy::Proxy`].
//!
//! Every scenario is bounded by [`SCENARIO_TIMEOUT`] and each wait inside it by [`WAIT`].

mod zookeeper_async;
mod zookeeper_client;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use zooraft_tests::rt::runtime;
use zooraft_tests::TestServer;

/// The bound on one whole scenario.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);
/// The bound on one wait for an event or a state.
const WAIT: Duration = Duration::from_secs(20);

/// Runs `body` against a fresh server (started by `server`), bounded by [`SCENARIO_TIMEOUT`].
fn run<F, Fut>(server: TestServer, body: F)
where
    F: FnOnce(Arc<TestServer>) -> Fut,
    Fut: Future<Output = ()>,
{
    let server = Arc::new(server);
    let rt = runtime();
    let scenario = server.clone();
    let outcome =
        rt.block_on(async move { tokio::time::timeout(SCENARIO_TIMEOUT, body(scenario)).await });
    // Client tasks may still hold sockets; stop them before the server goes.
    rt.shutdown_timeout(Duration::from_secs(5));
    if outcome.is_err() {
        panic!(
            "scenario did not finish within {SCENARIO_TIMEOUT:?}; server log:\n{}",
            server.log_tail()
        );
    }
}
