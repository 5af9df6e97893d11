//! TLS on the client port: `secureClientPort`, and `client.portUnification` (TLS and plain
//! on one port, told apart by the first byte, as ZooKeeper's dual-mode handler does).
//!
//! The handshake happens here, before the connection code sees a byte; a client
//! certificate's subject becomes the connection's `x509` id (and `super` when it is
//! `X509AuthenticationProvider.superUser`), as ZooKeeper's X509AuthenticationProvider does.
//! A failed handshake (plain bytes, an untrusted, expired or missing certificate, a client
//! that stops half-way) is logged, counted as ZooKeeper counts it (`auth_failed_count` and
//! `unsuccessful_handshake`, plus `tls_handshake_failed`), and the socket closed.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use jute::Id;
use tokio::net::{TcpListener, TcpStream};

use super::auth::{Auth, ConnAuth};
use super::client_port::ClientPort;
use super::connection;
use super::metrics::AuthFailure;
use crate::config::Config;
use crate::tls::{self, Acceptor};

/// How long a client may take over the TLS handshake (and to send its first byte on a
/// unified port).
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a listener accepts, and the authentication settings its connections use.
#[derive(Clone)]
pub struct Listen {
    pub mode: Mode,
    pub auth: Arc<Auth>,
}

/// Plain, TLS, or both.
#[derive(Clone)]
pub enum Mode {
    /// Plain TCP (`clientPort`).
    Plain,
    /// TLS only (`secureClientPort`).
    Secure(Arc<Acceptor>),
    /// Both, told apart by the first byte (`client.portUnification`).
    Unified(Arc<Acceptor>),
}

/// A TLS record of type handshake starts with this byte; a ZooKeeper frame (a length
/// below 0x16000000) or a four-letter word never does.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Serves one accepted connection as its listener says.
///
/// A connection's task lives as long as its session stays connected, and its size is the
/// largest state of everything awaited inline in it: the TLS paths (their timers, the
/// handshake) and the connection itself are each boxed, so that an idle plain session holds
/// a few hundred bytes of task rather than several kilobytes (memory per session).
pub async fn serve(shared: Arc<ClientPort>, stream: TcpStream, peer: SocketAddr, listen: &Listen) {
    let _ = stream.set_nodelay(true);
    match &listen.mode {
        Mode::Plain => plain(shared, stream, peer, listen).await,
        Mode::Secure(a) => Box::pin(secure(shared, stream, peer, listen, a, false)).await,
        Mode::Unified(a) => Box::pin(secure(shared, stream, peer, listen, a, true)).await,
    }
}

/// A connection on a TLS port (`unified`: plain bytes are served plain).
async fn secure(
    shared: Arc<ClientPort>,
    stream: TcpStream,
    peer: SocketAddr,
    listen: &Listen,
    acceptor: &Acceptor,
    unified: bool,
) {
    // Look at the first byte: anything but a TLS handshake record is plain bytes, served
    // plain on a unified port and dropped without a word (no TLS alert, as ZooKeeper's
    // Netty handler does) on a secure one.
    let mut first = [0u8; 1];
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => {}
        Ok(Ok(1)) if unified => return plain(shared, stream, peer, listen).await,
        Ok(Ok(1)) => return refused(&shared, peer, "plain bytes on the TLS port"),
        Ok(Ok(_)) => return,
        Ok(Err(e)) => return refused(&shared, peer, &e.to_string()),
        Err(_) => return refused(&shared, peer, "nothing sent within 10 s"),
    }
    let config = acceptor.config();
    // Boxed: the handshake's state (a whole rustls connection) would otherwise be part of
    // every connection's task, plain ones included, for as long as they live.
    let accept = Box::pin(tokio_rustls::TlsAcceptor::from(config).accept(stream));
    let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, accept).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return refused(&shared, peer, &e.to_string()),
        Err(_) => return refused(&shared, peer, "no handshake within 10 s"),
    };
    let ids = x509_ids(&listen.auth, stream.get_ref().1.peer_certificates());
    if let Some(id) = ids.first() {
        tracing::debug!(%peer, "TLS client authenticated as x509:{}", id.id);
    }
    let (rd, wr) = tokio::io::split(stream);
    let guard = ConnAuth::new(listen.auth.clone(), peer.ip());
    Box::pin(connection::serve(
        shared,
        Box::new(rd),
        Box::new(wr),
        peer,
        (ids, true),
        guard,
    ))
    .await;
}

