//! ZooKeeper 3.8's AdminServer (`admin.enableServer`, `admin.serverPort` 8080,
//! `admin.serverAddress`, `admin.commandURL` `/commands`): every 3.8 command under its full
//! and short names with ZooKeeper's JSON fields ([`commands`], [`reports`]), so probes,
//! exporters and scripts written for ZooKeeper's AdminServer read zooraft unchanged.
//!
//! Beside them:
//! - `GET /ready`, ClickHouse Keeper's readiness probe: 200 while the member serves, 503
//!   otherwise (ZooKeeper's `ruok` answers 200 with an `error` field when not serving, which
//!   an HTTP probe cannot tell apart);
//! - `<commandURL>/snapshot` and `POST <commandURL>/restore` (ZooKeeper 3.9's): an online
//!   backup, the stream `zooraft backup` reads (`migrate::backup`), and the whole ensemble
//!   put back to one (`restore.rs`), with 3.9's auth (`auth.rs`);
//! - `<commandURL>/yield_leadership` and `/request_leadership`: leader transfer, the `ydld`
//!   and `rqld` words (`raft::transfer`), for rolling restarts driven by scripts.
//!
//! Auth as in ZooKeeper: the reporting commands need none; snapshot and restore take 3.9's
//! rule, the leader transfers the super digest once one is set (`auth.rs`). Methods: GET and HEAD
//! for every command (POST too for those that change something); anything else is 405.
//! Unknown commands answer 200 with ZooKeeper's `Unknown command: <name>` error. TLS with
//! the `ssl.quorum.*` stores under `admin.forceHttps` or `admin.portUnification`, as
//! ZooKeeper's.

mod auth;
mod commands;
mod reports;
mod restore;

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::console;
pub use super::http::Mode;
use super::http::{self, Body, PeerSubject};
use crate::migrate;
use crate::net::{Auth, ClientPort};
use crate::raft::{ask_transfer, Asked, Transfer};
use crate::tls::{Acceptor, ClientAuth, TlsSettings};

/// zooraft's leader-transfer commands and what each asks for.
const TRANSFERS: [(&str, Transfer); 2] = [
    ("yield_leadership", Transfer::Yield),
    ("request_leadership", Transfer::Request),
];

/// The snapshot command (ZooKeeper 3.9's name and short name).
const SNAPSHOT: [&str; 2] = ["snapshot", "snap"];
/// The restore command (ZooKeeper 3.9's name and short name).
const RESTORE: [&str; 2] = ["restore", "rest"];

/// What the AdminServer keeps between requests.
struct Admin {
    auth: Auth,
    restores: restore::Gate,
    /// The console's samples and timeline (`console::history`).
    history: Arc<console::History>,
}

/// How the port speaks, from `admin.forceHttps` / `admin.portUnification`.
pub fn mode(config: &crate::config::Config) -> Result<Mode, crate::tls::TlsError> {
    let admin = &config.admin;
    if !admin.tls() {
        return Ok(http::Mode::Plain);
    }
    let mut settings = TlsSettings::parse(&config.security, "ssl.quorum.")?;
    // ZooKeeper 3.8's AdminServer asks for no client certificate (members' quorum TLS
    // needs one); one offered is checked against the trust store.
    settings.client_auth = ClientAuth::Want;
    let acceptor = Arc::new(Acceptor::new("admin TLS", settings)?);
    Ok(if admin.force_https {
        http::Mode::Tls(acceptor)
    } else {
        http::Mode::Unified(acceptor)
    })
}

/// Serves the AdminServer until shutdown.
pub async fn serve(
    shared: Arc<ClientPort>,
    listener: TcpListener,
    mode: http::Mode,
    shutdown: watch::Receiver<bool>,
) {
    // Checked at start-up with the client ports: this cannot fail here.
    let admin = Arc::new(Admin {
        auth: Auth::from_config(shared.replica.config()).unwrap_or_default(),
        restores: restore::Gate::default(),
        history: console::start_history(shared.clone(), shutdown.clone()),
    });
    let handler: http::Handler = Arc::new(move |request, peer| {
        let (shared, admin) = (shared.clone(), admin.clone());
        Box::pin(async move { respond(&shared, &admin, request, peer).await })
    });
    http::serve("admin", listener, mode, handler, shutdown).await;
}

