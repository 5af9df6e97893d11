//! TLS settings and rustls configurations, for the client port (`ssl.*`) and between
//! members (`ssl.quorum.*`), read from ZooKeeper's zoo.cfg keys.
//!
//! A leaf beside `config.rs`: it turns the raw keys that `Config` keeps in `security` into
//! rustls configurations, and re-reads the stores when their files change (ZooKeeper needs a
//! restart for that; a renewed certificate should not). The network layer and the peer
//! transport only ask [`Acceptor::config`] / [`Connector::config`] for the current one.
//!
//! | file | concern |
//! |------|---------|
//! | `mod.rs` | settings, the reloading server and client configurations |
//! | `stores.rs` | PEM and PKCS12 key and trust stores; JKS refused |
//! | `pkcs12.rs` | reading PKCS12 files and encrypted PKCS#8 keys |
//! | `subject.rs` | a certificate subject in RFC 2253 form (the `x509` id) |
//! | `host.rs` | hostname verification between members |
//!
//! Without a trust store, certificates are checked against the system's CA store (Debian:
//! `/etc/ssl/certs`; `SSL_CERT_FILE`/`SSL_CERT_DIR` override it), as ZooKeeper falls back
//! to the JDK's default CAs.

mod host;
mod pkcs12;
mod stores;
pub mod subject;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::{Mutex, RwLock};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::DigitallySignedStruct;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion};

pub use host::verify_peer_host;
pub use stores::StoreType;
use stores::{load_identity, load_trusted, Store};

/// How often the store files are checked for changes (on use, not by a timer).
const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// TLS 1.2 sessions kept for resumption by session id (about 2 KiB each with a client
/// certificate).
const SESSION_CACHE: usize = 4096;

/// Why TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{0}")]
    Setting(String),
    #[error("{0}")]
    Store(String),
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// `ssl.clientAuth`: whether a client must present a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Want,
    Need,
}

/// One set of TLS keys (`ssl.` for clients, `ssl.quorum.` between members), parsed.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    key_store: Option<Store>,
    trust_store: Option<Store>,
    pub client_auth: ClientAuth,
    versions: Vec<&'static SupportedProtocolVersion>,
    cipher_suites: Option<Vec<String>>,
    /// `hostnameVerification`: checked between members by the peer transport (see
    /// `host.rs`), not on the client port (as ZooKeeper).
    pub hostname_verification: bool,
}

fn get<'a>(keys: &'a BTreeMap<String, String>, prefix: &str, name: &str) -> Option<&'a str> {
    keys.get(&format!("{prefix}{name}"))
        .or_else(|| keys.get(&format!("zookeeper.{prefix}{name}")))
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
}

fn store(
    keys: &BTreeMap<String, String>,
    prefix: &str,
    name: &str,
) -> Result<Option<Store>, TlsError> {
    let Some(location) = get(keys, prefix, &format!("{name}.location")) else {
        return Ok(None);
    };
    let path = PathBuf::from(location);
    let key = format!("{prefix}{name}");
    let password = match (
        get(keys, prefix, &format!("{name}.password")),
        get(keys, prefix, &format!("{name}.passwordPath")),
    ) {
        (Some(p), _) => Some(p.to_string()),
        (None, Some(file)) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| TlsError::Setting(format!("{key}.passwordPath: {file}: {e}")))?
                .trim_end_matches(['\r', '\n'])
                .to_string(),
        ),
        (None, None) => None,
    };
    let kind = StoreType::resolve(
        &format!("{key}.type"),
        get(keys, prefix, &format!("{name}.type")),
        &path,
    )?;
    Ok(Some(Store {
        key,
        path,
        password,
        kind,
    }))
}

fn protocol(key: &str, name: &str) -> Result<&'static SupportedProtocolVersion, TlsError> {
    match name.trim() {
        "TLSv1.2" => Ok(&rustls::version::TLS12),
        "TLSv1.3" => Ok(&rustls::version::TLS13),
        "TLS" => Ok(&rustls::version::TLS13),
        other => Err(TlsError::Setting(format!(
            "{key}: '{other}' is not supported (TLSv1.2 and TLSv1.3 are)"
        ))),
    }
}

