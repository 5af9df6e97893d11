//! TLS between members: `sslQuorum=true` with the `ssl.quorum.*` keys, as ZooKeeper reads
//! them. Both sides present a certificate and check the other's against the quorum trust
//! store (mutual TLS; `ssl.quorum.clientAuth` defaults to `need`), so a member with an
//! untrusted certificate can neither send to nor receive from the ensemble. A refused
//! handshake is logged on both sides with the peer and the reason.
//!
//! The transport asks this file for a connection's read side (inbound) or write side
//! (outbound); without `sslQuorum` they are the TCP stream's own halves.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::config::Config;
use crate::tls::{Acceptor, Connector, TlsError, TlsSettings};

/// A peer connection's inbound side.
pub type PeerRead = Box<dyn AsyncRead + Send + Unpin>;
/// A peer connection's outbound side.
pub type PeerWrite = Box<dyn AsyncWrite + Send + Unpin>;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The quorum's TLS configurations, server side and client side.
pub struct QuorumTls {
    acceptor: Acceptor,
    connector: Connector,
}

impl QuorumTls {
    /// `Some` when zoo.cfg says `sslQuorum=true`.
    pub fn from_config(config: &Config) -> Result<Option<Arc<QuorumTls>>, TlsError> {
        let on = config
            .security
            .get("sslQuorum")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if !on {
            return Ok(None);
        }
        let settings = TlsSettings::parse(&config.security, "ssl.quorum.")?;
        Ok(Some(Arc::new(QuorumTls {
            acceptor: Acceptor::new("quorum TLS", settings.clone())?,
            connector: Connector::new("quorum TLS", settings)?,
        })))
    }
}

fn refused(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string())
}

/// The read side of an accepted peer connection, after the TLS handshake if any.
pub async fn inbound(
    tls: &Option<Arc<QuorumTls>>,
    stream: TcpStream,
    addr: SocketAddr,
) -> std::io::Result<PeerRead> {
    let Some(tls) = tls else {
        // The whole stream: dropping its write half would send a FIN the peer (or a proxy
        // between) takes for the end of the connection.
        return Ok(Box::new(stream));
    };
    let accept = tokio_rustls::TlsAcceptor::from(tls.acceptor.config()).accept(stream);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept).await {
        Ok(Ok(s)) => Ok(Box::new(s)),
        Ok(Err(e)) => {
            tracing::warn!(%addr, "quorum TLS: refused a member connection from {addr}: {e}");
            Err(refused(e))
        }
        Err(_) => {
            tracing::warn!(%addr, "quorum TLS: no handshake from {addr} within 10 s");
            Err(refused("handshake timed out"))
        }
    }
}

/// The write side of a connection to member `to`, after the TLS handshake if any.
pub async fn outbound(
    tls: &Option<Arc<QuorumTls>>,
    stream: TcpStream,
    to: u64,
    addr: SocketAddr,
) -> std::io::Result<PeerWrite> {
    let Some(tls) = tls else {
        return Ok(Box::new(stream));
    };
    let name = ServerName::IpAddress(addr.ip().into());
    let connect = tokio_rustls::TlsConnector::from(tls.connector.config()).connect(name, stream);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, connect).await {
        Ok(Ok(s)) => Ok(Box::new(s)),
        Ok(Err(e)) => {
            tracing::warn!(peer = to, %addr, "quorum TLS: member {to} at {addr} refused: {e}");
            Err(refused(e))
        }
        Err(_) => Err(refused("handshake timed out")),
    }
}
