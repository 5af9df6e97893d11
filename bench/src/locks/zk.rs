//! zooraft and Apache ZooKeeper: the recipes crate's `Mutex` (Curator's recipe:
//! ephemeral-sequential node, watch the predecessor), token = the lock node's czxid.
//!
//! The same code runs against both servers, standalone or as an ensemble started by
//! [`crate::target::Target`]. A pausable contender's session goes through a freezable
//! [`Proxy`]. The leader-kill fault ([`ZkSystem::leader_kill`]) kills the member that says it leads
//! with SIGKILL while a holder holds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use async_trait::async_trait;
use zooraft_recipes::{LockGuard, LockOptions, Mutex, ZkClient, ZookeeperClient};

use super::faults::Injector;
use super::proxy::Proxy;
use super::resource::Token;
use super::system::{Contender, LockSystem};
use crate::server::ServerKind;
use crate::target::Target;

/// A ZooKeeper-protocol ensemble (or standalone server) under test.
pub struct ZkSystem {
    name: String,
    target: Arc<std::sync::Mutex<Target>>,
    session: Duration,
    path: String,
}

impl ZkSystem {
    pub fn new(target: Target, session: Duration, path: &str) -> ZkSystem {
        let size = target.members.len();
        let name = match (target.kind(), size) {
            (ServerKind::Zooraft, 1) => "zooraft".to_string(),
            (ServerKind::Zooraft, n) => format!("zooraft ({n} members)"),
            (ServerKind::Apache, 1) => "zookeeper 3.8".to_string(),
            (ServerKind::Apache, n) => format!("zookeeper 3.8 ({n} members)"),
        };
        ZkSystem {
            name,
            target: Arc::new(std::sync::Mutex::new(target)),
            session,
            path: path.to_string(),
        }
    }

    /// The fault that kills this ensemble's leader.
    pub fn leader_kill(&self) -> Arc<dyn Injector> {
        Arc::new(LeaderKill {
            target: self.target.clone(),
        })
    }

    fn addrs(&self) -> Vec<std::net::SocketAddr> {
        self.target
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .addrs()
    }
}

#[async_trait]
impl LockSystem for ZkSystem {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn token_kind(&self) -> &'static str {
        "czxid of the lock node"
    }

    fn monotonic(&self) -> bool {
        true
    }

    fn lease(&self) -> Duration {
        self.session
    }

    async fn contender(&self, id: usize, pausable: bool) -> anyhow::Result<Box<dyn Contender>> {
        let addrs = self.addrs();
        if addrs.is_empty() {
            return Err(anyhow!("{}: no member is running", self.name));
        }
        let (connect, proxy) = if pausable {
            let p = Proxy::start(addrs[id % addrs.len()]).await?;
            (p.addr().to_string(), Some(p))
        } else {
            // Spread the sessions over the members; the client fails over to the others.
            let n = addrs.len();
            let order: Vec<String> = (0..n).map(|i| addrs[(id + i) % n].to_string()).collect();
            (order.join(","), None)
        };
        let client = tokio::time::timeout(
            Duration::from_secs(30),
            ZookeeperClient::connect(&connect, self.session),
        )
        .await
        .map_err(|_| anyhow!("{}: no session within 30 s", self.name))?
        .with_context(|| format!("{}: connecting to {connect}", self.name))?;
        let options = LockOptions::default().label("locks-bench");
        let mutex = Mutex::with_options(client.clone(), &self.path, options)?;
        Ok(Box::new(ZkContender {
            client,
            mutex,
            guard: None,
            proxy,
        }))
    }
}

struct ZkContender {
    client: ZookeeperClient,
    mutex: Mutex,
    guard: Option<LockGuard>,
    proxy: Option<Proxy>,
}

#[async_trait]
impl Contender for ZkContender {
    async fn acquire(&mut self, deadline: Instant) -> anyhow::Result<Option<Token>> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        match self.mutex.acquire_timeout(left).await? {
            Some(g) => {
                let token = Token::Monotonic(g.fencing_token().get());
                self.guard = Some(g);
                Ok(Some(token))
            }
            None => Ok(None),
        }
    }

    async fn release(&mut self) -> anyhow::Result<()> {
        match self.guard.take() {
            Some(g) => tokio::time::timeout(Duration::from_secs(10), g.release())
                .await
                .map_err(|_| anyhow!("release: no reply within 10 s"))?
                .map_err(Into::into),
            None => Ok(()),
        }
    }

    fn pause(&mut self) {
        if let Some(p) = &self.proxy {
            p.freeze();
        }
    }

    async fn close(&mut self) {
        if self.proxy.is_some() {
            // Its session is frozen or gone: a close would wait for nothing.
            self.guard = None;
            return;
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.client.close()).await;
    }
}

/// Kills the ensemble's leader with SIGKILL.
struct LeaderKill {
    target: Arc<std::sync::Mutex<Target>>,
}

#[async_trait]
impl Injector for LeaderKill {
    fn name(&self) -> String {
        "leader killed (SIGKILL)".into()
    }

    async fn inject(&self) -> anyhow::Result<String> {
        let target = self.target.clone();
        tokio::task::spawn_blocking(move || {
            let mut t = target.lock().unwrap_or_else(|p| p.into_inner());
            let leader = t
                .leader(Duration::from_secs(10))
                .ok_or_else(|| anyhow!("no member says it leads"))?;
            let addr = t.members[leader].addr();
            t.members[leader].kill();
            Ok(format!(
                "killed the leader (member {}, {addr}) with SIGKILL",
                leader + 1
            ))
        })
        .await?
    }
}
