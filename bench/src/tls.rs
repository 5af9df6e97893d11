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
use std::process::Command;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;

/// Why the certificates or the TLS client could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("openssl {args}: {message} (install Debian's openssl)")]
    Openssl { args: String, message: String },
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

const EXTENSIONS: &str = "basicConstraints=CA:FALSE\n\
    keyUsage=digitalSignature,keyEncipherment\n\
    extendedKeyUsage=serverAuth,clientAuth\n\
    subjectAltName=IP:127.0.0.1,DNS:localhost\n";

fn openssl(dir: &Path, args: &[&str]) -> Result<(), TlsError> {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .map_err(|e| TlsError::Openssl {
            args: args.join(" "),
            message: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(TlsError::Openssl {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

impl Pki {
    /// A CA and a server and a client certificate it signed (RSA 2048, valid for
    /// 127.0.0.1 and localhost), under `dir`.
    pub fn make(dir: &Path) -> Result<Pki, TlsError> {
        std::fs::create_dir_all(dir).map_err(|source| TlsError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let write = |name: &str, text: &[u8]| {
            std::fs::write(dir.join(name), text).map_err(|source| TlsError::Read {
                path: dir.join(name),
                source,
            })
        };
        write("ext.cnf", EXTENSIONS.as_bytes())?;
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "3650",
                "-subj",
                "/CN=zooraft-bench-ca",
            ],
        )?;
        for (serial, name) in [("2", "server"), ("3", "client")] {
            let (key, csr, cert) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.pem"),
            );
            let subject = format!("/CN={name}");
            openssl(
                dir,
                &[
                    "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj",
                    &subject,
                ],
            )?;
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-set_serial",
                    serial,
                    "-out",
                    &cert,
                    "-days",
                    "365",
                    "-extfile",
                    "ext.cnf",
                ],
            )?;
        }
        let mut store = read(&dir.join("server.key"))?;
        store.extend(read(&dir.join("server.pem"))?);
        store.extend(read(&dir.join("ca.pem"))?);
        write("server-store.pem", &store)?;
        Ok(Pki {
            ca: dir.join("ca.pem"),
            server_store: dir.join("server-store.pem"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
        })
    }

    /// zoo.cfg lines for a TLS client port on `secure_port`, the same for both servers
    /// (ZooKeeper also needs its Netty factory: [`crate::server`] adds it).
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
    pub fn client(&self) -> Result<TlsClient, TlsError> {
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
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Rustls(e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs(&self.client_cert)?, key)
            .map_err(|e| TlsError::Rustls(format!("client certificate: {e}")))?;
        Ok(TlsClient {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }
}

/// A TLS client configuration, shared by every session of a run (cheap to clone).
#[derive(Clone)]
pub struct TlsClient {
    connector: tokio_rustls::TlsConnector,
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
        self.connector.connect(name, tcp).await
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
        let client = pki.client().expect("TLS client");
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
        assert!(matches!(pki.client(), Err(TlsError::Read { .. })));
    }
}
