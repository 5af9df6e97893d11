//! The faults a run can suffer, and how they are injected.
//!
//! Two kinds, both driven from inside the critical section so that they hit a holder:
//!
//! - [`FaultPlan::Pause`]: contender 0, on its first acquisition after a quarter of the
//!   run, simulates a process pause *in-process*: it stops its liveness signal
//!   ([`Contender::pause`](super::system::Contender::pause): ZooKeeper-protocol sessions
//!   have their TCP connection frozen at a proxy, etcd stops its lease keepalives, Redis
//!   has nothing to stop) and sleeps until another contender has entered (or a bound
//!   passed), then wakes and writes to the resource with its old token, as a stopped
//!   process resumed by SIGCONT would.
//! - [`FaultPlan::Inject`]: the first holder after a third of the run calls an
//!   [`Injector`] while holding (the Redis master killed and its replica promoted, a
//!   zooraft ensemble's leader killed with SIGKILL), then holds on for up to 90% of its
//!   lease and writes again, so that a lock lost in the failover shows up as an overlap.
//!
//! Both sleepers wake the moment another contender enters: each system is then charged
//! with one overlap, whether it hands the lock off in 0.1 ms or in 10 ms.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

/// A fault a system can suffer while a holder holds its lock.
#[async_trait]
pub trait Injector: Send + Sync {
    /// Its name in tables (`redis master killed`, ...).
    fn name(&self) -> String;
    /// Injects the fault; returns what happened, for the notes.
    async fn inject(&self) -> anyhow::Result<String>;
}

/// Which fault a run suffers.
#[derive(Clone, Default)]
pub enum FaultPlan {
    #[default]
    None,
    Pause,
    Inject(Arc<dyn Injector>),
}

impl FaultPlan {
    pub fn name(&self) -> String {
        match self {
            FaultPlan::None => "none".into(),
            FaultPlan::Pause => "holder paused past its lease".into(),
            FaultPlan::Inject(i) => i.name(),
        }
    }
}

/// How long a holder that caused a failover keeps holding afterwards, at most: 90% of its
/// lease, a critical section that ends within its TTL, so that only a lock lost in the
/// failover (not one that expired) lets another in.
pub fn hold_after_inject(lease: Duration) -> Duration {
    lease * 9 / 10
}

/// The longest a paused holder waits for someone else to enter, in leases.
pub fn pause_bound(lease: Duration) -> Duration {
    lease * 4 + Duration::from_secs(10)
}
