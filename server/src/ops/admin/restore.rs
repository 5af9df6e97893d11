//! `POST <commandURL>/restore` (`rest`), ZooKeeper 3.9's command: the body is a snapshot,
//! and the ensemble's tree and sessions become the ones it holds.
//!
//! As in ZooKeeper: POST only, the auth of `snapshot` (checked before this is reached, see
//! `auth.rs`), `admin.restore.enabled` (503 when off), at most one per
//! `admin.rateLimiterIntervalInMS` (429), an empty body a 400, and the answer's
//! `last_zxid`. What differs, because the state is replicated: one request restores every
//! member, at the same entry of the log, and `last_zxid` is that entry's zxid, above every
//! zxid before it (see `state::restore` for what clients see).
//!
//! The body is the answer of the `snapshot` command (zooraft's snapshot stream) or a file
//! `zooraft backup` wrote; it is read whole (up to [`MAX_BODY`]) and checked before
//! anything is proposed, so a damaged or foreign body is a 400 and changes nothing.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use parking_lot::Mutex;
use serde_json::json;

use super::super::http::Body;
use super::reports::Fields;
use super::{commands, json_answer};
use crate::migrate;
use crate::net::ClientPort;
use crate::raft::RestoreError;
use crate::state::tree::TreeOptions;

/// The largest body taken: the restore travels as one log entry, inside one peer frame.
pub const MAX_BODY: usize = 768 << 20;
/// How long the member waits to see its restore applied.
const APPLY_WAIT: Duration = Duration::from_secs(120);

/// ZooKeeper's rate limiter for `restore`: one per interval.
#[derive(Default)]
pub(super) struct Gate {
    last: Mutex<Option<Instant>>,
}

impl Gate {
    /// Takes the one restore of this interval, if it is free.
    fn take(&self, interval: Duration) -> bool {
        let mut last = self.last.lock();
        let now = Instant::now();
        if last.is_some_and(|t| now.saturating_duration_since(t) < interval) {
            return false;
        }
        *last = Some(now);
        true
    }
}

fn answer(status: StatusCode, name: &str, result: Result<i64, String>) -> Response<Body> {
    let body = match result {
        Ok(zxid) => {
            let mut fields = Fields::default();
            fields.insert("last_zxid".into(), json!(zxid));
            commands::closed(name, Ok(fields))
        }
        Err(e) => commands::closed(name, Err(e)),
    };
    json_answer(status, &body)
}

/// Serves an authorized `restore` request.
pub(super) async fn restore(
    shared: &ClientPort,
    gate: &Gate,
    name: &str,
    request: Request<Incoming>,
) -> Response<Body> {
    let replica = &shared.replica;
    let config = replica.config();
    if !config.admin.restore_enabled {
        let off = "Restore command is disabled (admin.restore.enabled)".to_string();
        return answer(StatusCode::SERVICE_UNAVAILABLE, name, Err(off));
    }
    if config.migrate_from_zookeeper {
        let observing = "not while this member observes a ZooKeeper ensemble".to_string();
        return answer(StatusCode::SERVICE_UNAVAILABLE, name, Err(observing));
    }
    if !replica.is_serving() {
        let not = commands::NOT_SERVING.to_string();
        return answer(StatusCode::SERVICE_UNAVAILABLE, name, Err(not));
    }
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            let large = format!("the snapshot is larger than {MAX_BODY} bytes");
            return answer(StatusCode::PAYLOAD_TOO_LARGE, name, Err(large));
        }
        Err(e) => {
            let broken = format!("the request body could not be read: {e}");
            return answer(StatusCode::BAD_REQUEST, name, Err(broken));
        }
    };
    if body.is_empty() {
        let empty = "no snapshot in the request body".to_string();
        return answer(StatusCode::BAD_REQUEST, name, Err(empty));
    }
    let interval = Duration::from_millis(config.admin.rate_limit_ms);
    if !gate.take(interval) {
        let limited = format!("at most one restore per {interval:?}");
        return answer(StatusCode::TOO_MANY_REQUESTS, name, Err(limited));
    }
    let options = TreeOptions {
        extended_types: config.extended_types,
    };
    let checked = tokio::task::spawn_blocking(move || checked_payload(body, options)).await;
    let payload = match checked {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return answer(StatusCode::BAD_REQUEST, name, Err(e)),
        Err(e) => return answer(StatusCode::INTERNAL_SERVER_ERROR, name, Err(e.to_string())),
    };
    match replica.restore(payload, APPLY_WAIT).await {
        Ok(zxid) => answer(StatusCode::OK, name, Ok(zxid)),
        Err(e @ RestoreError::Stopping) => {
            answer(StatusCode::SERVICE_UNAVAILABLE, name, Err(e.to_string()))
        }
        Err(e @ RestoreError::TimedOut(_)) => {
            answer(StatusCode::GATEWAY_TIMEOUT, name, Err(e.to_string()))
        }
    }
}

fn checked_payload(body: Bytes, options: TreeOptions) -> Result<Bytes, String> {
    migrate::restore_payload(body, options).map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_restore_per_interval() {
        let gate = Gate::default();
        assert!(gate.take(Duration::from_secs(300)));
        assert!(!gate.take(Duration::from_secs(300)));
        assert!(gate.take(Duration::ZERO), "an interval of 0 limits nothing");
    }
}
