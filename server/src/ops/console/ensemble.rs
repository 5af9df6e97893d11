//! The Ensemble page: this member's own figures in full, and each member of the committed
//! membership as it answers `mntr` on its client port (role, last zxid, Raft term, serving,
//! disk; `srvr`'s role and zxid where `mntr` is not in its four-letter-word whitelist), so
//! the page shows every member and its lag behind the leader from any one member's console.
//!
//! The probes run concurrently, each bounded by [`PROBE_TIMEOUT`]: a dead member costs the
//! page that long once, and shows as not answering.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::super::view::View;
use crate::net::Shared;
use crate::state::reconfig;

/// How long a member has to answer.
const PROBE_TIMEOUT: Duration = Duration::from_millis(800);
/// The most of an answer read.
const PROBE_MAX: usize = 16 * 1024;

/// What a member says of itself.
#[derive(Debug, Default, PartialEq)]
pub struct Probe {
    pub mode: Option<String>,
    pub zxid: Option<i64>,
    pub term: Option<u64>,
    pub serving: Option<bool>,
    pub disk_full: Option<bool>,
    pub disk_free_bytes: Option<u64>,
}

fn hex_zxid(z: &str) -> Option<i64> {
    i64::from_str_radix(z.trim().trim_start_matches("0x"), 16).ok()
}

/// Reads `Mode:` and `Zxid:` out of a `srvr` answer.
pub fn parse_srvr(text: &str) -> Probe {
    let mut p = Probe::default();
    for line in text.lines() {
        if let Some(m) = line.strip_prefix("Mode:") {
            p.mode = Some(m.trim().to_string());
        } else if let Some(z) = line.strip_prefix("Zxid:") {
            p.zxid = hex_zxid(z);
        }
    }
    p
}

/// Reads the figures the page shows out of a `mntr` answer (`None` when it is not one).
pub fn parse_mntr(text: &str) -> Option<Probe> {
    let mut p = Probe::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('\t') else {
            continue;
        };
        let value = value.trim();
        match key {
            "zk_server_state" => p.mode = Some(value.to_string()),
            "zk_last_zxid" => p.zxid = hex_zxid(value),
            "zk_raft_term" => p.term = value.parse().ok(),
            "zk_serving" => p.serving = Some(value == "1"),
            "zk_disk_full" => p.disk_full = Some(value == "1"),
            "zk_disk_free_bytes" => p.disk_free_bytes = value.parse().ok(),
            _ => {}
        }
    }
    p.mode.is_some().then_some(p)
}

