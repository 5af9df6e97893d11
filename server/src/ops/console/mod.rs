//! The browser console, served by each member on the AdminServer's port under `/console/`.
//!
//! One small page ([`ASSETS`]: HTML, JS and CSS compiled into the binary, nothing fetched
//! from elsewhere) reads JSON under `/console/api/`: the ensemble ([`ensemble`]) with its
//! leader and membership changes, the tree ([`tree`]), the sessions ([`sessions`]) and a
//! session's last moments ([`session_events`]), the locks ([`locks`]) and the last hour's
//! figures ([`history`]). What only another member knows (its connections, what it saw of a
//! session) comes from that member's console ([`remote`]). The page builds every
//! element with `textContent`, never `innerHTML`, because node names, data and labels are
//! whatever clients wrote; the answers also forbid inline script by their
//! Content-Security-Policy, so a payload that slipped through would still not run.
//!
//! Reading needs nothing; the actions ([`actions`]: delete a node, close a session, take a
//! snapshot, move the leadership) are POSTs that need the super user's digest credentials,
//! checked by the AdminServer as for its own changing commands, and are refused outright
//! when no super digest is configured. The console reads state the way the AdminServer
//! commands do, off the request path: it takes the state's read lock for one pass, never
//! the Raft thread.

mod actions;
mod ensemble;
mod history;
mod locks;
mod remote;
mod reply;
mod session_events;
mod sessions;
mod tree;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hyper::{Method, Response, StatusCode};
use serde_json::json;
use tokio::sync::watch;

use super::http::{self, Body};
use crate::net::ClientPort;
use reply::{error, json_answer, with_headers, ASSETS};

/// The console's URL prefix.
pub const PREFIX: &str = "/console";

pub use history::History;

/// Starts keeping the last hour's samples and changes ([`history`]) until shutdown.
pub fn start_history(shared: Arc<ClientPort>, shutdown: watch::Receiver<bool>) -> Arc<History> {
    let history = Arc::new(History::default());
    tokio::spawn(history::run(shared, history.clone(), shutdown));
    history
}

/// How long the Locks page's request waits for a change at most (the hold and wait times
/// it shows are then at most this old), and how often it looks.
const LONG_POLL: std::time::Duration = std::time::Duration::from_secs(2);
const LONG_POLL_CHECK: std::time::Duration = std::time::Duration::from_millis(20);

