//! etcd's lease-based lock, doing what its `concurrency.Mutex` does, over the JSON gateway.
//!
//! Each contender is a session: a lease (`/v3/lease/grant`) kept alive every third of its
//! TTL from a task of its own. To lock, in one transaction: if our key (`prefix` + lease id
//! in hex) has no create revision, put it with the lease, else read it; and in both cases
//! read the prefix's first key by create revision. We own the lock if that first key is
//! ours. Otherwise we wait, as `waitDeletes` does, for every key under the prefix with a
//! lower create revision to be deleted: read the last one below ours, watch it until a
//! DELETE, repeat. Then we check our key still exists (the lease may have expired). The
//! token is our key's create revision: it grows with every acquisition, so a resource can
//! fence with it. Unlock deletes the key; the lease is revoked on close.
//!
//! A pause stops the keepalive task: the lease then expires after its TTL and etcd deletes
//! the key, which is how the next waiter gets in.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use async_trait::async_trait;
use serde_json::{json, Value};

use super::etcd_http::{b64, etcd_ready, int, prefix_end, stream, Gateway};
use super::procs::{start_etcd, Proc};
use super::resource::Token;
use super::system::{Contender, LockSystem};

/// The timeout of every unary call.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one watch waits before the wait re-reads (in case a delete was missed).
const WATCH_SLICE: Duration = Duration::from_secs(2);
const PREFIX: &[u8] = b"/bench-lock/";

/// A one-member etcd.
pub struct EtcdSystem {
    proc: Proc,
    ttl: Duration,
}

impl EtcdSystem {
    pub fn start(root: &Path, ttl: Duration) -> anyhow::Result<EtcdSystem> {
        Ok(EtcdSystem {
            proc: start_etcd(root, etcd_ready)?,
            ttl,
        })
    }
}

#[async_trait]
impl LockSystem for EtcdSystem {
    fn name(&self) -> String {
        "etcd 3.4".into()
    }

    fn token_kind(&self) -> &'static str {
        "create revision of the lock key"
    }

    fn monotonic(&self) -> bool {
        true
    }

    fn lease(&self) -> Duration {
        self.ttl
    }

    async fn contender(&self, _id: usize, _pausable: bool) -> anyhow::Result<Box<dyn Contender>> {
        let addr = self.proc.addr;
        let mut gw = Gateway::new(addr, CALL_TIMEOUT);
        let ttl_s = self.ttl.as_secs().max(1);
        let grant = gw.call("/v3/lease/grant", &json!({ "TTL": ttl_s })).await?;
        let lease = int(&grant, "ID");
        if lease == 0 {
            bail!("etcd lease grant: no lease id in {grant}");
        }
        let paused = Arc::new(AtomicBool::new(false));
        let keepalive = tokio::spawn(keep_alive(addr, lease, self.ttl / 3, paused.clone()));
        let mut key = PREFIX.to_vec();
        key.extend_from_slice(format!("{lease:x}").as_bytes());
        Ok(Box::new(EtcdContender {
            addr,
            gw,
            lease,
            key,
            paused,
            keepalive,
        }))
    }
}

/// Renews the lease until paused (or the lease is gone).
async fn keep_alive(addr: SocketAddr, lease: i64, every: Duration, paused: Arc<AtomicBool>) {
    loop {
        tokio::time::sleep(every).await;
        if paused.load(Ordering::SeqCst) {
            return;
        }
        let r = stream(
            addr,
            "/v3/lease/keepalive",
            &json!({ "ID": lease.to_string() }),
            Instant::now() + CALL_TIMEOUT,
            |v| Ok(Some(int(v.get("result").unwrap_or(v), "TTL"))),
        )
        .await;
        match r {
            Ok(Some(ttl)) if ttl > 0 => {}
            Ok(_) => {
                tracing::debug!("etcd lease {lease:x} is gone");
                return;
            }
            Err(e) => tracing::debug!("etcd keepalive of {lease:x}: {e:#}"),
        }
    }
}

struct EtcdContender {
    addr: SocketAddr,
    gw: Gateway,
    lease: i64,
    key: Vec<u8>,
    paused: Arc<AtomicBool>,
    keepalive: tokio::task::JoinHandle<()>,
}

fn first_kv(resp: &Value) -> Option<&Value> {
    resp.get("kvs")
        .and_then(|k| k.as_array())
        .and_then(|a| a.first())
}

