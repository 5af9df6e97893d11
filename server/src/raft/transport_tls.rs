//! TLS between members: `sslQuorum=true` with the `ssl.quorum.*` keys, as ZooKeeper reads
//! them. Both sides present a certificate and check the other's against the quorum trust
//! store (mutual TLS; `ssl.quorum.clientAuth` defaults to `need`), so a member with an
//! untrusted certificate can neither send to nor receive from the ensemble. A refused
//! handshake is logged on both sides with the peer and the reason.
//!
//! Hostname verification (`ssl.quorum.hostnameVerification`, default true) is ZooKeeper's:
//! on both ends, the other member's certificate must name its address (see
//! `tls/host.rs`). Dialling, it is checked inside the handshake (the other member gets an
//! alert); accepting, right after it (rustls's client verifier does not know the peer's
//! address), so the dialling member only sees its connection closed, and says so.
//!
//! `portUnification=true` accepts plain and TLS members on the peer port (told apart by the
//! first byte) and dials TLS only with `sslQuorum`: that is how an ensemble rolls from plain
//! to TLS one member at a time (ZooKeeper's procedure: `portUnification` everywhere, then
//! `sslQuorum` member by member, then `portUnification` off).
//!
//! The transport asks this file for a connection to a member, accepted (inbound) or dialled
//! (outbound), after the TLS handshake if any; it carries frames both ways (see
//! `transport.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::config::Config;
use crate::tls::{self, Acceptor, Connector, TlsError, TlsSettings};

/// A connection to a member, either way: TCP, or TLS over TCP.
pub trait PeerIo: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> PeerIo for T {}
pub type PeerStream = Box<dyn PeerIo>;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The quorum's TLS configurations, server side and client side.
pub struct QuorumTls {
    acceptor: Acceptor,
    /// `sslQuorum`: members are dialled over TLS. Without it (`portUnification` alone) they
    /// are dialled plain, and TLS is only accepted.
    connector: Option<Connector>,
    /// `portUnification`: plain members are accepted beside TLS ones.
    unified: bool,
    /// `ssl.quorum.hostnameVerification`: a member's certificate must name its address.
    verify_host: bool,
}

/// (As ZooKeeper reads these: anything but true is false.)
fn flag(config: &Config, key: &str) -> bool {
    config.security_flag(key).unwrap_or(false)
}

impl QuorumTls {
    /// `Some` when zoo.cfg says `sslQuorum=true` or `portUnification=true`.
    pub fn from_config(config: &Config) -> Result<Option<Arc<QuorumTls>>, TlsError> {
        let ssl = flag(config, "sslQuorum");
        let unified = flag(config, "portUnification");
        if !ssl && !unified {
            return Ok(None);
        }
        let settings = TlsSettings::parse(&config.security, "ssl.quorum.")?;
        let connector = if ssl {
            Some(Connector::new("quorum TLS", settings.clone())?)
        } else {
            None
        };
        if unified {
            tracing::info!(
                "quorum port unification: members are accepted over TLS and plain; dialled {}",
                if ssl { "over TLS" } else { "plain" }
            );
        }
        Ok(Some(Arc::new(QuorumTls {
            verify_host: settings.hostname_verification,
            acceptor: Acceptor::new("quorum TLS", settings)?,
            connector,
            unified,
        })))
    }
}

fn refused(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string())
}

/// A TLS record of type handshake starts with this byte; a plain connection starts with
/// the hello frame's length (a few bytes), never with it.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Whether a handshake failed because the other side sent a fatal alert (it refused us).
fn is_alert(e: &std::io::Error) -> bool {
    e.to_string().starts_with("received fatal alert")
}

impl QuorumTls {
    /// The client side's configuration when members are dialled over TLS (`sslQuorum`):
    /// what a member observing a ZooKeeper ensemble dials its leader with.
    pub fn dial_config(&self) -> Option<Arc<rustls::ClientConfig>> {
        self.connector.as_ref().map(Connector::config)
    }
}

/// Whether connections to members are TLS (`sslQuorum`).
pub fn dials_tls(tls: &Option<Arc<QuorumTls>>) -> bool {
    tls.as_ref().is_some_and(|t| t.connector.is_some())
}

/// Checks (off the runtime's threads: it may do a reverse lookup) that the peer's leaf
/// certificate names `addr`, when `ssl.quorum.hostnameVerification` asks for it.
async fn check_host(
    tls: &QuorumTls,
    chain: Option<&[CertificateDer<'_>]>,
    addr: SocketAddr,
) -> Result<(), String> {
    if !tls.verify_host {
        return Ok(());
    }
    let Some(leaf) = chain.and_then(|c| c.first()) else {
        return Err("no certificate to check the host name against".into());
    };
    let leaf = leaf.clone().into_owned();
    let ip = addr.ip();
    tokio::task::spawn_blocking(move || tls::verify_peer_host(leaf.as_ref(), ip))
        .await
        .map_err(|e| e.to_string())?
}

/// An accepted peer connection, after the TLS handshake if any.
pub async fn inbound(
    tls: &Option<Arc<QuorumTls>>,
    stream: TcpStream,
    addr: SocketAddr,
) -> std::io::Result<PeerStream> {
    let Some(tls) = tls else {
        // The whole stream: dropping its write half would send a FIN the peer (or a proxy
        // between) takes for the end of the connection.
        return Ok(Box::new(stream));
    };
    if tls.unified {
        let mut first = [0u8; 1];
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await {
            Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => {}
            Ok(Ok(1)) => {
                tracing::debug!(%addr, "quorum port unification: a plain member connection");
                return Ok(Box::new(stream));
            }
            Ok(Ok(_)) => return Err(refused("closed before its first byte")),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(refused("nothing sent within 10 s")),
        }
    }
    let accept = tokio_rustls::TlsAcceptor::from(tls.acceptor.config()).accept(stream);
    let s = match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            if is_alert(&e) {
                tracing::warn!(%addr, "quorum TLS: a member connection from {addr} failed: the member refused our certificate ({e})");
            } else {
                tracing::warn!(%addr, "quorum TLS: refused a member connection from {addr}: {e}");
            }
            return Err(refused(e));
        }
        Err(_) => {
            tracing::warn!(%addr, "quorum TLS: no handshake from {addr} within 10 s");
            return Err(refused("handshake timed out"));
        }
    };
    if let Err(e) = check_host(tls, s.get_ref().1.peer_certificates(), addr).await {
        tracing::warn!(%addr, "quorum TLS: refused a member connection from {addr}: hostname verification failed: {e}");
        return Err(refused(e));
    }
    Ok(Box::new(s))
}

/// A connection dialled to member `to`, after the TLS handshake if any.
pub async fn outbound(
    tls: &Option<Arc<QuorumTls>>,
    stream: TcpStream,
    to: u64,
    addr: SocketAddr,
) -> std::io::Result<PeerStream> {
    let Some(connector) = tls.as_ref().and_then(|t| t.connector.as_ref()) else {
        return Ok(Box::new(stream));
    };
    let name = ServerName::IpAddress(addr.ip().into());
    let connect = tokio_rustls::TlsConnector::from(connector.config()).connect(name, stream);
    // The certificate's host is checked in the handshake (ZooKeeper's way, see
    // `tls/host.rs`), so a refusal reaches the other member as an alert.
    let s = match tokio::time::timeout(HANDSHAKE_TIMEOUT, connect).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::warn!(peer = to, %addr, "quorum TLS: member {to} at {addr} refused: {e}");
            return Err(refused(e));
        }
        Err(_) => return Err(refused("handshake timed out")),
    };
    Ok(Box::new(s))
}
