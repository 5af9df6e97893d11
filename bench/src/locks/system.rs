//! The one interface every lock system is measured through.
//!
//! A [`LockSystem`] is a running service (its servers already started) that hands out
//! [`Contender`]s: one per contending task, each with its own connection or session, as
//! separate processes would have. The bench drives every system through this trait only,
//! so all of them run the same contenders and the same critical section.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::resource::Token;

/// A lock service under test.
#[async_trait]
pub trait LockSystem: Send + Sync {
    /// Its name in tables (`zooraft`, `redis`, ...).
    fn name(&self) -> String;
    /// What the token handed to the resource is, for the table.
    fn token_kind(&self) -> &'static str;
    /// Whether the token grows with every acquisition (so a resource can fence with it).
    fn monotonic(&self) -> bool;
    /// About how long a holder that stops heartbeating or renewing keeps the lock (TTL,
    /// session timeout, lease TTL).
    fn lease(&self) -> Duration;
    /// A new contender with its own connection. With `pausable`, its liveness signal
    /// (heartbeats, renewals) can be stopped by [`Contender::pause`].
    async fn contender(&self, id: usize, pausable: bool) -> anyhow::Result<Box<dyn Contender>>;
}

/// One contending task's handle on the lock.
#[async_trait]
pub trait Contender: Send {
    /// Waits for the lock until `deadline`: its token, or None when the deadline passed.
    async fn acquire(&mut self, deadline: Instant) -> anyhow::Result<Option<Token>>;
    /// Releases the lock this contender holds.
    async fn release(&mut self) -> anyhow::Result<()>;
    /// Starts a simulated process pause: from now on this contender sends no heartbeat
    /// and no renewal (its task then sleeps, as a stopped process would).
    fn pause(&mut self);
    /// Closes its connection or session.
    async fn close(&mut self);
}