impl EtcdContender {
    /// Waits until no key under the prefix has a create revision at most `max_rev`.
    async fn wait_deletes(&mut self, max_rev: i64, deadline: Instant) -> anyhow::Result<bool> {
        while Instant::now() < deadline {
            let r = self
                .gw
                .call(
                    "/v3/kv/range",
                    &json!({
                        "key": b64(PREFIX),
                        "range_end": b64(&prefix_end(PREFIX)),
                        "sort_order": "DESCEND",
                        "sort_target": "CREATE",
                        "limit": 1,
                        "max_create_revision": max_rev.to_string(),
                    }),
                )
                .await?;
            let Some(kv) = first_kv(&r) else {
                return Ok(true);
            };
            let key = kv
                .get("key")
                .and_then(|k| k.as_str())
                .ok_or_else(|| anyhow!("etcd range: a kv without a key"))?
                .to_string();
            let rev = int(r.get("header").unwrap_or(&Value::Null), "revision");
            let until = deadline.min(Instant::now() + WATCH_SLICE);
            stream(
                self.addr,
                "/v3/watch",
                &json!({ "create_request": { "key": key, "start_revision": (rev + 1).to_string() } }),
                until,
                |v| {
                    let events = v
                        .get("result")
                        .and_then(|r| r.get("events"))
                        .and_then(|e| e.as_array());
                    let deleted = events.is_some_and(|es| {
                        es.iter().any(|e| e.get("type").and_then(|t| t.as_str()) == Some("DELETE"))
                    });
                    Ok(deleted.then_some(()))
                },
            )
            .await?;
        }
        Ok(false)
    }

    async fn delete_key(&mut self) -> anyhow::Result<()> {
        self.gw
            .call("/v3/kv/deleterange", &json!({ "key": b64(&self.key) }))
            .await
            .map(|_| ())
    }
}

#[async_trait]
impl Contender for EtcdContender {
    async fn acquire(&mut self, deadline: Instant) -> anyhow::Result<Option<Token>> {
        let key = b64(&self.key);
        let owner = json!({ "request_range": {
            "key": b64(PREFIX), "range_end": b64(&prefix_end(PREFIX)),
            "sort_order": "ASCEND", "sort_target": "CREATE", "limit": 1,
        }});
        let txn = json!({
            "compare": [{ "key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0" }],
            "success": [{ "request_put": { "key": key, "value": "", "lease": self.lease.to_string() } }, owner],
            "failure": [{ "request_range": { "key": key } }, owner],
        });
        let r = self.gw.call("/v3/kv/txn", &txn).await?;
        let responses = r
            .get("responses")
            .and_then(|x| x.as_array())
            .ok_or_else(|| anyhow!("etcd txn: no responses in {r}"))?;
        let succeeded = r
            .get("succeeded")
            .and_then(|s| s.as_bool())
            .unwrap_or(false);
        let my_rev = if succeeded {
            int(r.get("header").unwrap_or(&Value::Null), "revision")
        } else {
            let kv = responses
                .first()
                .and_then(|x| x.get("response_range"))
                .and_then(first_kv)
                .ok_or_else(|| anyhow!("etcd txn: our key vanished"))?;
            int(kv, "create_revision")
        };
        let owner_rev = responses
            .get(1)
            .and_then(|x| x.get("response_range"))
            .and_then(first_kv)
            .map(|kv| int(kv, "create_revision"));
        if owner_rev.is_some_and(|o| o != my_rev)
            && !self.wait_deletes(my_rev - 1, deadline).await?
        {
            // Gave up at the deadline: leave the queue, as Mutex.Lock does on cancel.
            let _ = self.delete_key().await;
            return Ok(None);
        }
        let mine = self.gw.call("/v3/kv/range", &json!({ "key": key })).await?;
        if first_kv(&mine).is_none() {
            bail!("etcd: our key is gone (the lease expired) before we got the lock");
        }
        Ok(Some(Token::Monotonic(my_rev.max(0) as u64)))
    }

    async fn release(&mut self) -> anyhow::Result<()> {
        self.delete_key().await
    }

    fn pause(&mut self) {
        self.paused.store(true, Ordering::SeqCst);
    }

    async fn close(&mut self) {
        self.keepalive.abort();
        let _ = self
            .gw
            .call("/v3/lease/revoke", &json!({ "ID": self.lease.to_string() }))
            .await;
    }
}
