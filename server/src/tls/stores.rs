//! Key and trust stores as ZooKeeper 3.8 reads them: PEM and PKCS12 files, by
//! `ssl.*.type` or by the file's extension. A JKS store (Java's own format, which no
//! library outside the JVM reads) is refused with the `keytool` conversion to PKCS12.
//!
//! A PEM key store is one file holding the PKCS#8 private key and the certificate chain; a
//! PEM trust store holds the CA certificates. A PKCS12 trust store may have no password and
//! no MAC.

use std::path::{Path, PathBuf};

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::pkcs12;
use super::TlsError;

/// A store's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    Pem,
    Pkcs12,
    Jks,
    Bcfks,
}

impl StoreType {
    /// `ssl.*.type` if set, else the file's extension (ZooKeeper's
    /// `KeyStoreFileType.fromPropertyValueOrFileName`).
    pub fn resolve(key: &str, value: Option<&str>, path: &Path) -> Result<StoreType, TlsError> {
        let name = match value {
            Some(v) if !v.trim().is_empty() => v.trim().to_ascii_uppercase(),
            _ => path
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default()
                .to_ascii_uppercase(),
        };
        match name.as_str() {
            "PEM" | "CRT" | "CER" => Ok(StoreType::Pem),
            "PKCS12" | "P12" | "PFX" => Ok(StoreType::Pkcs12),
            "JKS" => Ok(StoreType::Jks),
            "BCFKS" => Ok(StoreType::Bcfks),
            _ => Err(TlsError::Setting(format!(
                "{key}: cannot tell the type of {} (set it to PEM or PKCS12)",
                path.display()
            ))),
        }
    }
}

/// One configured store: `ssl.keyStore.*` or `ssl.trustStore.*`.
#[derive(Debug, Clone)]
pub struct Store {
    /// `ssl.keyStore` or `ssl.trustStore` (with the quorum prefix if any), for messages.
    pub key: String,
    pub path: PathBuf,
    pub password: Option<String>,
    pub kind: StoreType,
}

/// A server or client identity: the certificate chain and its private key.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

fn read(store: &Store) -> Result<Vec<u8>, TlsError> {
    let bytes = std::fs::read(&store.path).map_err(|e| {
        TlsError::Store(format!(
            "{}.location: cannot read {}: {e}",
            store.key,
            store.path.display()
        ))
    })?;
    // A JKS file starts with 0xFEEDFEED whatever its name says.
    if store.kind == StoreType::Jks || bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) {
        return Err(refuse_java_format(store, "JKS"));
    }
    if store.kind == StoreType::Bcfks {
        return Err(refuse_java_format(store, "BCFKS"));
    }
    Ok(bytes)
}

fn refuse_java_format(store: &Store, format: &str) -> TlsError {
    let p = store.path.display();
    TlsError::Store(format!(
        "{}.location: {p} is a {format} store, which zooraft cannot read; convert it to PKCS12 \
         with `keytool -importkeystore -srckeystore {p} -srcstoretype {format} -destkeystore \
         {p}.p12 -deststoretype PKCS12` and set {}.location to the .p12 file (or use PEM)",
        store.key, store.key
    ))
}

fn bad(store: &Store, what: &str) -> TlsError {
    TlsError::Store(format!(
        "{}.location: {}: {what}",
        store.key,
        store.path.display()
    ))
}

/// Reads the certificate chain and private key of a key store.
pub fn load_identity(store: &Store) -> Result<Identity, TlsError> {
    let bytes = read(store)?;
    match store.kind {
        StoreType::Pkcs12 => {
            let password = store.password.as_deref().unwrap_or_default();
            let mut contents = pkcs12::read(&bytes, password).map_err(|e| bad(store, &e))?;
            if contents.keys.len() != 1 {
                return Err(bad(
                    store,
                    &format!("{} private keys (one is needed)", contents.keys.len()),
                ));
            }
            if contents.certs.is_empty() {
                return Err(bad(store, "no certificate"));
            }
            Ok(Identity {
                chain: contents.certs,
                key: PrivateKeyDer::Pkcs8(contents.keys.remove(0)),
            })
        }
        _ => {
            let mut chain = Vec::new();
            let mut key = None;
            for item in rustls_pemfile::read_all(&mut bytes.as_slice()) {
                match item.map_err(|e| bad(store, &format!("not valid PEM: {e}")))? {
                    rustls_pemfile::Item::X509Certificate(c) => chain.push(c),
                    rustls_pemfile::Item::Pkcs8Key(k) => key = Some(PrivateKeyDer::Pkcs8(k)),
                    rustls_pemfile::Item::Pkcs1Key(k) => key = Some(PrivateKeyDer::Pkcs1(k)),
                    rustls_pemfile::Item::Sec1Key(k) => key = Some(PrivateKeyDer::Sec1(k)),
                    _ => {}
                }
            }
            if key.is_none() {
                key = encrypted_key(store, &bytes)?;
            }
            let key = key.ok_or_else(|| bad(store, "no private key in the PEM file"))?;
            if chain.is_empty() {
                return Err(bad(store, "no certificate in the PEM file"));
            }
            Ok(Identity { chain, key })
        }
    }
}

