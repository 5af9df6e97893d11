//! A session's last moments, for the Sessions page's search: what each member saw of it
//! (`net/session_log.rs`: connections from which address and how they ended, resumes
//! refused, and how the session ended, with zxids), put together in time order.
//!
//! Every member applies the same creates and closes, so those come from every member and
//! are shown once (by kind and zxid). A connection that follows one to another member is
//! marked as the session moving there. The other members are asked through their consoles
//! (`remote.rs`), bounded in time and size; a member that does not answer is named.

use serde_json::{json, Value};

use super::remote;
use crate::net::{ClientPort, SessionEvent, SessionWhat};

fn zxid(z: i64) -> String {
    format!("0x{z:x}")
}

/// One event as the page shows it.
fn event(e: &SessionEvent, member: u64) -> Value {
    let mut v = match &e.what {
        SessionWhat::Created {
            zxid: z,
            timeout_ms,
        } => {
            json!({"kind": "created", "zxid": zxid(*z), "timeout_ms": timeout_ms})
        }
        SessionWhat::Connected {
            from,
            resumed,
            secure,
        } => json!({
            "kind": if *resumed { "reconnected" } else { "connected" },
            "address": from.to_string(), "secure": secure,
        }),
        SessionWhat::Refused { why } => json!({"kind": "refused", "why": why}),
        SessionWhat::Disconnected { why } => json!({"kind": "disconnected", "why": why}),
        SessionWhat::EphemeralsDeleted {
            zxid: z,
            count,
            paths,
        } => json!({
            "kind": "ephemerals_deleted", "zxid": zxid(*z), "count": count, "paths": paths,
        }),
        SessionWhat::Closed { zxid: z, by } => {
            json!({"kind": "closed", "zxid": zxid(*z), "by": by})
        }
        SessionWhat::Expired { zxid: z } => json!({"kind": "expired", "zxid": zxid(*z)}),
    };
    v["t"] = e.at_ms.into();
    v["member"] = member.into();
    v
}

/// What this member saw of `session` (another member's page asks for it).
pub fn here(shared: &ClientPort, session: i64) -> Value {
    let me = shared.replica.me;
    let events: Vec<Value> = shared
        .session_log
        .of(session)
        .iter()
        .map(|e| event(e, me))
        .collect();
    json!({"member": me, "events": events})
}

/// What every member saw of `session`, in time order.
pub async fn gathered(shared: &ClientPort, session: i64) -> Value {
    let mine = here(shared, session);
    let mut events: Vec<Value> = mine["events"].as_array().cloned().unwrap_or_default();
    let mut unanswered = Vec::new();
    let path = format!("session_log_here?session=0x{session:x}");
    for a in remote::ask_others(shared, &path).await {
        match a.result {
            Ok(v) => events.extend(v["events"].as_array().cloned().unwrap_or_default()),
            Err(e) => unanswered.push(json!({"member": a.member, "error": e})),
        }
    }
    let open = {
        let state = shared.replica.state.read();
        state.sessions.get(&session).map(|s| s.timeout)
    };
    let (sessions, kept) = shared.session_log.size();
    json!({
        "session": format!("0x{session:x}"),
        "open": open.is_some(),
        "timeout_ms": open,
        "events": merge(events),
        "unanswered": unanswered,
        "kept": {
            "per_session": crate::net::SESSION_LOG_PER_SESSION,
            "retain_ms": crate::net::SESSION_LOG_RETAIN_MS,
            "sessions_here": sessions,
            "events_here": kept,
        },
    })
}

/// The events of every member in time order: the applied ones once, and a connection
/// to a member other than the one before marked as a move.
fn merge(mut events: Vec<Value>) -> Vec<Value> {
    events.sort_by_key(|e| e["t"].as_i64().unwrap_or(0));
    let applied = ["created", "ephemerals_deleted", "closed", "expired"];
    let mut seen = std::collections::BTreeSet::new();
    let mut last_member: Option<u64> = None;
    let mut out = Vec::with_capacity(events.len());
    for mut e in events {
        let kind = e["kind"].as_str().unwrap_or_default().to_string();
        if applied.contains(&kind.as_str()) {
            if !seen.insert((kind, e["zxid"].as_str().unwrap_or_default().to_string())) {
                continue;
            }
            e["applied"] = true.into();
        } else if kind == "connected" || kind == "reconnected" {
            let member = e["member"].as_u64();
            if let (Some(before), Some(now)) = (last_member, member) {
                if before != now {
                    e["moved_from"] = before.into();
                }
            }
            last_member = member;
        }
        out.push(e);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_views_merge_in_time_order_with_moves_marked() {
        let ev = |t: i64, member: u64, kind: &str, zxid: Option<&str>| {
            let mut v = json!({"t": t, "member": member, "kind": kind});
            if let Some(z) = zxid {
                v["zxid"] = z.into();
            }
            v
        };
        let events = vec![
            ev(1, 1, "created", Some("0x5")),
            ev(1, 2, "created", Some("0x5")),
            ev(2, 1, "connected", None),
            ev(3, 1, "disconnected", None),
            ev(4, 2, "reconnected", None),
            ev(9, 2, "expired", Some("0x9")),
            ev(9, 1, "expired", Some("0x9")),
            ev(9, 3, "ephemerals_deleted", Some("0x9")),
        ];
        let merged = merge(events);
        let kinds: Vec<&str> = merged.iter().filter_map(|e| e["kind"].as_str()).collect();
        assert_eq!(
            kinds,
            [
                "created",
                "connected",
                "disconnected",
                "reconnected",
                "expired",
                "ephemerals_deleted"
            ]
        );
        assert_eq!(merged[3]["moved_from"], 1);
        assert!(merged[1].get("moved_from").is_none());
    }
}
