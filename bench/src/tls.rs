//! TLS for the TLS variants of the workloads: one set of certificates made with the
//! `openssl` command (a CA, a server certificate, a client certificate), the zoo.cfg lines
//! that give both servers the same secure client port set-up, and the rustls client the
//! load generator connects with.
//!
//! Both servers get the same files and the same settings (PEM key store and trust store,
//! `ssl.clientAuth=need`, so every connection is mutual TLS, as a deployment that uses TLS
//! for identity has it). Apache ZooKeeper serves TLS only with its Netty connection factory,
//! so its TLS-enabled instance runs Netty on the plain port too: the TLS cost reported for
//! ZooKeeper is TLS over Netty against plain Netty, both on the same process.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use zooraft_kit::pki::{Ca, PkiError};

/// Why the certificates or the TLS client could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Rustls(String),
}

/// Certificates made for one comparison.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca: PathBuf,
    /// The server's key, certificate and the CA's, in one PEM file (ZooKeeper's PEM store).
    pub server_store: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

impl Pki {
    /// A CA and a server and a client certificate it signed (RSA 2048, valid for
    /// 127.0.0.1 and localhost), under `dir`: the kit's PKI, which the TLS tests use.
    pub fn make(dir: &Path) -> Result<Pki, TlsError> {
        let ca = Ca::try_new(dir, "zooraft-bench-ca")?;
        let server = ca.try_issue("server", "/CN=server")?;
        let client = ca.try_issue("client", "/CN=client")?;
        Ok(Pki {
            ca: ca.cert.clone(),
            server_store: server.pem_store,
            client_cert: client.cert,
            client_key: client.key,
        })
    }

    /// zoo.cfg lines for a TLS client port on `secure_port`, the same for both servers
    /// (ZooKeeper also needs its Netty factory: [`crate::server::start_member`] adds it).
    pub fn server_config(&self, secure_port: u16) -> Vec<String> {
        vec![
            format!("secureClientPort={secure_port}"),
            "secureClientPortAddress=127.0.0.1".into(),
            format!("ssl.keyStore.location={}", self.server_store.display()),
            "ssl.keyStore.type=PEM".into(),
            format!("ssl.trustStore.location={}", self.ca.display()),
            "ssl.trustStore.type=PEM".into(),
            "ssl.clientAuth=need".into(),
        ]
    }

    /// The load generator's TLS client: trusts the CA, presents the client certificate.
    /// With `resume`, it keeps the sessions (TLS 1.2 session ids and tickets, TLS 1.3
    /// tickets) servers give it and offers them on the next connection, as rustls clients
    /// do by default; without, every connection is a full handshake.
    pub fn client(&self, resume: bool) -> Result<TlsClient, TlsError> {
        let certs = |path: &Path| -> Result<Vec<CertificateDer<'static>>, TlsError> {
            rustls_pemfile::certs(&mut read(path)?.as_slice())
                .collect::<Result<_, _>>()
                .map_err(|e| TlsError::Rustls(format!("{}: {e}", path.display())))
        };
        let mut roots = rustls::RootCertStore::empty();
        for c in certs(&self.ca)? {
            roots
                .add(c)
                .map_err(|e| TlsError::Rustls(format!("CA certificate: {e}")))?;
        }
        let key: PrivateKeyDer<'static> =
            rustls_pemfile::private_key(&mut read(&self.client_key)?.as_slice())
                .map_err(|e| TlsError::Rustls(format!("client key: {e}")))?
                .ok_or_else(|| TlsError::Rustls("no key in the client key file".into()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Rustls(e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs(&self.client_cert)?, key)
            .map_err(|e| TlsError::Rustls(format!("client certificate: {e}")))?;
        if !resume {
            config.resumption = rustls::client::Resumption::disabled();
        }
        Ok(TlsClient {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            handshakes: Arc::new(HandshakeCounter::default()),
            resume,
        })
    }
}

/// A TLS client configuration, shared by every session of a run (cheap to clone).
#[derive(Clone)]
pub struct TlsClient {
    connector: tokio_rustls::TlsConnector,
    handshakes: Arc<HandshakeCounter>,
    resume: bool,
}

/// What the handshakes since the last [`TlsClient::take_handshakes`] negotiated.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Handshakes {
    pub tls12_full: u64,
    pub tls12_resumed: u64,
    pub tls13_full: u64,
    pub tls13_resumed: u64,
    /// The cipher suites negotiated, by rustls name.
    pub suites: std::collections::BTreeMap<String, u64>,
}

