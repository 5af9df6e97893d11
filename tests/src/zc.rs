//! zookeeper-client (kezhuw's Rust client) as the end-to-end tests use it: a bounded
//! connect with a chosen session timeout, and the create options most scenarios need.

use std::time::Duration;

use zookeeper_client as zc;

/// Connects to `hosts` with `session_timeout`, failing the test if that takes over `wait`.
pub async fn connect(hosts: &str, session_timeout: Duration, wait: Duration) -> zc::Client {
    crate::rt::within(
        "zookeeper-client connect",
        wait,
        zc::Client::connector()
            .with_session_timeout(session_timeout)
            .connect(hosts),
    )
    .await
    .unwrap_or_else(|e| panic!("zookeeper-client connects to {hosts}: {e}"))
}

/// A persistent node open to anyone.
pub fn persistent() -> zc::CreateOptions<'static> {
    zc::CreateMode::Persistent.with_acls(zc::Acls::anyone_all())
}

/// An ephemeral node open to anyone.
pub fn ephemeral() -> zc::CreateOptions<'static> {
    zc::CreateMode::Ephemeral.with_acls(zc::Acls::anyone_all())
}