impl TlsSettings {
    /// Reads the keys under `prefix` (`ssl.` or `ssl.quorum.`).
    pub fn parse(keys: &BTreeMap<String, String>, prefix: &str) -> Result<TlsSettings, TlsError> {
        let client_auth = match get(keys, prefix, "clientAuth").map(str::to_ascii_lowercase) {
            None => ClientAuth::Need,
            Some(v) => match v.as_str() {
                "none" => ClientAuth::None,
                "want" => ClientAuth::Want,
                "need" => ClientAuth::Need,
                _ => {
                    return Err(TlsError::Setting(format!(
                        "{prefix}clientAuth: '{v}' is not none, want or need"
                    )))
                }
            },
        };
        // ZooKeeper 3.8 offers TLSv1.2 unless told otherwise; offering 1.3 too is safe.
        let versions = match (
            get(keys, prefix, "enabledProtocols"),
            get(keys, prefix, "protocol"),
        ) {
            (Some(list), _) => list
                .split(',')
                .filter(|p| !p.trim().is_empty())
                .map(|p| protocol(&format!("{prefix}enabledProtocols"), p))
                .collect::<Result<Vec<_>, _>>()?,
            (None, Some("TLSv1.3")) => vec![&rustls::version::TLS13],
            (None, Some(p)) => {
                protocol(&format!("{prefix}protocol"), p)?;
                vec![&rustls::version::TLS13, &rustls::version::TLS12]
            }
            (None, None) => vec![&rustls::version::TLS13, &rustls::version::TLS12],
        };
        let cipher_suites = get(keys, prefix, "ciphersuites").map(|l| {
            l.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        });
        let hostname_verification = match get(keys, prefix, "hostnameVerification") {
            None => true,
            Some(v) => !v.eq_ignore_ascii_case("false"),
        };
        Ok(TlsSettings {
            key_store: store(keys, prefix, "keyStore")?,
            trust_store: store(keys, prefix, "trustStore")?,
            client_auth,
            versions,
            cipher_suites,
            hostname_verification,
        })
    }

    fn files(&self) -> Vec<PathBuf> {
        [&self.key_store, &self.trust_store]
            .into_iter()
            .flatten()
            .map(|s| s.path.clone())
            .collect()
    }

    /// The cipher suites in our order of preference, which the server follows (not the
    /// client's): `ssl.ciphersuites` in the order given (as Java servers take the list), or
    /// else every suite rustls offers with AES-128-GCM first. All of them are AEAD suites
    /// with forward secrecy; AES-128-GCM (TLS 1.3's mandatory suite, the one ZooKeeper 3.8
    /// picks, and what Go and BoringSSL servers prefer) hashes with SHA-256, which CPUs
    /// compute in hardware, where the AES-256 suite's SHA-384 runs in software: it was a
    /// tenth of the server's CPU per resumed TLS 1.3 connect.
    fn provider(&self) -> Result<Arc<CryptoProvider>, TlsError> {
        let mut provider = rustls::crypto::ring::default_provider();
        match &self.cipher_suites {
            Some(wanted) => {
                provider
                    .cipher_suites
                    .retain(|s| wanted.iter().any(|w| suite_named(s.suite(), w)));
                if provider.cipher_suites.is_empty() {
                    return Err(TlsError::Setting(format!(
                        "ssl.ciphersuites: none of {wanted:?} is supported"
                    )));
                }
                provider
                    .cipher_suites
                    .sort_by_key(|s| wanted.iter().position(|w| suite_named(s.suite(), w)));
            }
            None => provider
                .cipher_suites
                .sort_by_key(|s| !format!("{:?}", s.suite()).contains("AES_128_GCM")),
        }
        Ok(Arc::new(provider))
    }