fn json_answer(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut text = serde_json::to_string_pretty(body).unwrap_or_default();
    text.push('\n');
    http::answer(status, "application/json", text)
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    http::answer(status, "text/plain", body)
}

/// The query string's `key=value` pairs (undecoded but for `+` and `%XX`).
fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let bytes = s.replace('+', " ").into_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
                (b'%', Some(b)) => {
                    out.push(b);
                    i += 3;
                }
                (b, _) => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

async fn respond(
    shared: &ClientPort,
    admin: &Admin,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Body> {
    let method = request.method().clone();
    if method != Method::GET && method != Method::HEAD && method != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET, HEAD or POST\n");
    }
    let path = request.uri().path().to_string();
    if path == "/ready" {
        return ready(shared);
    }
    if path == console::PREFIX || path.starts_with("/console/") {
        return console_answer(shared, admin, &request, peer).await;
    }
    let base = shared.replica.config().admin.command_url.as_str();
    let Some(rest) = path.strip_prefix(base) else {
        return text(
            StatusCode::NOT_FOUND,
            "not found: the commands are under admin.commandURL\n",
        );
    };
    let name = rest.trim_start_matches('/').trim_end_matches('/');
    if name.is_empty() {
        return index(base);
    }
    let caller = auth::Caller {
        headers: request.headers(),
        subject: request.extensions().get::<PeerSubject>(),
        peer,
    };
    let auth = &admin.auth;
    if SNAPSHOT.contains(&name) || RESTORE.contains(&name) {
        if let Err(refusal) = auth::root_all(shared, auth, &caller) {
            return refused(name, refusal);
        }
        if SNAPSHOT.contains(&name) {
            return snapshot(shared).await;
        }
        if method != Method::POST {
            return text(StatusCode::METHOD_NOT_ALLOWED, "POST\n");
        }
        return restore::restore(shared, &admin.restores, name, request).await;
    }
    if let Some((full, what)) = TRANSFERS.iter().find(|(n, _)| *n == name) {
        if !auth::super_digest(auth, &caller) {
            let body = commands::closed(
                name,
                Err("send Authorization: digest super:<password>".into()),
            );
            return json_answer(StatusCode::UNAUTHORIZED, &body);
        }
        return transfer(shared, full, *what);
    }
    let Some(command) = commands::find(name) else {
        let body = commands::closed(name, Err(format!("Unknown command: {name}")));
        return json_answer(StatusCode::OK, &body);
    };
    // ZooKeeper 3.8's commands are GET only; POST is for the ones that change things.
    if method == Method::POST && !commands::CHANGING.contains(&command.names[0]) {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD\n");
    }
    let query = query_pairs(request.uri().query());
    let asked = commands::Asked {
        shared,
        query: &query,
    };
    json_answer(StatusCode::OK, &commands::run(command, &asked))
}

/// ZooKeeper's answer to a request its auth rule refused.
fn refused(name: &str, refusal: auth::Refusal) -> Response<Body> {
    let body = commands::closed(name, Err(refusal.message().into()));
    json_answer(refusal.status(), &body)
}

/// The browser console ([`console`]): the super user is one who sent the super digest's
/// credentials (never anyone when no super digest is set, unlike the commands above).
async fn console_answer(
    shared: &ClientPort,
    admin: &Admin,
    request: &Request<Incoming>,
    peer: SocketAddr,
) -> Response<Body> {
    if request.uri().path() == console::PREFIX {
        let mut r = text(StatusCode::MOVED_PERMANENTLY, "see /console/\n");
        r.headers_mut().insert(
            hyper::header::LOCATION,
            HeaderValue::from_static("/console/"),
        );
        return r;
    }
    let caller = auth::Caller {
        headers: request.headers(),
        subject: request.extensions().get::<PeerSubject>(),
        peer,
    };
    let viewer = console::Viewer {
        super_user: admin.auth.super_digest.is_some() && auth::super_digest(&admin.auth, &caller),
        credentials: request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().strip_prefix("digest "))
            .map(|c| c.trim().to_string()),
    };
    let query = query_pairs(request.uri().query());
    console::respond(
        shared,
        &admin.history,
        request.method(),
        request.uri().path(),
        &query,
        &viewer,
    )
    .await
}

