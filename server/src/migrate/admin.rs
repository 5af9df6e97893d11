//! The admin server (`admin.serverPort`, `admin.serverAddress`): ZooKeeper's AdminServer
//! style `/commands/<name>` over HTTP, for what an operator tool needs from a running
//! member and cannot get from a four-letter word (those are unauthenticated text on the
//! client port):
//!
//! - `/commands/snapshot`: an online backup (`backup.rs`), the path ZooKeeper 3.9's admin
//!   server gives its own streaming snapshot;
//! - `/commands/yield_leadership` and `/commands/request_leadership`: leader transfer, the
//!   `ydld` and `rqld` words (`raft::transfer`), answered in JSON as ZooKeeper's admin
//!   commands are (`command`, `error`, and here `message`), for rolling restarts driven by
//!   scripts that already speak to the AdminServer.
//!
//! When `DigestAuthenticationProvider.superDigest` is set, every request must carry
//! `Authorization: digest super:<password>` (checked like a client's `addauth digest`).
//! Any method is accepted; the query string is ignored.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::backup;
use crate::config::Config;
use crate::raft::{ask_transfer, Asked, Replica, Transfer};
use crate::state::acl;

/// The leader-transfer commands and what each asks for.
const TRANSFERS: [(&str, Transfer); 2] = [
    ("yield_leadership", Transfer::Yield),
    ("request_leadership", Transfer::Request),
];

/// Reads an HTTP request head (bounded): the request line and headers.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// Whether the request may use the admin server.
fn authorized(head: &str, config: &Config, peer: SocketAddr) -> bool {
    let Some(super_digest) = config.super_digest.as_deref() else {
        return true;
    };
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case("authorization"))
        .filter_map(|(_, v)| v.trim().strip_prefix("digest "))
        .any(|creds| {
            acl::authenticate(
                "digest",
                creds.trim().as_bytes(),
                peer.ip(),
                Some(super_digest),
            )
            .is_ok_and(|ids| ids.contains(&acl::super_id()))
        })
}

/// A JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A leader-transfer command's answer: status and JSON body.
fn transfer(replica: &Replica, command: &str, what: Transfer) -> (&'static str, String) {
    let (status, error, message) = match ask_transfer(replica, what) {
        Asked::Started(text) => ("200 OK", None, text),
        Asked::Refused(text) => ("200 OK", Some(text.trim().to_string()), text),
        Asked::NotServing => {
            let text = "This ZooKeeper instance is not currently serving requests";
            (
                "503 Service Unavailable",
                Some(text.to_string()),
                text.into(),
            )
        }
    };
    let error = error.map_or_else(|| "null".to_string(), |e| json_string(&e));
    let body = format!(
        "{{\"command\":{},\"error\":{error},\"message\":{}}}\n",
        json_string(command),
        json_string(message.trim())
    );
    (status, body)
}

async fn answer(replica: Arc<Replica>, mut stream: TcpStream, peer: SocketAddr) {
    let head = match tokio::time::timeout(Duration::from_secs(5), read_head(&mut stream)).await {
        Ok(Some(h)) => h,
        _ => return,
    };
    let target = head.split_whitespace().nth(1).unwrap_or("");
    let path = target.split('?').next().unwrap_or("");
    let command = path.strip_prefix("/commands/").unwrap_or("");
    let text = |s: &'static str| ("text/plain", Bytes::from_static(s.as_bytes()));
    let (status, (kind, body), zxid) = if !authorized(&head, replica.config(), peer) {
        (
            "401 Unauthorized",
            text("send Authorization: digest super:<password>\n"),
            0,
        )
    } else if path == backup::PATH {
        match backup::snapshot_body(&replica).await {
            Some((b, zxid)) => ("200 OK", ("application/octet-stream", b), zxid),
            None => ("500 Internal Server Error", text(""), 0),
        }
    } else if let Some((_, what)) = TRANSFERS.iter().find(|(name, _)| *name == command) {
        let (status, body) = transfer(&replica, command, *what);
        (status, ("application/json", Bytes::from(body)), 0)
    } else {
        (
            "404 Not Found",
            text("served here: /commands/snapshot, /commands/yield_leadership, /commands/request_leadership\n"),
            0,
        )
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nX-Zooraft-Zxid: {zxid:#x}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&body).await;
    let _ = stream.shutdown().await;
}

/// Serves the admin commands until shutdown.
pub async fn serve_admin(
    replica: Arc<Replica>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                tokio::spawn(answer(replica.clone(), stream, peer));
            }
            _ = shutdown.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }
}
