//! Redis, the single-instance lock from Redis' documentation: `SET key value NX PX ttl`
//! with a random value, released by a Lua compare-and-delete.
//!
//! Waiters retry `SET NX` after a short jittered backoff (2 to 6 ms); no pub/sub wake-up
//! (Redisson's way) and no watchdog renewal: the TTL is longer than every critical section
//! here, and a paused process would not renew anyway. The value is random, so the token the
//! resource gets is opaque: nothing orders two holders.
//!
//! With a replica (`replicaof`), `RedisFailover` ([`RedisSystem::failover`]) is the failover fault: the master killed
//! with SIGKILL while a holder holds, the replica promoted with `REPLICAOF NO ONE`, and
//! every client moved to it, as Sentinel would (without Sentinel's delay). Replication is
//! asynchronous: a lock key the master acknowledged but had not yet sent is lost. On
//! loopback the replica is usually less than a millisecond behind, so the pair can also
//! be run with its replication stream held back by a fixed lag (a delaying [`Proxy`],
//! cut when the master dies), which is what a loaded network or replica looks like.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use async_trait::async_trait;

use super::faults::Injector;
use super::procs::{start_redis, Proc};
use super::proxy::Proxy;
use super::resource::Token;
use super::resp::{compare_and_delete, set_nx_px, Client, Endpoint, Value};
use super::system::{Contender, LockSystem};

/// The timeout of every Redis call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// A blocking one-command exchange, for readiness checks before the runtime runs.
pub fn sync_command(addr: SocketAddr, command: &str) -> anyhow::Result<String> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    let args: Vec<&str> = command.split(' ').collect();
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(out.as_bytes())?;
    let mut buf = vec![0u8; 64 * 1024];
    let n = s.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Ready when it answers PING (a replica: once its link to the master is up).
pub fn redis_ready(replica: bool) -> impl Fn(SocketAddr) -> anyhow::Result<bool> {
    move |addr| {
        if replica {
            Ok(sync_command(addr, "INFO replication")?.contains("master_link_status:up"))
        } else {
            Ok(sync_command(addr, "PING")?.starts_with("+PONG"))
        }
    }
}

/// The random value of one acquisition.
pub fn random_value() -> (u64, Vec<u8>) {
    let v = fastrand::u64(..);
    (
        v,
        format!("{v:016x}-{:08x}", std::process::id()).into_bytes(),
    )
}

/// The waiters' backoff between two `SET NX` attempts.
pub fn backoff() -> Duration {
    Duration::from_micros(fastrand::u64(2_000..6_000))
}

/// A Redis master (and, for the failover fault, its replica).
pub struct RedisSystem {
    master: Arc<Mutex<Proc>>,
    replica: Option<Arc<Mutex<Proc>>>,
    /// The replication link's lag, and the delaying proxy that makes it.
    lag: Duration,
    link: Option<Arc<Proxy>>,
    endpoint: Endpoint,
    ttl: Duration,
    key: Vec<u8>,
}

impl RedisSystem {
    /// Starts a master; with `replica_lag`, a replica too, its replication stream held
    /// back by that lag (zero: a direct link). Call it inside a runtime context (the
    /// delaying proxy runs on it).
    pub fn start(
        root: &Path,
        replica_lag: Option<Duration>,
        ttl: Duration,
    ) -> anyhow::Result<RedisSystem> {
        let master = start_redis(root, None, redis_ready(false))?;
        let mut link = None;
        let replica = match replica_lag {
            Some(lag) => {
                let upstream = if lag.is_zero() {
                    master.addr
                } else {
                    let p = Arc::new(Proxy::start_delayed(master.addr, lag)?);
                    let addr = p.addr();
                    link = Some(p);
                    addr
                };
                Some(Arc::new(Mutex::new(start_redis(
                    root,
                    Some(upstream),
                    redis_ready(true),
                )?)))
            }
            None => None,
        };
        Ok(RedisSystem {
            endpoint: Endpoint::new(master.addr),
            master: Arc::new(Mutex::new(master)),
            replica,
            lag: replica_lag.unwrap_or_default(),
            link,
            ttl,
            key: b"bench:lock".to_vec(),
        })
    }

