//! The Sessions page: every open session of the ensemble (sessions are replicated state),
//! with what the member it is connected to knows of it: client address, when it last
//! answered it, its watches, its auth ids. This member's own connections are read here;
//! the others' come from their members' consoles (`remote.rs`). Its timeout and
//! ephemerals are the same everywhere.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::remote;
use crate::net::ClientPort;

/// Ephemeral paths listed per session, at most (the count is always whole).
const EPHEMERALS_SHOWN: usize = 20;

/// What this member's connection of a session says.
#[derive(Debug, Clone)]
pub struct Local {
    pub address: String,
    /// How long ago this member last answered it (ms).
    pub idle_ms: u64,
    pub connected_ms: u64,
    pub secure: bool,
    pub watches: usize,
    /// The connection's auth ids (`ip:…`, then what `addauth`, SASL or a certificate added).
    pub auth: Vec<String>,
}

/// This member's connections, by session.
pub fn local(shared: &ClientPort) -> BTreeMap<i64, Local> {
    let mut watches_by_conn: BTreeMap<u64, usize> = BTreeMap::new();
    for (conn, paths) in shared.watches.lock().by_connection() {
        watches_by_conn.insert(conn, paths.len());
    }
    let now = shared.metrics.started.elapsed().as_millis() as u64;
    let mut out = BTreeMap::new();
    let mut pipelines = Vec::new();
    shared.registry.for_each(|conn, e| {
        let connected_ms = e
            .connected_at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        out.insert(
            e.session,
            Local {
                address: e.peer.to_string(),
                idle_ms: now.saturating_sub(
                    e.stats
                        .last_response_ms
                        .load(std::sync::atomic::Ordering::Relaxed),
                ),
                connected_ms,
                secure: e.secure,
                watches: watches_by_conn.get(&conn).copied().unwrap_or(0),
                auth: Vec::new(),
            },
        );
        pipelines.push((e.session, e.pipeline.clone()));
    });
    // Each pipeline's lock is taken after the registry's is released: a connection may
    // hold its pipeline while it registers or unregisters.
    for (session, pipeline) in pipelines {
        let ids: Vec<String> = pipeline
            .lock()
            .auth
            .iter()
            .map(|id| format!("{}:{}", id.scheme, id.id))
            .collect();
        if let Some(l) = out.get_mut(&session) {
            l.auth = ids;
        }
    }
    out
}

/// Client addresses of this member's sessions (for the Locks page).
pub fn addresses(shared: &ClientPort) -> BTreeMap<i64, String> {
    let mut out = BTreeMap::new();
    shared.registry.for_each(|_, e| {
        out.insert(e.session, e.peer.to_string());
    });
    out
}

/// The figures of a session connected to a member, as the page shows them.
fn figures(l: &Local) -> Value {
    json!({
        "client": l.address,
        "secure": l.secure,
        "idle_ms": l.idle_ms,
        "connected_since_ms": l.connected_ms,
        "watches": l.watches,
        "auth": l.auth,
    })
}

/// This member's connected sessions with ids from `from` to `to` (for another member's
/// Sessions page), at most [`HERE_MAX`].
pub fn here(shared: &ClientPort, from: i64, to: i64) -> Value {
    let sessions: serde_json::Map<String, Value> = local(shared)
        .range(from..=to.max(from))
        .take(HERE_MAX)
        .map(|(id, l)| (format!("0x{id:x}"), figures(l)))
        .collect();
    json!({"member": shared.replica.me, "sessions": sessions})
}

/// Sessions one member reports to another's page at most (a page shows at most 1000).
const HERE_MAX: usize = 1000;

/// Every session, in id order, from `offset`, at most `limit`. A session connected to
/// another member gets that member's figures for it (`remote.rs`: bounded in time and
/// size; a member that does not answer is named under `unanswered`).
pub async fn report(shared: &ClientPort, offset: usize, limit: usize) -> Value {
    let here = local(shared);
    let me = shared.replica.me;
    let (total, mut list, elsewhere) = {
        let state = shared.replica.state.read();
        let mut elsewhere = Vec::new();
        let list: Vec<Value> = state
            .sessions
            .iter()
            .skip(offset)
            .take(limit.clamp(1, 1000))
            .map(|(id, info)| {
                let ephemerals: Vec<&String> = state.tree.ephemerals_of(*id).collect();
                let mine = here.get(id);
                if mine.is_none() {
                    elsewhere.push(*id);
                }
                let mut row = json!({
                    "id": format!("0x{id:x}"),
                    "timeout_ms": info.timeout,
                    "ephemerals": ephemerals.len(),
                    "ephemeral_paths": ephemerals.iter().take(EPHEMERALS_SHOWN).collect::<Vec<_>>(),
                    "connected_here": mine.is_some(),
                    "member": mine.map(|_| me),
                });
                merge(&mut row, mine.map(figures));
                row
            })
            .collect();
        (state.sessions.len(), list, elsewhere)
    };
    let mut unanswered = Vec::new();
    if let (Some(first), Some(last)) = (elsewhere.first(), elsewhere.last()) {
        let path = format!("sessions_here?from=0x{first:x}&to=0x{last:x}");
        let mut found: BTreeMap<String, (u64, Value)> = BTreeMap::new();
        for a in remote::ask_others(shared, &path).await {
            match a.result {
                Ok(Value::Object(mut answer)) => {
                    if let Some(Value::Object(sessions)) = answer.remove("sessions") {
                        for (id, figures) in sessions {
                            found.insert(id, (a.member, figures));
                        }
                    }
                }
                Ok(_) => {
                    unanswered.push(json!({"member": a.member, "error": "not a session list"}))
                }
                Err(e) => unanswered.push(json!({"member": a.member, "error": e})),
            }
        }
        for row in list.iter_mut().filter(|r| r["connected_here"] == false) {
            let id = row["id"].as_str().unwrap_or_default().to_string();
            if let Some((member, figures)) = found.remove(&id) {
                row["member"] = member.into();
                merge(row, Some(figures));
            }
        }
    }
    json!({
        "total": total, "offset": offset, "sessions": list, "member": me,
        "unanswered": unanswered,
    })
}

/// Copies the connection's figures into a session's row (nulls where there are none).
fn merge(row: &mut Value, figures: Option<Value>) {
    for key in [
        "client",
        "secure",
        "idle_ms",
        "connected_since_ms",
        "watches",
        "auth",
    ] {
        row[key] = figures
            .as_ref()
            .and_then(|f| f.get(key).cloned())
            .unwrap_or(Value::Null);
    }
}

/// A session id as the page writes it (`0x...`) or in decimal.
pub fn parse_id(text: &str) -> Option<i64> {
    let t = text.trim();
    match t.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok().map(|v| v as i64),
        None => t.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_in_hex_and_decimal() {
        assert_eq!(parse_id("0x10"), Some(16));
        assert_eq!(parse_id("16"), Some(16));
        assert_eq!(parse_id("0xffffffffffffffff"), Some(-1));
        assert_eq!(parse_id("zz"), None);
    }
}