impl Handshakes {
    pub fn total(&self) -> u64 {
        self.tls12_full + self.tls12_resumed + self.tls13_full + self.tls13_resumed
    }
}

impl std::fmt::Display for Handshakes {
    /// `TLS 1.3: 120 full, 3400 resumed; TLS13_AES_256_GCM_SHA384`: the versions seen only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        for (v, full, resumed) in [
            ("1.2", self.tls12_full, self.tls12_resumed),
            ("1.3", self.tls13_full, self.tls13_resumed),
        ] {
            if full + resumed > 0 {
                parts.push(format!("TLS {v}: {full} full, {resumed} resumed"));
            }
        }
        if parts.is_empty() {
            return f.write_str("no handshake");
        }
        let suites: Vec<&str> = self.suites.keys().map(String::as_str).collect();
        write!(f, "{}; {}", parts.join(", "), suites.join(", "))
    }
}

#[derive(Default)]
struct HandshakeCounter(std::sync::Mutex<Handshakes>);

impl HandshakeCounter {
    fn lock(&self) -> std::sync::MutexGuard<'_, Handshakes> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TlsClient {
    /// The TLS handshake over an open TCP connection to `addr` (an IP address: the
    /// certificates name 127.0.0.1).
    pub async fn connect(
        &self,
        addr: SocketAddr,
        tcp: TcpStream,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let name = ServerName::IpAddress(addr.ip().into());
        let stream = self.connector.connect(name, tcp).await?;
        let conn = stream.get_ref().1;
        let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        let tls13 = conn.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
        let suite = conn.negotiated_cipher_suite().map(|s| s.suite());
        let mut h = self.handshakes.lock();
        *match (tls13, resumed) {
            (false, false) => &mut h.tls12_full,
            (false, true) => &mut h.tls12_resumed,
            (true, false) => &mut h.tls13_full,
            (true, true) => &mut h.tls13_resumed,
        } += 1;
        if let Some(suite) = suite {
            *h.suites.entry(format!("{suite:?}")).or_default() += 1;
        }
        Ok(stream)
    }

    /// A client with the same settings and counters but a session store of its own, as a
    /// separate client process would have: what it resumes is only what its own earlier
    /// connections were given. (One store shared by many concurrent loops would hand a
    /// TLS 1.2 session id to all of them at once, while a TLS 1.3 ticket serves one
    /// connection and rustls keeps 8 per server, so most concurrent TLS 1.3 connects would
    /// find none: a bench artefact, not a property of either server.)
    pub fn with_own_sessions(&self) -> TlsClient {
        let mut config = rustls::ClientConfig::clone(self.connector.config());
        if self.resume {
            config.resumption = rustls::client::Resumption::in_memory_sessions(8);
        }
        TlsClient {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            handshakes: self.handshakes.clone(),
            resume: self.resume,
        }
    }

    /// The handshakes counted since the last call (every session of every clone).
    pub fn take_handshakes(&self) -> Handshakes {
        std::mem::take(&mut *self.handshakes.lock())
    }

    /// Whether this client offers sessions back to servers.
    pub fn resumes(&self) -> bool {
        self.resume
    }
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsClient")
    }
}

impl PartialEq for TlsClient {
    /// Two clients are the same when they share one configuration.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(self.connector.config(), other.connector.config())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_and_client_are_made() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pki = Pki::make(dir.path()).expect("certificates");
        let client = pki.client(true).expect("TLS client");
        assert!(client.resumes() && !pki.client(false).expect("client").resumes());
        assert_eq!(client, client.clone());
        let cfg = pki.server_config(2281);
        assert!(cfg.contains(&"secureClientPort=2281".to_string()));
        assert!(cfg.iter().any(|l| l == "ssl.clientAuth=need"));
        let store = std::fs::read_to_string(&pki.server_store).expect("store");
        assert!(store.contains("PRIVATE KEY") && store.matches("CERTIFICATE-----").count() == 4);
    }

    #[test]
    fn a_missing_key_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pki = Pki {
            ca: dir.path().join("none.pem"),
            server_store: dir.path().join("none"),
            client_cert: dir.path().join("none"),
            client_key: dir.path().join("none"),
        };
        assert!(matches!(pki.client(true), Err(TlsError::Read { .. })));
    }
}