/// `/ready`: 200 while serving, 503 otherwise, with the role and whether there is a leader.
fn ready(shared: &ClientPort) -> Response<Body> {
    let replica = &shared.replica;
    let serving = replica.is_serving();
    let has_leader = replica
        .status
        .leader
        .load(std::sync::atomic::Ordering::Relaxed)
        != 0
        || replica.config().is_standalone();
    let body = json!({
        "status": if serving { "ok" } else { "fail" },
        "details": {"role": replica.status.role().name(), "hasLeader": has_leader},
    });
    let status = if serving {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json_answer(status, &body)
}

/// The list of commands, as links (ZooKeeper's page at the command URL).
fn index(base: &str) -> Response<Body> {
    let mut page = String::new();
    let names = commands::COMMANDS.iter().map(|c| c.names[0]);
    let ours = [SNAPSHOT[0], RESTORE[0], TRANSFERS[0].0, TRANSFERS[1].0];
    for name in names.chain(ours) {
        page.push_str(&format!("<a href=\"{base}/{name}\">{name}</a>\n<br/>\n"));
    }
    http::answer(StatusCode::OK, "text/html", page)
}

/// The online backup: the snapshot stream, its zxid in a header.
async fn snapshot(shared: &ClientPort) -> Response<Body> {
    match migrate::snapshot_body(&shared.replica).await {
        Some((body, zxid)) => {
            let mut r = http::answer(StatusCode::OK, "application/octet-stream", body);
            if let Ok(v) = HeaderValue::from_str(&format!("{zxid:#x}")) {
                r.headers_mut().insert("X-Zooraft-Zxid", v);
            }
            r
        }
        None => {
            let body = commands::closed(SNAPSHOT[0], Err(commands::NOT_SERVING.into()));
            json_answer(StatusCode::SERVICE_UNAVAILABLE, &body)
        }
    }
}

/// A leader transfer: `command`, `error` and the words' `message`.
fn transfer(shared: &ClientPort, command: &str, what: Transfer) -> Response<Body> {
    let (status, error, message) = match ask_transfer(&shared.replica, what) {
        Asked::Started(text) => (StatusCode::OK, None, text),
        Asked::Refused(text) => (StatusCode::OK, Some(text.trim().to_string()), text),
        Asked::NotServing => (
            StatusCode::SERVICE_UNAVAILABLE,
            Some(commands::NOT_SERVING.to_string()),
            commands::NOT_SERVING.to_string(),
        ),
    };
    let mut body = commands::closed(command, error.map_or(Ok(Default::default()), Err));
    body["message"] = message.trim().into();
    json_answer(status, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body of an answer as bytes.
    fn body_bytes(r: Response<Body>) -> bytes::Bytes {
        use http_body_util::BodyExt;
        let rt = tokio::runtime::Builder::new_current_thread().build();
        match rt.expect("a runtime").block_on(r.into_body().collect()) {
            Ok(collected) => collected.to_bytes(),
            Err(never) => match never {},
        }
    }

    #[test]
    fn query_strings_are_decoded() {
        let q = query_pairs(Some("traceMask=12&a=b%20c+d&flag"));
        assert_eq!(
            q,
            vec![
                ("traceMask".into(), "12".into()),
                ("a".into(), "b c d".into()),
                ("flag".into(), String::new()),
            ]
        );
        assert!(query_pairs(None).is_empty());
        assert_eq!(query_pairs(Some("x=%zz%4"))[0].1, "%zz%4");
    }

    #[test]
    fn the_index_links_every_command() {
        let body = body_bytes(index("/commands"));
        let page = String::from_utf8_lossy(&body);
        for c in commands::COMMANDS {
            assert!(page.contains(&format!("/commands/{}\"", c.names[0])));
        }
        assert!(page.contains("/commands/snapshot\""));
    }
}