async fn plain(shared: Arc<ClientPort>, stream: TcpStream, peer: SocketAddr, listen: &Listen) {
    let (rd, wr) = stream.into_split();
    let guard = ConnAuth::new(listen.auth.clone(), peer.ip());
    Box::pin(connection::serve(
        shared,
        Box::new(rd),
        Box::new(wr),
        peer,
        (Vec::new(), false),
        guard,
    ))
    .await;
}

fn refused(shared: &ClientPort, peer: SocketAddr, why: &str) {
    let m = &shared.metrics;
    m.tls_handshake_failed.fetch_add(1, Ordering::Relaxed);
    m.unsuccessful_handshakes.fetch_add(1, Ordering::Relaxed);
    m.auth_failure(AuthFailure::X509);
    tracing::warn!(%peer, "TLS handshake refused: {why}");
}

/// The ids a verified client certificate gives a connection.
fn x509_ids(auth: &Auth, chain: Option<&[rustls::pki_types::CertificateDer<'_>]>) -> Vec<Id> {
    tls::x509_id(chain).map_or_else(Vec::new, |subject| auth.x509_ids(subject))
}

/// Why the client ports cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("{0}")]
    Setting(String),
    #[error("client TLS: {0}")]
    Tls(#[from] tls::TlsError),
    #[error("cannot listen for clients on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

fn flag(config: &Config, key: &str) -> Result<bool, BindError> {
    config.security_flag(key).map_err(BindError::Setting)
}

async fn bind(addr: SocketAddr, listen: Listen) -> Result<(TcpListener, Listen), BindError> {
    let l = TcpListener::bind(addr)
        .await
        .map_err(|source| BindError::Bind { addr, source })?;
    Ok((l, listen))
}

/// Opens the client ports zoo.cfg asks for: `clientPort` (or this member's `;clientPort`)
/// at `plain` (TLS too with `client.portUnification=true`) unless only `secureClientPort`
/// is set, and
/// `secureClientPort` (TLS only). The first one is the member's client address.
pub async fn bind_client_ports(
    config: &Config,
    plain: SocketAddr,
) -> Result<Vec<(TcpListener, Listen)>, BindError> {
    let secure_port = match config.security.get("secureClientPort") {
        None => None,
        Some(v) => Some(v.trim().parse::<u16>().map_err(|_| {
            BindError::Setting(format!("secureClientPort: '{v}' is not a port number"))
        })?),
    };
    let unified = flag(config, "client.portUnification")?;
    let acceptor = if secure_port.is_some() || unified {
        let settings = tls::TlsSettings::parse(&config.security, "ssl.")?;
        Some(Arc::new(Acceptor::new("client TLS", settings)?))
    } else {
        None
    };
    let auth = Arc::new(Auth::from_config(config).map_err(BindError::Setting)?);
    let listen = |mode| Listen {
        mode,
        auth: auth.clone(),
    };
    let mut out = Vec::new();
    let member_port = config
        .members
        .get(&config.my_id)
        .is_some_and(|m| m.client_port.is_some());
    if config.client_port_given || member_port || secure_port.is_none() {
        let mode = match (&acceptor, unified) {
            (Some(a), true) => Mode::Unified(a.clone()),
            _ => Mode::Plain,
        };
        out.push(bind(plain, listen(mode)).await?);
    }
    if let (Some(port), Some(a)) = (secure_port, &acceptor) {
        let ip = match config.security.get("secureClientPortAddress") {
            None => plain.ip(),
            Some(v) => v.trim().parse().map_err(|_| {
                BindError::Setting(format!(
                    "secureClientPortAddress: '{v}' is not an IP address"
                ))
            })?,
        };
        out.push(bind(SocketAddr::new(ip, port), listen(Mode::Secure(a.clone()))).await?);
    }
    Ok(out)
}
