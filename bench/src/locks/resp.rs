//! A small RESP2 client: the few Redis commands the Redis and Redlock contenders send.
//!
//! Our own rather than the `redis` crate: the locks need five commands (SET, EVAL, GET,
//! PING, REPLICAOF/INFO), one connection per contender, a timeout on every call and a
//! reconnect to whichever server is master now; a dependency tree for that is not worth
//! it. Replies are parsed defensively: sizes are capped, and anything malformed is an
//! error, never a panic.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The largest bulk string or array we accept (our keys and values are tiny; INFO is a few KB).
const MAX_LEN: i64 = 1 << 20;

/// One RESP reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Value>>),
}

/// Where a client connects: fixed, or a shared address a failover changes.
#[derive(Clone, Debug)]
pub struct Endpoint(Arc<Mutex<SocketAddr>>);

impl Endpoint {
    pub fn new(addr: SocketAddr) -> Endpoint {
        Endpoint(Arc::new(Mutex::new(addr)))
    }

    pub fn get(&self) -> SocketAddr {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set(&self, addr: SocketAddr) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = addr;
    }
}

/// A connection to one Redis server, opened on first use and again after any error.
pub struct Client {
    endpoint: Endpoint,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    pub fn new(endpoint: Endpoint, timeout: Duration) -> Client {
        Client {
            endpoint,
            timeout,
            conn: None,
        }
    }

    /// Sends one command and reads its reply, within the timeout. A Redis error reply is
    /// returned as `Value::Error`; a broken connection is an `Err` (and is dropped).
    pub async fn call(&mut self, args: &[&[u8]]) -> anyhow::Result<Value> {
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, self.call_inner(args)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e)
            }
            Err(_) => {
                self.conn = None;
                Err(anyhow!(
                    "redis {}: no reply within {timeout:?}",
                    self.endpoint.get()
                ))
            }
        }
    }

    async fn call_inner(&mut self, args: &[&[u8]]) -> anyhow::Result<Value> {
        if self.conn.is_none() {
            let addr = self.endpoint.get();
            let s = TcpStream::connect(addr)
                .await
                .with_context(|| format!("connecting to redis {addr}"))?;
            s.set_nodelay(true)?;
            self.conn = Some(BufReader::new(s));
        }
        let conn = self.conn.as_mut().ok_or_else(|| anyhow!("no connection"))?;
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        conn.get_mut().write_all(&out).await?;
        read_value(conn, 0).await
    }
}

async fn read_line(r: &mut BufReader<TcpStream>) -> anyhow::Result<String> {
    let mut line = Vec::new();
    let n = (&mut *r)
        .take(MAX_LEN as u64)
        .read_until(b'\n', &mut line)
        .await?;
    if n == 0 {
        bail!("redis closed the connection");
    }
    if !line.ends_with(b"\r\n") {
        bail!("redis sent a line without CRLF");
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| anyhow!("redis sent a line that is not UTF-8"))
}

fn read_value(
    r: &mut BufReader<TcpStream>,
    depth: usize,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<Value>> + Send + '_>> {
    Box::pin(async move {
        if depth > 4 {
            bail!("redis reply nested too deeply");
        }
        let line = read_line(r).await?;
        let (kind, rest) = line.split_at(line.len().min(1));
        let len = |rest: &str| -> anyhow::Result<i64> {
            let n: i64 = rest
                .parse()
                .map_err(|_| anyhow!("redis sent a bad length {rest:?}"))?;
            if n > MAX_LEN {
                bail!("redis reply too large ({n})");
            }
            Ok(n)
        };
        Ok(match kind {
            "+" => Value::Simple(rest.to_string()),
            "-" => Value::Error(rest.to_string()),
            ":" => Value::Int(
                rest.parse()
                    .map_err(|_| anyhow!("redis sent a bad integer {rest:?}"))?,
            ),
            "$" => {
                let n = len(rest)?;
                if n < 0 {
                    Value::Bulk(None)
                } else {
                    let mut buf = vec![0; n as usize + 2];
                    r.read_exact(&mut buf).await?;
                    if !buf.ends_with(b"\r\n") {
                        bail!("redis bulk string without CRLF");
                    }
                    buf.truncate(n as usize);
                    Value::Bulk(Some(buf))
                }
            }
            "*" => {
                let n = len(rest)?;
                if n < 0 {
                    Value::Array(None)
                } else {
                    let mut items = Vec::with_capacity(n.min(64) as usize);
                    for _ in 0..n {
                        items.push(read_value(r, depth + 1).await?);
                    }
                    Value::Array(Some(items))
                }
            }
            other => bail!("redis sent an unknown reply type {other:?}"),
        })
    })
}

/// The release script: delete the key only if it still holds our value.
pub const COMPARE_AND_DELETE: &[u8] =
    b"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// `SET key value NX PX ttl`: true if we now hold the key.
pub async fn set_nx_px(
    c: &mut Client,
    key: &[u8],
    value: &[u8],
    ttl: Duration,
) -> anyhow::Result<bool> {
    let ms = ttl.as_millis().max(1).to_string();
    match c
        .call(&[b"SET", key, value, b"NX", b"PX", ms.as_bytes()])
        .await?
    {
        Value::Simple(s) if s == "OK" => Ok(true),
        Value::Bulk(None) => Ok(false),
        Value::Error(e) => bail!("redis SET: {e}"),
        other => bail!("redis SET: unexpected reply {other:?}"),
    }
}

/// The compare-and-delete release: true if our key was deleted.
pub async fn compare_and_delete(c: &mut Client, key: &[u8], value: &[u8]) -> anyhow::Result<bool> {
    match c
        .call(&[b"EVAL", COMPARE_AND_DELETE, b"1", key, value])
        .await?
    {
        Value::Int(n) => Ok(n == 1),
        Value::Error(e) => bail!("redis EVAL: {e}"),
        other => bail!("redis EVAL: unexpected reply {other:?}"),
    }
}
