//! The AdminServer's larger answers, field for field as ZooKeeper 3.8's (`connections`,
//! `server_stats`, `stats`, `monitor`, `dump`, `watches`, `voting_view`, `zabstate`, ...),
//! read from the same places the four-letter words read, so `cons` and `connections`, `mntr`
//! and `monitor` never disagree.
//!
//! Where ZooKeeper reports a structure zooraft does not have, the field is kept with what is
//! true here: `zabstate` maps Raft's roles onto ZAB's phases (a member with a leader it has
//! caught up with is in `broadcast`, one without a leader in `election`); session deadlines
//! live on the leader's Raft thread, so `dump` gives each live session the deadline a touch
//! now would give it (now plus its timeout, rounded up to the tick as ZooKeeper's buckets).

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use super::super::catalogue::{self, Figure, Value as Fig};
use super::super::four_letter::{dir_size, full_version, sessions_by_conn};
use super::super::view::View;
use crate::net::ClientPort;
use crate::raft::Role;
use crate::state::reconfig::{self, DynamicConfig, ServerSpec};
use crate::stats::QUANTILES;

/// A JSON object.
pub type Fields = Map<String, Value>;

fn object(v: Value) -> Fields {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `monitor`: every `mntr` figure under its key without `zk_`.
pub fn monitor(shared: &ClientPort) -> Fields {
    let mut out = Map::new();
    for Figure { key, value, .. } in catalogue::gather(shared, &full_version()) {
        match value {
            Fig::Text(t) => {
                out.insert(key.into(), t.into());
            }
            Fig::Int(v, _) | Fig::Zxid(v) => {
                out.insert(key.into(), v.into());
            }
            Fig::Float(v) => {
                out.insert(key.into(), json!(v));
            }
            Fig::Summary(s) => {
                out.insert(format!("avg_{key}"), json!(s.avg()));
                out.insert(format!("min_{key}"), s.min.into());
                out.insert(format!("max_{key}"), s.max.into());
                out.insert(format!("cnt_{key}"), s.count.into());
                out.insert(format!("sum_{key}"), s.sum.into());
                for (q, (_, prefix)) in s.quantiles.iter().flatten().zip(QUANTILES) {
                    out.insert(format!("{prefix}_{key}"), (*q).into());
                }
            }
        }
    }
    out
}

/// One `mntr` figure as a number (`default` when it is not there).
fn figure(figures: &[Figure], key: &str, default: i64) -> i64 {
    figures
        .iter()
        .find(|f| f.key == key)
        .and_then(|f| match f.value {
            Fig::Int(v, _) => Some(v),
            _ => None,
        })
        .unwrap_or(default)
}

/// `server_stats` (`srvr`); `stats` adds the connections.
pub fn server_stats(shared: &ClientPort) -> Fields {
    let v = View::gather(shared);
    let figures = catalogue::gather(shared, &full_version());
    let f = |key: &str, default: i64| figure(&figures, key, default);
    let buffers = json!({
        "last_buffer_size": f("last_client_response_size", -1),
        "min_buffer_size": f("min_client_response_size", -1),
        "max_buffer_size": f("max_client_response_size", -1),
    });
    let data_dir = dir_size(&shared.replica.config().data_dir);
    let (min, avg, max) = v.latency_ms;
    let mut out = object(json!({
        "version": full_version(),
        "read_only": shared.replica.is_read_only(),
        "server_stats": {
            "packets_sent": v.packets_sent,
            "packets_received": v.packets_received,
            "fsync_threshold_exceed_count": f("fsynctime_threshold_exceed_count", 0),
            "client_response_stats": buffers,
            "data_dir_size": data_dir,
            "log_dir_size": data_dir,
            "provider_null": false,
            "server_state": v.mode,
            "last_processed_zxid": v.last_zxid,
            "outstanding_requests": v.outstanding,
            "avg_latency": avg,
            "max_latency": max,
            "min_latency": min,
            "num_alive_client_connections": v.connections,
            "uptime": v.uptime_ms as u64,
            "auth_failed_count": f("auth_failed_count", 0),
            "non_mtlsremote_conn_count": f("non_mtls_remote_conn_count", 0),
            "non_mtlslocal_conn_count": f("non_mtls_local_conn_count", 0),
        },
        "client_response": buffers,
        "node_count": v.znodes,
    }));
    if v.role == Role::Leader {
        let proposals =
            json!({"last_buffer_size": -1, "min_buffer_size": -1, "max_buffer_size": -1});
        out.insert("proposal_stats".into(), proposals);
    }
    out
}

/// `connections` (`cons`): one object per client connection, TLS ones apart.
pub fn connections(shared: &ClientPort) -> Fields {
    let (mut list, mut secure) = (Vec::new(), Vec::new());
    shared.registry.for_each(|_, e| {
        let s = &e.stats;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let count = load(&s.latency_count);
        let avg = load(&s.total_latency_us).checked_div(count).unwrap_or(0) / 1000;
        let established = e
            .connected_at
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let into = if e.secure { &mut secure } else { &mut list };
        into.push(json!({
            "remote_socket_address": e.peer.to_string(),
            "interest_ops": 1,
            "outstanding_requests": load(&s.outstanding),
            "packets_received": load(&s.received),
            "packets_sent": load(&s.sent),
            "session_id": e.session,
            "last_operation": *s.last_op.lock(),
            "established": established,
            "session_timeout": s.timeout_ms.load(Ordering::Relaxed),
            "last_cxid": s.last_cxid.load(Ordering::Relaxed),
            "last_zxid": load(&s.last_zxid),
            "last_response_time": load(&s.last_response_ms),
            "last_latency": load(&s.last_latency_ms),
            "min_latency": load(&s.min_latency_us) / 1000,
            "avg_latency": avg,
            "max_latency": load(&s.max_latency_us) / 1000,
        }));
    });
    object(json!({"connections": list, "secure_connections": secure}))
}

/// `dump`: sessions by deadline (see the module docs; the leader's, or a standalone
/// server's, as in ZooKeeper, where a follower lists none) and ephemeral paths by session.
pub fn dump(shared: &ClientPort) -> Fields {
    let tick = u64::from(shared.replica.config().tick_time_ms.max(1));
    let tracks_deadlines =
        shared.replica.config().is_standalone() || shared.replica.status.role() == Role::Leader;
    let now = now_ms();
    let state = shared.replica.state.read();
    let mut by_deadline: std::collections::BTreeMap<u64, Vec<i64>> = Default::default();
    for (id, s) in state.sessions.iter().filter(|_| tracks_deadlines) {
        let deadline = (now + s.timeout.max(0) as u64).div_ceil(tick) * tick;
        by_deadline.entry(deadline).or_default().push(*id);
    }
    let expiry: Fields = by_deadline
        .into_iter()
        .map(|(t, ids)| (t.to_string(), json!(ids)))
        .collect();
    let ephemerals: Fields = state
        .tree
        .ephemerals_by_session()
        .map(|(s, paths)| (s.to_string(), json!(paths)))
        .collect();
    object(json!({
        "expiry_time_to_session_ids": expiry,
        "session_id_to_ephemeral_paths": ephemerals,
    }))
}

/// `watches` (`wchc`): the data watches' paths by session.
pub fn watches(shared: &ClientPort) -> Fields {
    let by_conn = shared.watches.lock().by_connection();
    let sessions = sessions_by_conn(shared);
    let session = |conn| sessions.get(&conn).copied().unwrap_or(0);
    let map: Fields = by_conn
        .into_iter()
        .map(|(conn, paths)| (session(conn).to_string(), json!(paths)))
        .collect();
    object(json!({ "session_id_to_watched_paths": map }))
}

/// `watches_by_path` (`wchp`): sessions by watched path.
pub fn watches_by_path(shared: &ClientPort) -> Fields {
    let by_path = shared.watches.lock().by_path();
    let sessions = sessions_by_conn(shared);
    let map: Fields = by_path
        .into_iter()
        .map(|(path, conns)| {
            let ids: Vec<i64> = conns
                .iter()
                .map(|c| sessions.get(c).copied().unwrap_or(0))
                .collect();
            (path, json!(ids))
        })
        .collect();
    object(json!({ "path_to_session_ids": map }))
}

/// The membership as committed (or as zoo.cfg has it before anything was).
fn membership(shared: &ClientPort) -> DynamicConfig {
    let committed = reconfig::committed(&shared.replica.state.read().tree);
    committed.unwrap_or_else(|| crate::raft::initial_config(shared.replica.config(), 0))
}

/// `voting_view`: every member of the current configuration (nothing when standalone).
pub fn voting_view(shared: &ClientPort) -> Fields {
    let config = shared.replica.config();
    let mut view = Map::new();
    if !config.is_standalone() {
        for (id, s) in membership(shared).servers {
            let client = s
                .client
                .as_ref()
                .map(|(h, p)| format!("{h}:{p}"))
                .unwrap_or_default();
            view.insert(
                id.to_string(),
                json!({
                    "server_addresses": [format!("{}:{}", s.host, s.quorum_port)],
                    "election_addresses": [format!("{}:{}", s.host, s.election_port)],
                    "client_address": client,
                    "learner_type": if s.observer { "observer" } else { "participant" },
                }),
            );
        }
    }
    object(json!({ "current_config": view }))
}

/// ZooKeeper's `MultipleAddresses` as its AdminServer prints one address.
fn addresses(host: &str, port: u16) -> Value {
    let one = format!("{host}:{port}");
    json!({
        "empty": false,
        "all_addresses": [one],
        "all_reachable_addresses": [one],
        "one": one,
        "reachable_address": one,
        "wildcard_addresses": [format!("0.0.0.0:{port}")],
        "all_ports": [port],
        "all_host_strings": [host],
        "all_reachable_addresses_or_all": [one],
        "reachable_or_one": one,
    })
}

/// `zabstate`: ZAB's phase for Raft's role (see the module docs).
pub fn zabstate(shared: &ClientPort) -> Fields {
    let config = shared.replica.config();
    if config.is_standalone() {
        return object(json!({"voting": false, "zabstate": ""}));
    }
    let v = View::gather(shared);
    let me: Option<ServerSpec> = membership(shared).servers.remove(&config.my_id);
    let phase = if v.leader_id == 0 {
        "election"
    } else if v.serving {
        "broadcast"
    } else {
        "synchronization"
    };
    let zxid = v.last_zxid;
    let mut out = object(json!({
        "myid": config.my_id,
        "is_leader": v.role == Role::Leader,
        "client_address": format!("{}:{}", config.client_address, config.client_port),
        "voting": me.as_ref().is_some_and(|s| !s.observer),
        "last_zxid": format!("0x{zxid:x}"),
        "zab_epoch": zxid >> 32,
        "zab_counter": zxid & 0xffff_ffff,
        "zabstate": phase,
    }));
    if let Some(s) = me {
        out.insert("quorum_address".into(), addresses(&s.host, s.quorum_port));
        out.insert(
            "election_address".into(),
            addresses(&s.host, s.election_port),
        );
    }
    out
}

/// `leader`: who leads, as this member knows it.
pub fn leader(shared: &ClientPort) -> Result<Fields, String> {
    let config = shared.replica.config();
    if config.is_standalone() {
        // ZooKeeper's answer for a server that is not a quorum peer.
        return Err("server is not initialized".into());
    }
    let v = View::gather(shared);
    let host = membership(shared)
        .servers
        .get(&v.leader_id)
        .map(|s| s.host.clone());
    Ok(object(json!({
        "is_leader": v.role == Role::Leader,
        "leader_id": v.leader_id,
        "leader_ip": host,
    })))
}