/// Who is asking: whether they proved to be the super user, and the credentials they sent.
pub struct Viewer {
    pub super_user: bool,
    /// `super:<password>` as sent, for the delete's own client session.
    pub credentials: Option<String>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn param<'a>(query: &'a [(String, String)], key: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn number(query: &[(String, String)], key: &str, default: usize) -> usize {
    param(query, key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Answers a request under [`PREFIX`] (`path` is the whole request path).
pub async fn respond(
    shared: &ClientPort,
    history: &History,
    method: &Method,
    path: &str,
    query: &[(String, String)],
    viewer: &Viewer,
) -> Response<Body> {
    let rest = path
        .strip_prefix(PREFIX)
        .unwrap_or("")
        .trim_start_matches('/');
    if let Some(api) = rest.strip_prefix("api/") {
        return api_answer(shared, history, method, api, query, viewer).await;
    }
    if *method == Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD");
    }
    match ASSETS.iter().find(|(name, _, _)| *name == rest) {
        Some((_, kind, body)) => with_headers(http::answer(StatusCode::OK, kind, *body)),
        None => error(StatusCode::NOT_FOUND, "no such console page"),
    }
}

async fn api_answer(
    shared: &ClientPort,
    history: &History,
    method: &Method,
    api: &str,
    query: &[(String, String)],
    viewer: &Viewer,
) -> Response<Body> {
    if let Some(action) = api.strip_prefix("action/") {
        if *method != Method::POST {
            return error(StatusCode::METHOD_NOT_ALLOWED, "actions are POST");
        }
        return act(shared, action, query, viewer).await;
    }
    if *method == Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD");
    }
    match api {
        "whoami" => json_answer(
            StatusCode::OK,
            &json!({
                "super_user": viewer.super_user,
                "super_configured": shared.replica.config().super_digest.is_some(),
            }),
        ),
        "ensemble" => {
            let mut report = ensemble::report(shared).await;
            report["timeline"] = history::timeline(shared);
            json_answer(StatusCode::OK, &report)
        }
        "metrics" => json_answer(StatusCode::OK, &history.samples()),
        "node" => {
            let path = param(query, "path").unwrap_or("/");
            if crate::state::path::validate(path).is_err() {
                return error(StatusCode::BAD_REQUEST, "not a valid znode path");
            }
            let offset = number(query, "offset", 0);
            let limit = number(query, "limit", tree::PAGE);
            let watchers = watchers_of(shared, path);
            let state = shared.replica.state.read();
            match tree::node(&state.tree, path, offset, limit, &watchers) {
                Some(v) => json_answer(StatusCode::OK, &v),
                None => error(StatusCode::NOT_FOUND, "no node at that path"),
            }
        }
        "search" => {
            let prefix = param(query, "prefix").unwrap_or("/");
            let state = shared.replica.state.read();
            json_answer(StatusCode::OK, &tree::search(&state.tree, prefix))
        }
        "sessions" => {
            let offset = number(query, "offset", 0);
            let limit = number(query, "limit", 200);
            json_answer(
                StatusCode::OK,
                &sessions::report(shared, offset, limit).await,
            )
        }
        // Another member's Sessions page asks these.
        "sessions_here" => {
            let id = |k: &str| param(query, k).and_then(sessions::parse_id);
            let (from, to) = (id("from").unwrap_or(i64::MIN), id("to").unwrap_or(i64::MAX));
            json_answer(StatusCode::OK, &sessions::here(shared, from, to))
        }
        "session_log_here" | "session_log" => {
            let Some(id) = param(query, "session").and_then(sessions::parse_id) else {
                return error(StatusCode::BAD_REQUEST, "session=0x... is required");
            };
            let answer = if api == "session_log" {
                session_events::gathered(shared, id).await
            } else {
                session_events::here(shared, id)
            };
            json_answer(StatusCode::OK, &answer)
        }
        "locks" => {
            // Long poll: with `after=<zxid>`, answer once the state moved past it.
            if let Some(after) = param(query, "after").and_then(|v| v.parse::<i64>().ok()) {
                let deadline = tokio::time::Instant::now() + LONG_POLL;
                while shared.replica.last_zxid() == after && tokio::time::Instant::now() < deadline
                {
                    tokio::time::sleep(LONG_POLL_CHECK).await;
                }
            }
            let zxid = shared.replica.last_zxid();
            let addresses = sessions::addresses(shared);
            let mut report = {
                let state = shared.replica.state.read();
                locks::report(&state.tree, &addresses, now_ms())
            };
            report["zxid"] = zxid.into();
            json_answer(StatusCode::OK, &report)
        }
        _ => error(StatusCode::NOT_FOUND, "no such console API"),
    }
}

/// The sessions watching `path` (data, child or persistent watches) on this member.
fn watchers_of(shared: &ClientPort, path: &str) -> Vec<i64> {
    let conns: Vec<u64> = shared
        .watches
        .lock()
        .by_path()
        .into_iter()
        .filter(|(p, _)| p == path)
        .flat_map(|(_, c)| c)
        .collect();
    let mut by_conn = std::collections::HashMap::new();
    shared.registry.for_each(|id, e| {
        by_conn.insert(id, e.session);
    });
    let mut sessions: Vec<i64> = conns
        .iter()
        .filter_map(|c| by_conn.get(c).copied())
        .collect();
    sessions.sort_unstable();
    sessions.dedup();
    sessions
}

/// A super-user action.
async fn act(
    shared: &ClientPort,
    action: &str,
    query: &[(String, String)],
    viewer: &Viewer,
) -> Response<Body> {
    if shared.replica.config().super_digest.is_none() {
        return error(
            StatusCode::FORBIDDEN,
            "no super user is configured (DigestAuthenticationProvider.superDigest)",
        );
    }
    if !viewer.super_user {
        return error(
            StatusCode::UNAUTHORIZED,
            "send Authorization: digest super:<password>",
        );
    }
    let done = |what: String| json_answer(StatusCode::OK, &json!({"ok": true, "message": what}));
    match action {
        "delete" => {
            let Some(path) = param(query, "path") else {
                return error(StatusCode::BAD_REQUEST, "path= is required");
            };
            if crate::state::path::validate(path).is_err() || path == "/" {
                return error(StatusCode::BAD_REQUEST, "not a deletable znode path");
            }
            let creds = viewer.credentials.as_deref().unwrap_or("");
            match actions::delete(shared, path, creds).await {
                Ok(()) => done(format!("deleted {path}")),
                Err(e) => error(StatusCode::CONFLICT, e),
            }
        }
        "close_session" => {
            let Some(id) = param(query, "session").and_then(sessions::parse_id) else {
                return error(StatusCode::BAD_REQUEST, "session=0x... is required");
            };
            match actions::close_session(shared, id) {
                Ok(()) => done(format!("closing session 0x{id:x}")),
                Err(e) => error(StatusCode::CONFLICT, e),
            }
        }
        "snapshot" => match crate::migrate::snapshot_body(&shared.replica).await {
            Some((body, zxid)) => done(format!(
                "snapshot of {} bytes taken at zxid 0x{zxid:x}",
                body.len()
            )),
            None => error(
                StatusCode::SERVICE_UNAVAILABLE,
                "this member is not serving",
            ),
        },
        "yield_leadership" | "request_leadership" | "transfer" => {
            use crate::raft::{ask_transfer, Asked, Transfer};
            let what = match action {
                "yield_leadership" => Transfer::Yield,
                "request_leadership" => Transfer::Request,
                _ => match param(query, "to").and_then(|v| v.parse().ok()) {
                    Some(id) => Transfer::To(id),
                    None => return error(StatusCode::BAD_REQUEST, "to=<server id> is required"),
                },
            };
            match ask_transfer(&shared.replica, what) {
                Asked::Started(t) => done(t.trim().to_string()),
                Asked::Refused(t) => error(StatusCode::CONFLICT, t.trim()),
                Asked::NotServing => error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "this member is not serving",
                ),
            }
        }
        _ => error(StatusCode::NOT_FOUND, "no such action"),
    }
}
