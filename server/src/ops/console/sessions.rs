//! The Sessions page: every open session of the ensemble (sessions are replicated state),
//! with what this member knows of the ones connected to it: client address, when it last
//! answered them, their watches, their auth ids.
//!
//! A session connected to another member shows that member's console for those figures;
//! its timeout and ephemerals are the same everywhere.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::net::Shared;

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
pub fn local(shared: &Shared) -> BTreeMap<i64, Local> {
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
pub fn addresses(shared: &Shared) -> BTreeMap<i64, String> {
    let mut out = BTreeMap::new();
    shared.registry.for_each(|_, e| {
        out.insert(e.session, e.peer.to_string());
    });
    out
}

/// Every session, in id order, from `offset`, at most `limit`.
pub fn report(shared: &Shared, offset: usize, limit: usize) -> Value {
    let local = local(shared);
    let state = shared.replica.state.read();
    let total = state.sessions.len();
    let list: Vec<Value> = state
        .sessions
        .iter()
        .skip(offset)
        .take(limit.clamp(1, 1000))
        .map(|(id, info)| {
            let ephemerals: Vec<&String> = state.tree.ephemerals_of(*id).collect();
            let here = local.get(id);
            json!({
                "id": format!("0x{id:x}"),
                "timeout_ms": info.timeout,
                "ephemerals": ephemerals.len(),
                "ephemeral_paths": ephemerals.iter().take(EPHEMERALS_SHOWN).collect::<Vec<_>>(),
                "connected_here": here.is_some(),
                "client": here.map(|l| l.address.clone()),
                "secure": here.map(|l| l.secure),
                "idle_ms": here.map(|l| l.idle_ms),
                "connected_since_ms": here.map(|l| l.connected_ms),
                "watches": here.map(|l| l.watches),
                "auth": here.map(|l| l.auth.clone()),
            })
        })
        .collect();
    json!({"total": total, "offset": offset, "sessions": list})
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