/// Reads the trusted (CA) certificates of a trust store.
pub fn load_trusted(store: &Store) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(store)?;
    let certs: Vec<CertificateDer<'static>> = match store.kind {
        StoreType::Pkcs12 => {
            let password = store.password.as_deref().unwrap_or_default();
            pkcs12::read(&bytes, password)
                .map_err(|e| bad(store, &e))?
                .certs
        }
        _ => rustls_pemfile::certs(&mut bytes.as_slice())
            .collect::<Result<_, _>>()
            .map_err(|e| bad(store, &format!("not valid PEM: {e}")))?,
    };
    if certs.is_empty() {
        return Err(bad(store, "no certificate in the trust store"));
    }
    Ok(certs)
}

/// A PEM `ENCRYPTED PRIVATE KEY` (PKCS#8, PBES2), decrypted with the store's password.
fn encrypted_key(store: &Store, bytes: &[u8]) -> Result<Option<PrivateKeyDer<'static>>, TlsError> {
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let text = String::from_utf8_lossy(bytes);
    let Some(start) = text.find(BEGIN) else {
        return Ok(None);
    };
    let body = &text[start + BEGIN.len()..];
    let body = &body[..body
        .find(END)
        .ok_or_else(|| bad(store, "unterminated PEM key"))?];
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    let der = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64)
        .map_err(|e| bad(store, &format!("encrypted key: {e}")))?;
    let password = store.password.as_deref().ok_or_else(|| {
        bad(
            store,
            "the private key is encrypted: set the key store's password",
        )
    })?;
    let key = pkcs12::decrypt_pkcs8(&der, password)
        .map_err(|e| bad(store, &format!("encrypted key: {e}")))?;
    Ok(Some(PrivateKeyDer::Pkcs8(key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(kind: StoreType, path: &Path) -> Store {
        Store {
            key: "ssl.keyStore".into(),
            path: path.to_path_buf(),
            password: None,
            kind,
        }
    }

    #[test]
    fn type_from_setting_or_extension() {
        let p = Path::new("/x/keys.p12");
        assert_eq!(StoreType::resolve("k", None, p).unwrap(), StoreType::Pkcs12);
        assert_eq!(
            StoreType::resolve("k", Some("pem"), p).unwrap(),
            StoreType::Pem
        );
        assert_eq!(
            StoreType::resolve("k", None, Path::new("a.jks")).unwrap(),
            StoreType::Jks
        );
        assert!(StoreType::resolve("k", None, Path::new("a.bin")).is_err());
    }

    #[test]
    fn jks_is_refused_with_the_keytool_hint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.bin");
        std::fs::write(&path, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let err = load_identity(&store(StoreType::Pem, &path))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("keytool -importkeystore"), "{err}");
        assert!(err.contains("JKS"), "{err}");
    }

    #[test]
    fn garbage_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.pem");
        std::fs::write(&path, b"hello").unwrap();
        let err = load_identity(&store(StoreType::Pem, &path)).err().unwrap();
        assert!(err.to_string().contains("no private key"), "{err}");
        let err = load_trusted(&store(StoreType::Pkcs12, &path))
            .err()
            .unwrap();
        assert!(err.to_string().contains("PKCS12"), "{err}");
        let missing = dir.path().join("none.pem");
        let err = load_trusted(&store(StoreType::Pem, &missing))
            .err()
            .unwrap();
        assert!(err.to_string().contains("cannot read"), "{err}");
    }
}