    /// The trust store's CAs, or the system's when no trust store is set.
    fn roots(&self) -> Result<RootCertStore, TlsError> {
        let Some(store) = &self.trust_store else {
            return system_roots();
        };
        let mut roots = RootCertStore::empty();
        for cert in load_trusted(store)? {
            roots
                .add(cert)
                .map_err(|e| TlsError::Store(format!("{}: {e}", store.key)))?;
        }
        Ok(roots)
    }

    /// A server configuration from the stores as they are now.
    pub fn server_config(&self) -> Result<ServerConfig, TlsError> {
        let key_store = self.key_store.as_ref().ok_or_else(|| {
            TlsError::Setting("TLS needs ssl.keyStore.location (the server's certificate)".into())
        })?;
        let identity = load_identity(key_store)?;
        let provider = self.provider()?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&self.versions)?;
        let builder = match self.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            auth => {
                let roots = self.roots()?;
                let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let v = if auth == ClientAuth::Want {
                    v.allow_unauthenticated()
                } else {
                    v
                };
                builder.with_client_cert_verifier(
                    v.build()
                        .map_err(|e| TlsError::Setting(format!("client verifier: {e}")))?,
                )
            }
        };
        let mut config = builder.with_single_cert(identity.chain, identity.key)?;
        config.ignore_client_order = true;
        // Session resumption a whole client population can use: rustls's default keeps
        // 256 sessions in memory, which a few hundred reconnecting clients churn through
        // (each TLS 1.3 handshake stores two tickets), leaving later clients with a full
        // handshake (an RSA or ECDSA signature here, certificate checks). Stateless
        // tickets (AEAD-sealed with keys that rotate every 6 hours, valid 12) cost no
        // server memory and work for any number of clients; the cache remains for TLS 1.2
        // clients that resume by session id. Both belong to this configuration: a reload
        // (new certificates, perhaps a new trust store) starts with fresh keys and an
        // empty cache, so no session verified against the old CAs resumes under the new.
        config.ticketer = rustls::crypto::ring::Ticketer::new()?;
        config.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE);
        Ok(config)
    }

    /// A client configuration (member to member): our certificate if a key store is set,
    /// the trust store's CAs (or the system's) to check the other side's chain, and with
    /// `hostnameVerification` the member's address (the IP address given as server name)
    /// checked as ZooKeeper checks it (`verify_peer_host`).
    pub fn client_config(&self) -> Result<ClientConfig, TlsError> {
        let roots = self.roots()?;
        let provider = self.provider()?;
        let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| TlsError::Setting(format!("server verifier: {e}")))?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&self.versions)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(MemberHost {
                inner,
                check_host: self.hostname_verification,
            }));
        Ok(match &self.key_store {
            Some(store) => {
                let identity = load_identity(store)?;
                builder.with_client_auth_cert(identity.chain, identity.key)?
            }
            None => builder.with_no_client_auth(),
        })
    }
}

/// The system's CA certificates (no trust store configured).
fn system_roots() -> Result<RootCertStore, TlsError> {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::warn!("system CA store: {e}");
    }
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(TlsError::Store(
            "no trust store is set and the system's CA store (/etc/ssl/certs, or \
             SSL_CERT_FILE) has no usable certificate"
                .into(),
        ));
    }
    tracing::info!("no trust store set: checking certificates against the system's {added} CAs");
    Ok(roots)
}

/// Whether `name` (Java's name, as in ZooKeeper's `ssl.ciphersuites`, or rustls's) names
/// `suite`: Java calls the TLS 1.3 suites `TLS_AES_...` where rustls says `TLS13_AES_...`.
fn suite_named(suite: rustls::CipherSuite, name: &str) -> bool {
    let ours = format!("{suite:?}");
    ours == name || ours.replacen("TLS13_", "TLS_", 1) == name
}

/// Between members the chain must be valid and trusted, and (with `hostnameVerification`)
/// the certificate must name the member's address as ZooKeeper checks it: IP address, then
/// reverse lookup (`host.rs`), rather than rustls's check of the name dialled.
#[derive(Debug)]
struct MemberHost {
    inner: Arc<WebPkiServerVerifier>,
    check_host: bool,
}

