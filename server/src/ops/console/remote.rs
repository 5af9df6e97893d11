//! What the other members' consoles know, gathered for this one: each member of the
//! membership is probed as the Ensemble page probes it (`mntr` on its client port, which
//! says where its AdminServer listens), then asked for a console answer of its own
//! (`/console/api/<path>`, plain HTTP on hyper).
//!
//! Bounded, so that one slow or dead member does not hang the page: every member is asked
//! at once, each whole exchange (probe and request) within [`REMOTE_TIMEOUT`], and an
//! answer is read up to [`REMOTE_MAX`] bytes. A member that cannot be asked (its
//! AdminServer off, TLS-only, bound to an address this member cannot reach, or too slow)
//! is reported with why, and the page shows what the others said.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::ensemble::{admin_target, probe_members};
use crate::net::ClientPort;

/// How long one member has for the probe and the request together.
pub const REMOTE_TIMEOUT: Duration = Duration::from_millis(1500);
/// The most of an answer read.
pub const REMOTE_MAX: usize = 4 << 20;

/// One member's answer: its id, and the JSON it gave or why there is none.
pub struct Answer {
    pub member: u64,
    pub result: Result<Value, String>,
}

/// Asks every other member of the membership for `/console/api/<path>` (`path` with its
/// query, already escaped), all at once; the answers in membership order.
pub async fn ask_others(shared: &ClientPort, path: &str) -> Vec<Answer> {
    let me = shared.replica.config().my_id;
    let probed = probe_members(shared).await;
    let asks: Vec<_> = probed
        .into_iter()
        .filter(|(spec, _)| spec.id != me)
        .map(|(spec, probe)| {
            let path = format!("/console/api/{path}");
            let member = spec.id;
            let ask = async move {
                let p = probe?;
                let (host, port) = admin_target(&spec, &p)
                    .ok_or_else(|| "its AdminServer is off or unknown".to_string())?;
                get_json(&host, port, &path).await
            };
            tokio::spawn(async move {
                let result = tokio::time::timeout(REMOTE_TIMEOUT, ask)
                    .await
                    .unwrap_or_else(|_| Err("no answer in time".into()));
                Answer { member, result }
            })
        })
        .collect();
    let mut out = Vec::with_capacity(asks.len());
    for a in asks {
        if let Ok(answer) = a.await {
            out.push(answer);
        }
    }
    out
}

/// GETs `path` from `host:port` and reads its JSON body (at most [`REMOTE_MAX`] bytes).
async fn get_json(host: &str, port: u16, path: &str) -> Result<Value, String> {
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("its console at {host}:{port}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    // The connection ends once `sender` is dropped (or the peer closes it).
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, format!("{host}:{port}"))
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = Limited::new(response.into_body(), REMOTE_MAX)
        .collect()
        .await
        .map_err(|e| format!("its answer: {e}"))?
        .to_bytes();
    if !status.is_success() {
        return Err(format!("its console answered {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("its answer is not JSON: {e}"))
}
