//! Redlock over three independent Redis masters, as Redis' documentation describes it.
//!
//! To acquire: take the current time, try `SET key value NX PX ttl` on every master in
//! turn with a short per-call timeout, and hold the lock if a majority (2 of 3) said yes
//! and the validity left (ttl minus the time spent minus a drift allowance of 1% of ttl
//! plus 2 ms) is positive. Otherwise unlock every master (compare-and-delete) and retry
//! after a random delay. Release is the compare-and-delete on every master. The token is
//! the random value: opaque, as for single-instance Redis.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use async_trait::async_trait;

use super::procs::{start_redis, Proc};
use super::redis::{backoff, random_value, redis_ready};
use super::resource::Token;
use super::resp::{compare_and_delete, set_nx_px, Client, Endpoint, Value};
use super::system::{Contender, LockSystem};

/// The per-master timeout of one acquisition attempt (small against the TTL, as the
/// algorithm asks, so a dead master does not eat the validity time).
const PER_MASTER_TIMEOUT: Duration = Duration::from_millis(50);

/// Three independent masters.
pub struct RedlockSystem {
    masters: Vec<Proc>,
    ttl: Duration,
}

impl RedlockSystem {
    pub fn start(root: &Path, ttl: Duration) -> anyhow::Result<RedlockSystem> {
        let mut masters = Vec::new();
        for _ in 0..3 {
            masters.push(start_redis(root, None, redis_ready(false))?);
        }
        Ok(RedlockSystem { masters, ttl })
    }
}

#[async_trait]
impl LockSystem for RedlockSystem {
    fn name(&self) -> String {
        "redlock (3 masters)".into()
    }

    fn token_kind(&self) -> &'static str {
        "random value (not ordered)"
    }

    fn monotonic(&self) -> bool {
        false
    }

    fn lease(&self) -> Duration {
        self.ttl
    }

    async fn contender(&self, _id: usize, _pausable: bool) -> anyhow::Result<Box<dyn Contender>> {
        let mut clients = Vec::new();
        for m in &self.masters {
            // The check at connect time gets a lenient timeout; the lock calls do not.
            let mut c = Client::new(Endpoint::new(m.addr), Duration::from_secs(2));
            match c.call(&[b"PING"]).await? {
                Value::Simple(s) if s == "PONG" => {}
                other => bail!("redis PING: unexpected reply {other:?}"),
            }
            clients.push(Client::new(Endpoint::new(m.addr), PER_MASTER_TIMEOUT));
        }
        Ok(Box::new(RedlockContender {
            clients,
            key: b"bench:redlock".to_vec(),
            ttl: self.ttl,
            value: None,
        }))
    }
}

struct RedlockContender {
    clients: Vec<Client>,
    key: Vec<u8>,
    ttl: Duration,
    value: Option<Vec<u8>>,
}

impl RedlockContender {
    async fn unlock_all(&mut self, value: &[u8]) {
        for c in &mut self.clients {
            let _ = compare_and_delete(c, &self.key, value).await;
        }
    }
}

#[async_trait]
impl Contender for RedlockContender {
    async fn acquire(&mut self, deadline: Instant) -> anyhow::Result<Option<Token>> {
        let drift = self.ttl / 100 + Duration::from_millis(2);
        let mut last_error = None;
        while Instant::now() < deadline {
            let (id, value) = random_value();
            let start = Instant::now();
            let mut yes = 0;
            for c in &mut self.clients {
                match set_nx_px(c, &self.key, &value, self.ttl).await {
                    Ok(true) => yes += 1,
                    Ok(false) => {}
                    Err(e) => last_error = Some(e),
                }
            }
            let validity = self.ttl.checked_sub(start.elapsed() + drift);
            if yes * 2 > self.clients.len() && validity.is_some_and(|v| !v.is_zero()) {
                self.value = Some(value);
                return Ok(Some(Token::Opaque(id)));
            }
            if yes > 0 {
                self.unlock_all(&value).await;
            }
            tokio::time::sleep(backoff()).await;
        }
        if let Some(e) = last_error {
            tracing::debug!("redlock: last error before the deadline: {e:#}");
        }
        Ok(None)
    }

    async fn release(&mut self) -> anyhow::Result<()> {
        if let Some(v) = self.value.take() {
            let mut deleted = 0;
            for c in &mut self.clients {
                if compare_and_delete(c, &self.key, &v).await.unwrap_or(false) {
                    deleted += 1;
                }
            }
            if deleted * 2 <= self.clients.len() {
                bail!("released on {deleted} master(s) only: the keys had expired");
            }
        }
        Ok(())
    }

    fn pause(&mut self) {}

    async fn close(&mut self) {}
}