/// Why a member's certificate does not name its address.
#[derive(Debug, thiserror::Error)]
#[error("hostname verification failed: {0}")]
struct HostMismatch(String);

impl ServerCertVerifier for MemberHost {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Ok(_)
            | Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => {}
            Err(other) => return Err(other),
        }
        if let (true, ServerName::IpAddress(ip)) = (self.check_host, server_name) {
            // A reverse lookup may block: keep it off the runtime's task queue (the
            // verifier runs inside the handshake's poll, on the dialling task).
            let ip = std::net::IpAddr::from(*ip);
            host::off_worker(|| verify_peer_host(end_entity.as_ref(), ip)).map_err(|e| {
                rustls::Error::InvalidCertificate(rustls::CertificateError::Other(
                    rustls::OtherError(Arc::new(HostMismatch(e))),
                ))
            })?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// When the store files were last changed, to notice a renewed certificate.
fn stamps(files: &[PathBuf]) -> Vec<Option<(SystemTime, u64)>> {
    files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len())))
        })
        .collect()
}

/// A configuration that follows its files: rebuilt when they change, kept as it was (with
/// an error logged) when the new files do not make a valid one.
///
/// Every TLS accept (and member dial) asks for it, so the common path only clones an
/// `Arc` under a read lock. The check of the files (two `stat`s a second) and a rebuild
/// are done by whichever caller finds the check due and the check lock free; callers
/// meanwhile keep getting the current configuration instead of queueing behind the files.
struct Reloading<T> {
    what: &'static str,
    settings: TlsSettings,
    build: fn(&TlsSettings) -> Result<T, TlsError>,
    current: RwLock<Arc<T>>,
    check: Mutex<ReloadCheck>,
}

struct ReloadCheck {
    checked: Instant,
    stamps: Vec<Option<(SystemTime, u64)>>,
}

impl<T> Reloading<T> {
    fn new(
        what: &'static str,
        settings: TlsSettings,
        build: fn(&TlsSettings) -> Result<T, TlsError>,
    ) -> Result<Self, TlsError> {
        let stamps = stamps(&settings.files());
        let current = Arc::new(build(&settings)?);
        Ok(Reloading {
            what,
            settings,
            build,
            current: RwLock::new(current),
            check: Mutex::new(ReloadCheck {
                checked: Instant::now(),
                stamps,
            }),
        })
    }

    fn get(&self) -> Arc<T> {
        if let Some(mut check) = self.check.try_lock() {
            if check.checked.elapsed() >= RELOAD_CHECK {
                check.checked = Instant::now();
                let now = stamps(&self.settings.files());
                if now != check.stamps {
                    check.stamps = now;
                    match (self.build)(&self.settings) {
                        Ok(c) => {
                            tracing::info!("{}: certificates reloaded from {:?}", self.what, self.settings.files());
                            *self.current.write() = Arc::new(c);
                        }
                        Err(e) => tracing::error!(
                            "{}: the changed certificate files are not usable, keeping the previous ones: {e}",
                            self.what
                        ),
                    }
                }
            }
        }
        self.current.read().clone()
    }
}

/// The server side of TLS: the current rustls configuration, reloaded as the files change.
pub struct Acceptor(Reloading<ServerConfig>);

impl Acceptor {
    pub fn new(what: &'static str, settings: TlsSettings) -> Result<Acceptor, TlsError> {
        Ok(Acceptor(Reloading::new(
            what,
            settings,
            TlsSettings::server_config,
        )?))
    }

    pub fn config(&self) -> Arc<ServerConfig> {
        self.0.get()
    }
}

/// The client side of TLS (a member dialling another), reloaded as the files change.
pub struct Connector(Reloading<ClientConfig>);

impl Connector {
    pub fn new(what: &'static str, settings: TlsSettings) -> Result<Connector, TlsError> {
        Ok(Connector(Reloading::new(
            what,
            settings,
            TlsSettings::client_config,
        )?))
    }

