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
use crate::net::ClientPort;
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
    pub disk_reserve_bytes: Option<u64>,
    pub tls_quorum: Option<bool>,
    pub tls_client_port: Option<bool>,
    pub tls_admin: Option<bool>,
    /// Where its AdminServer (and so its console) listens: address as configured, port
    /// (0: off).
    pub admin_address: Option<String>,
    pub admin_port: Option<u16>,
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
            "zk_disk_reserve_bytes" => p.disk_reserve_bytes = value.parse().ok(),
            "zk_tls_quorum" => p.tls_quorum = Some(value == "1"),
            "zk_tls_client_port" => p.tls_client_port = Some(value == "1"),
            "zk_tls_admin" => p.tls_admin = Some(value == "1"),
            "zk_admin_address" => p.admin_address = Some(value.to_string()),
            "zk_admin_port" => p.admin_port = value.parse().ok(),
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

/// `addr`, or the member's host where `addr` is a wildcard (listening everywhere).
fn host_or(addr: String, spec: &reconfig::ServerSpec) -> String {
    if addr.is_empty() || addr == "0.0.0.0" || addr == "::" {
        spec.host.clone()
    } else {
        addr
    }
}

/// Where a member's clients connect, for the probe (a wildcard address means its host).
fn client_target(spec: &reconfig::ServerSpec) -> Option<(String, u16)> {
    let (addr, port) = spec.client.clone()?;
    Some((host_or(addr, spec), port))
}

/// Where a probed member's console is: its AdminServer's address and port, as its `mntr`
/// told them (`None` when it is off or did not say).
pub fn admin_target(spec: &reconfig::ServerSpec, p: &Probe) -> Option<(String, u16)> {
    let port = p.admin_port.filter(|p| *p != 0)?;
    Some((host_or(p.admin_address.clone()?, spec), port))
}

/// This member's figures.
pub fn local(shared: &ClientPort) -> Value {
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

/// Every member of the committed membership (none when standalone), each as probed.
pub async fn probe_members(
    shared: &ClientPort,
) -> Vec<(reconfig::ServerSpec, Result<Probe, String>)> {
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
    specs.into_iter().zip(answers).collect()
}

/// The whole page: this member, then every member of the membership as probed.
pub async fn report(shared: &ClientPort) -> Value {
    let me = local(shared);
    let config = shared.replica.config();
    let probed = probe_members(shared).await;
    let leader_zxid = probed.iter().find_map(|(_, a)| match a {
        Ok(p) if p.mode.as_deref() == Some("leader") => p.zxid,
        _ => None,
    });
    let members: Vec<Value> = probed
        .into_iter()
        .map(|(s, a)| {
            let s = &s;
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
                "disk_reserve_bytes": p.disk_reserve_bytes,
                "tls": p.tls_quorum.map(|quorum| json!({
                    "quorum": quorum,
                    "client_port": p.tls_client_port,
                    "admin": p.tls_admin,
                })),
                "console": admin_target(s, &p).map(|(h, port)| format!("{h}:{port}")),
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
        assert_eq!((p.tls_quorum, p.disk_reserve_bytes), (None, None));
        let more = format!(
            "{mntr}zk_disk_reserve_bytes\t67108864\nzk_tls_quorum\t1\nzk_tls_client_port\t0\n\
             zk_tls_admin\t0\nzk_admin_address\t0.0.0.0\nzk_admin_port\t8080\n"
        );
        let p = parse_mntr(&more).expect("an mntr answer");
        assert_eq!(p.disk_reserve_bytes, Some(64 << 20));
        assert_eq!(
            (p.tls_quorum, p.tls_client_port, p.tls_admin),
            (Some(true), Some(false), Some(false))
        );
        let spec = reconfig::ServerSpec {
            id: 2,
            host: "10.0.0.2".into(),
            quorum_port: 2888,
            election_port: 3888,
            observer: false,
            client: None,
        };
        assert_eq!(admin_target(&spec, &p), Some(("10.0.0.2".into(), 8080)));
        assert!(parse_mntr("mntr is not executed because it is not in the whitelist.\n").is_none());
    }
}