    /// The failover fault (None without a replica).
    pub fn failover(&self) -> Option<Arc<dyn Injector>> {
        let replica = self.replica.as_ref()?;
        Some(Arc::new(RedisFailover {
            master: self.master.clone(),
            replica: replica.lock().unwrap_or_else(|p| p.into_inner()).addr,
            endpoint: self.endpoint.clone(),
            key: self.key.clone(),
            link: self.link.clone(),
        }))
    }
}

#[async_trait]
impl LockSystem for RedisSystem {
    fn name(&self) -> String {
        match (&self.replica, self.lag.as_millis()) {
            (None, _) => "redis".into(),
            (Some(_), 0) => "redis (master + replica)".into(),
            (Some(_), ms) => format!("redis (master + replica {ms} ms behind)"),
        }
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
        let mut client = Client::new(self.endpoint.clone(), CALL_TIMEOUT);
        match client.call(&[b"PING"]).await? {
            Value::Simple(s) if s == "PONG" => {}
            other => bail!("redis PING: unexpected reply {other:?}"),
        }
        Ok(Box::new(RedisContender {
            client,
            key: self.key.clone(),
            ttl: self.ttl,
            value: None,
        }))
    }
}

struct RedisContender {
    client: Client,
    key: Vec<u8>,
    ttl: Duration,
    value: Option<Vec<u8>>,
}

#[async_trait]
impl Contender for RedisContender {
    async fn acquire(&mut self, deadline: Instant) -> anyhow::Result<Option<Token>> {
        let (id, value) = random_value();
        while Instant::now() < deadline {
            if set_nx_px(&mut self.client, &self.key, &value, self.ttl).await? {
                self.value = Some(value);
                return Ok(Some(Token::Opaque(id)));
            }
            tokio::time::sleep(backoff()).await;
        }
        Ok(None)
    }

    async fn release(&mut self) -> anyhow::Result<()> {
        if let Some(v) = self.value.take() {
            if !compare_and_delete(&mut self.client, &self.key, &v).await? {
                bail!("released after the key expired or was lost");
            }
        }
        Ok(())
    }

    fn pause(&mut self) {}

    async fn close(&mut self) {}
}

/// Kills the master, promotes the replica, moves the clients.
struct RedisFailover {
    master: Arc<Mutex<Proc>>,
    replica: SocketAddr,
    endpoint: Endpoint,
    key: Vec<u8>,
    link: Option<Arc<Proxy>>,
}

#[async_trait]
impl Injector for RedisFailover {
    fn name(&self) -> String {
        "redis master killed, replica promoted".into()
    }

    async fn inject(&self) -> anyhow::Result<String> {
        // The master's machine dies: its replication bytes still in flight die with it.
        if let Some(link) = &self.link {
            link.freeze();
        }
        let master = {
            let mut m = self.master.lock().unwrap_or_else(|p| p.into_inner());
            m.kill9();
            m.addr
        };
        let mut c = Client::new(Endpoint::new(self.replica), CALL_TIMEOUT);
        match c.call(&[b"REPLICAOF", b"NO", b"ONE"]).await? {
            Value::Simple(_) => {}
            other => bail!("REPLICAOF NO ONE: unexpected reply {other:?}"),
        }
        // The replica's view is as old as its lag: it may hold no lock key, or a previous
        // holder's (whose delete it never got) with less time to live than ours.
        let pttl = match c.call(&[b"PTTL", &self.key]).await? {
            Value::Int(n) => n,
            other => bail!("PTTL: unexpected reply {other:?}"),
        };
        self.endpoint.set(self.replica);
        let key = if pttl < 0 {
            "had NO lock key (the holder's was lost)".to_string()
        } else {
            format!("had a lock key with {pttl} ms to live")
        };
        Ok(format!(
            "killed the redis master {master} (SIGKILL), promoted the replica {} \
             (REPLICAOF NO ONE), which {key}",
            self.replica,
        ))
    }
}
