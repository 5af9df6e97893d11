//! etcd's v3 JSON gateway (`/v3/...`, JSON bodies, base64 keys), over hyper's HTTP/1.1
//! client.
//!
//! The gateway rather than gRPC: etcd 3.4 from Debian serves it on the client port, and
//! the etcd gRPC crates need protoc or generated code we would have to carry; hyper is
//! already the server's HTTP library. Unary calls share one kept-alive connection per
//! contender; the streaming calls (watch, lease keepalive) get a connection of their own,
//! read line by line (one JSON message per line). Every call has a timeout, every reply
//! size a cap; gateway errors (`{"error": ..., "code": ...}`) are errors.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// The cap on one reply (our ranges return at most one key).
const MAX_REPLY: usize = 4 << 20;

/// Base64 of a key, as the gateway wants bytes fields.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// An int64 field, which the gateway sends as a JSON string (absent means 0).
pub fn int(v: &Value, field: &str) -> i64 {
    match v.get(field) {
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

/// The key range of everything under `prefix` (`range_end` = prefix + 1).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

async fn connect(addr: SocketAddr) -> anyhow::Result<SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to etcd {addr}"))?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

fn request(
    addr: SocketAddr,
    path: &str,
    body: &Value,
) -> anyhow::Result<hyper::Request<Full<Bytes>>> {
    Ok(hyper::Request::post(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?)
}

fn check(path: &str, v: Value) -> anyhow::Result<Value> {
    if let Some(e) = v.get("error") {
        bail!("etcd {path}: {e} (code {})", int(&v, "code"));
    }
    Ok(v)
}

/// One contender's connection for unary calls.
pub struct Gateway {
    addr: SocketAddr,
    timeout: Duration,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Gateway {
    pub fn new(addr: SocketAddr, timeout: Duration) -> Gateway {
        Gateway {
            addr,
            timeout,
            sender: None,
        }
    }

    /// POSTs `body` to `path` and returns the reply's JSON.
    pub async fn call(&mut self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, self.call_inner(path, body)).await {
            Ok(Ok(v)) => check(path, v),
            Ok(Err(e)) => {
                self.sender = None;
                Err(e)
            }
            Err(_) => {
                self.sender = None;
                Err(anyhow!("etcd {path}: no reply within {timeout:?}"))
            }
        }
    }

    async fn call_inner(&mut self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let usable = match self.sender.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !usable {
            self.sender = Some(connect(self.addr).await?);
        }
        let sender = self
            .sender
            .as_mut()
            .ok_or_else(|| anyhow!("no connection"))?;
        let reply = sender.send_request(request(self.addr, path, body)?).await?;
        let status = reply.status();
        let bytes = Limited::new(reply.into_body(), MAX_REPLY)
            .collect()
            .await
            .map_err(|e| anyhow!("etcd {path}: reading the reply: {e}"))?
            .to_bytes();
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| anyhow!("etcd {path}: HTTP {status}, not JSON: {e}"))?;
        Ok(v)
    }
}

/// A streaming call (`/v3/watch`, `/v3/lease/keepalive`) on its own connection: the
/// messages it sends, one by one, until `until` says stop (returns Some) or `deadline`.
pub async fn stream<T>(
    addr: SocketAddr,
    path: &str,
    body: &Value,
    deadline: Instant,
    mut until: impl FnMut(&Value) -> anyhow::Result<Option<T>>,
) -> anyhow::Result<Option<T>> {
    let work = async {
        let mut sender = connect(addr).await?;
        let reply = sender.send_request(request(addr, path, body)?).await?;
        let mut body = reply.into_body();
        let mut line: Vec<u8> = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame?;
            let Some(data) = frame.data_ref() else {
                continue;
            };
            line.extend_from_slice(data);
            if line.len() > MAX_REPLY {
                bail!("etcd {path}: a message over {MAX_REPLY} bytes");
            }
            while let Some(nl) = line.iter().position(|b| *b == b'\n') {
                let msg: Vec<u8> = line.drain(..=nl).collect();
                if msg.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let v = check(path, serde_json::from_slice(&msg)?)?;
                if let Some(t) = until(&v)? {
                    return Ok(Some(t));
                }
            }
        }
        if !line.iter().all(u8::is_ascii_whitespace) {
            let v = check(path, serde_json::from_slice(&line)?)?;
            if let Some(t) = until(&v)? {
                return Ok(Some(t));
            }
        }
        Ok(None)
    };
    match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), work).await {
        Ok(r) => r,
        Err(_) => Ok(None),
    }
}

/// Blocking readiness check for the launcher: `GET /health` says healthy.
pub fn etcd_ready(addr: SocketAddr) -> anyhow::Result<bool> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(format!("GET /health HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut reply = String::new();
    s.take(64 * 1024).read_to_string(&mut reply)?;
    Ok(reply.contains("\"health\":\"true\""))
}