/// Sends a four-letter word to `host:port` and reads the whole answer.
async fn ask_word(host: &str, port: u16, word: &[u8]) -> Result<String, String> {
    let mut s = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| e.to_string())?;
    s.write_all(word).await.map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 || buf.len() + n > PROBE_MAX {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Asks `host:port` for `mntr`, or `srvr` when `mntr` is not allowed there.
async fn probe(host: String, port: u16) -> Result<Probe, String> {
    let ask = async {
        let mntr = ask_word(&host, port, b"mntr").await?;
        match parse_mntr(&mntr) {
            Some(p) => Ok(p),
            None => Ok(parse_srvr(&ask_word(&host, port, b"srvr").await?)),
        }
    };
    tokio::time::timeout(PROBE_TIMEOUT, ask)
        .await
        .map_err(|_| "no answer".to_string())?
}

/// Where a member's clients connect, for the probe (a wildcard address means its host).
fn client_target(spec: &reconfig::ServerSpec) -> Option<(String, u16)> {
    let (addr, port) = spec.client.clone()?;
    let host = if addr.is_empty() || addr == "0.0.0.0" || addr == "::" {
        spec.host.clone()
    } else {
        addr
    };
    Some((host, port))
}

/// This member's figures.
pub fn local(shared: &Shared) -> Value {
    let v = View::gather(shared);
    let config = shared.replica.config();
    let security = &config.security;
    let on = |k: &str| security.get(k).is_some_and(|v| v.trim() == "true");
    json!({
        "id": config.my_id,
        "role": v.role.name(),
        "mode": v.mode,
        "serving": v.serving,
        "term": v.raft_term,
        "last_zxid": format!("0x{:x}", v.last_zxid),
        "last_zxid_value": v.last_zxid,
        "commit_index": v.commit_index,
        "applied_index": v.applied_index,
        "leader": v.leader_id,
        "znodes": v.znodes,
        "sessions": v.sessions,
        "connections": v.connections,
        "watches": v.watches,
        "disk_full": v.disk_full,
        "disk_free_bytes": v.disk_free_bytes,
        "disk_reserve_bytes": config.disk_reserve_bytes,
        "data_trusted": v.data_trusted,
        "tls": {
            "quorum": on("sslQuorum"),
            "client_port": security.contains_key("secureClientPort"),
            "admin": config.admin.tls(),
        },
        "uptime_ms": v.uptime_ms as u64,
    })
}

/// The whole page: this member, then every member of the membership as probed.
pub async fn report(shared: &Shared) -> Value {
    let me = local(shared);
    let config = shared.replica.config();
    let membership = if config.is_standalone() {
        None
    } else {
        let committed = reconfig::committed(&shared.replica.state.read().tree);
        Some(committed.unwrap_or_else(|| crate::raft::initial_config(config, 0)))
    };
    let specs: Vec<reconfig::ServerSpec> = membership
        .map(|m| m.servers.into_values().collect())
        .unwrap_or_default();
    let probes = specs.iter().map(|s| {
        let target = client_target(s);
        async move {
            match target {
                Some((h, p)) => probe(h, p).await,
                None => Err("no client address in the membership".into()),
            }
        }
    });
    let answers = futures_join(probes).await;
    let leader_zxid = specs.iter().zip(&answers).find_map(|(_, a)| match a {
        Ok(p) if p.mode.as_deref() == Some("leader") => p.zxid,
        _ => None,
    });
    let members: Vec<Value> = specs
        .iter()
        .zip(answers)
        .map(|(s, a)| {
            let (p, error) = match a {
                Ok(p) => (p, None),
                Err(e) => (Probe::default(), Some(e)),
            };
            let zxid = p.zxid;
            let lag = match (leader_zxid, zxid) {
                (Some(l), Some(z)) if l >> 32 == z >> 32 => Some((l - z).max(0)),
                _ => None,
            };
            json!({
                "id": s.id,
                "host": s.host,
                "quorum_port": s.quorum_port,
                "client": client_target(s).map(|(h, p)| format!("{h}:{p}")),
                "learner_type": if s.observer { "observer" } else { "participant" },
                "mode": p.mode,
                "last_zxid": zxid.map(|z| format!("0x{z:x}")),
                "term": p.term,
                "serving": p.serving,
                "disk_full": p.disk_full,
                "disk_free_bytes": p.disk_free_bytes,
                "lag": lag,
                "error": error,
                "is_me": s.id == config.my_id,
            })
        })
        .collect();
    json!({"me": me, "members": members})
}

/// Runs every probe at once and gathers the answers in order.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<Result<Probe, String>>
where
    F: std::future::Future<Output = Result<Probe, String>> + Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(
            h.await
                .unwrap_or_else(|e| Err(format!("probe failed: {e}"))),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srvr_answers_parse() {
        let text = "Zookeeper version: 3.8.4\nLatency min/avg/max: 0/0.0/0\n\
                    Zxid: 0x20000000a\nMode: leader\nNode count: 5\n";
        let p = parse_srvr(text);
        assert_eq!(p.mode.as_deref(), Some("leader"));
        assert_eq!(p.zxid, Some(0x2_0000_000a));
        assert_eq!(parse_srvr("srvr is not executed\n"), Probe::default());
        let mntr = "zk_version\t3.8.4\nzk_server_state\tfollower\nzk_last_zxid\t0x300003fa1\n\
                    zk_raft_term\t4\nzk_serving\t1\nzk_disk_full\t0\nzk_disk_free_bytes\t81\n";
        let p = parse_mntr(mntr).expect("an mntr answer");
        assert_eq!(p.mode.as_deref(), Some("follower"));
        assert_eq!(p.zxid, Some(0x3_0000_3fa1));
        assert_eq!(
            (p.term, p.serving, p.disk_full),
            (Some(4), Some(true), Some(false))
        );
        assert_eq!(p.disk_free_bytes, Some(81));
        assert!(parse_mntr("mntr is not executed because it is not in the whitelist.\n").is_none());
    }
}