    pub fn config(&self) -> Arc<ClientConfig> {
        self.0.get()
    }
}

/// The `x509` id of a peer's certificate chain: the leaf's subject in RFC 2253 form.
pub fn x509_id(chain: Option<&[CertificateDer<'_>]>) -> Option<String> {
    chain?.first().and_then(|c| subject::rfc2253(c.as_ref()))
}

/// zoo.cfg security keys from pairs, for unit tests here and in the network layer.
#[cfg(test)]
pub fn keys(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_as_zookeeper() {
        let s = TlsSettings::parse(&keys(&[]), "ssl.").unwrap();
        assert_eq!(s.client_auth, ClientAuth::Need);
        assert!(s.hostname_verification);
        assert_eq!(s.versions.len(), 2);
        assert!(s.server_config().is_err());
    }

    #[test]
    fn parses_the_keys() {
        let k = keys(&[
            ("ssl.quorum.clientAuth", "WANT"),
            ("ssl.quorum.enabledProtocols", "TLSv1.3"),
            ("ssl.quorum.keyStore.location", "/x/k.p12"),
            ("ssl.quorum.keyStore.password", "pw"),
            ("ssl.quorum.hostnameVerification", "false"),
            ("ssl.clientAuth", "none"),
        ]);
        let s = TlsSettings::parse(&k, "ssl.quorum.").unwrap();
        assert_eq!(s.client_auth, ClientAuth::Want);
        assert_eq!(s.versions.len(), 1);
        assert!(!s.hostname_verification);
        let ks = s.key_store.unwrap();
        assert_eq!(
            (ks.kind, ks.password.as_deref()),
            (StoreType::Pkcs12, Some("pw"))
        );
        let c = TlsSettings::parse(&k, "ssl.").unwrap();
        assert_eq!(c.client_auth, ClientAuth::None);
        assert!(c.key_store.is_none());
    }

    #[test]
    fn bad_values_are_named() {
        let e = TlsSettings::parse(&keys(&[("ssl.clientAuth", "maybe")]), "ssl.").unwrap_err();
        assert!(e.to_string().contains("ssl.clientAuth"), "{e}");
        let e = TlsSettings::parse(&keys(&[("ssl.protocol", "SSLv3")]), "ssl.").unwrap_err();
        assert!(e.to_string().contains("SSLv3"), "{e}");
        let s = TlsSettings::parse(&keys(&[("ssl.ciphersuites", "TLS_NOPE")]), "ssl.").unwrap();
        assert!(s.provider().is_err());
        let s = TlsSettings::parse(
            &keys(&[("ssl.ciphersuites", "TLS_AES_128_GCM_SHA256, TLS_NOPE")]),
            "ssl.",
        )
        .unwrap();
        assert_eq!(s.provider().unwrap().cipher_suites.len(), 1);
    }

    #[test]
    fn suites_in_preference_order() {
        let names = |s: &TlsSettings| -> Vec<String> {
            let p = s.provider().unwrap();
            p.cipher_suites
                .iter()
                .map(|c| format!("{:?}", c.suite()))
                .collect()
        };
        let default = names(&TlsSettings::parse(&keys(&[]), "ssl.").unwrap());
        assert_eq!(default[0], "TLS13_AES_128_GCM_SHA256");
        assert!(default.len() > 3, "{default:?}");
        assert!(default.iter().any(|n| n == "TLS13_AES_256_GCM_SHA384"));
        let given = TlsSettings::parse(
            &keys(&[(
                "ssl.ciphersuites",
                "TLS_CHACHA20_POLY1305_SHA256,TLS_AES_256_GCM_SHA384",
            )]),
            "ssl.",
        )
        .unwrap();
        assert_eq!(
            names(&given),
            ["TLS13_CHACHA20_POLY1305_SHA256", "TLS13_AES_256_GCM_SHA384"]
        );
    }
}
