//! Reading PKCS12 stores (RFC 7292) as openssl 3 and Java 17's keytool write them: a MAC
//! over the contents (HMAC-SHA-256 or HMAC-SHA-1, key from the PKCS12 KDF), certificate
//! bags in plain or PBES2-encrypted data, private keys in PBES2-shrouded key bags. A trust
//! store may have no MAC and no encryption. The legacy PKCS12 PBE ciphers (RC2, 3DES with
//! the PKCS12 KDF, `openssl -legacy`) are refused with the command that re-exports.
//!
//! Also decrypts a PKCS#8 `ENCRYPTED PRIVATE KEY` (PBES2) for PEM key stores.

use der::asn1::{ContextSpecific, OctetString};
use der::{Decode, Encode};
use hmac::{KeyInit, Mac};
use pkcs12::cms::content_info::ContentInfo;
use pkcs12::cms::encrypted_data::EncryptedData;
use pkcs12::pbe_params::EncryptedPrivateKeyInfo;
use pkcs12::safe_bag::SafeContents;
use pkcs12::{CertBag, MacData, Pfx};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};

/// Work factors past these are refused (a hostile file must not pin a CPU).
const MAX_ITERATIONS: u32 = 10_000_000;

const DATA: &str = "1.2.840.113549.1.7.1";
const ENCRYPTED_DATA: &str = "1.2.840.113549.1.7.6";
const PBES2: &str = "1.2.840.113549.1.5.13";
const SHA1: &str = "1.3.14.3.2.26";
const SHA256: &str = "2.16.840.1.101.3.4.2.1";
const KEY_BAG: &str = "1.2.840.113549.1.12.10.1.1";
const SHROUDED_KEY_BAG: &str = "1.2.840.113549.1.12.10.1.2";
const CERT_BAG: &str = "1.2.840.113549.1.12.10.1.3";

/// What a store holds.
#[derive(Default)]
pub struct Contents {
    pub keys: Vec<PrivatePkcs8KeyDer<'static>>,
    /// In file order (a key store: the leaf first, then its chain, as openssl writes it).
    pub certs: Vec<CertificateDer<'static>>,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn verify_mac(mac: &MacData, password: &str, data: &[u8]) -> Result<(), String> {
    if mac.iterations < 1 || mac.iterations as u32 > MAX_ITERATIONS {
        return Err(format!("MAC iteration count {} refused", mac.iterations));
    }
    let salt = mac.mac_salt.as_bytes();
    let kind = pkcs12::kdf::Pkcs12KeyType::Mac;
    let expected = mac.mac.digest.as_bytes();
    let ok = match mac.mac.algorithm.oid.to_string().as_str() {
        SHA256 => {
            let key = pkcs12::kdf::derive_key_utf8::<sha2::Sha256>(
                password,
                salt,
                kind,
                mac.iterations,
                32,
            )
            .map_err(err)?;
            let mut h = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).map_err(err)?;
            h.update(data);
            h.verify_slice(expected).is_ok()
        }
        SHA1 => {
            let key = pkcs12::kdf::derive_key_utf8::<sha1_11::Sha1>(
                password,
                salt,
                kind,
                mac.iterations,
                20,
            )
            .map_err(err)?;
            let mut h = hmac::Hmac::<sha1_11::Sha1>::new_from_slice(&key).map_err(err)?;
            h.update(data);
            h.verify_slice(expected).is_ok()
        }
        other => {
            return Err(format!(
                "MAC digest {other} is not supported (SHA-256, SHA-1 are)"
            ))
        }
    };
    if ok {
        Ok(())
    } else {
        Err("wrong password (the MAC does not match)".into())
    }
}

/// Decrypts PBES2 content; other schemes are refused with the re-export hint.
fn decrypt(
    alg: &pkcs12::cms::cert::x509::spki::AlgorithmIdentifierOwned,
    data: &[u8],
    password: &str,
) -> Result<Vec<u8>, String> {
    if alg.oid.to_string() != PBES2 {
        return Err(format!(
            "encryption {} is a legacy PKCS12 cipher zooraft does not read; re-export the store \
             with AES (`openssl pkcs12 -export` without -legacy, or Java 17's keytool)",
            alg.oid
        ));
    }
    let params = alg
        .parameters
        .as_ref()
        .ok_or("PBES2 without parameters")?
        .to_der()
        .map_err(err)?;
    let params = pkcs5::pbes2::Parameters::from_der(&params).map_err(err)?;
    if let pkcs5::pbes2::Kdf::Pbkdf2(p) = &params.kdf {
        if p.iteration_count > MAX_ITERATIONS {
            return Err(format!(
                "PBKDF2 iteration count {} refused",
                p.iteration_count
            ));
        }
    } else {
        return Err("only PBKDF2 key derivation is supported".into());
    }
    params
        .decrypt(password.as_bytes(), data)
        .map_err(|_| "cannot decrypt (wrong password?)".to_string())
}

fn read_bags(bags: SafeContents, password: &str, out: &mut Contents) -> Result<(), String> {
    for bag in bags {
        match bag.bag_id.to_string().as_str() {
            CERT_BAG => {
                let cs = ContextSpecific::<CertBag>::from_der(&bag.bag_value).map_err(err)?;
                out.certs.push(CertificateDer::from(
                    cs.value.cert_value.as_bytes().to_vec(),
                ));
            }
            SHROUDED_KEY_BAG => {
                let cs = ContextSpecific::<EncryptedPrivateKeyInfo>::from_der(&bag.bag_value)
                    .map_err(err)?;
                let key = decrypt(
                    &cs.value.encryption_algorithm,
                    cs.value.encrypted_data.as_bytes(),
                    password,
                )?;
                out.keys.push(PrivatePkcs8KeyDer::from(key));
            }
            KEY_BAG => {
                // An unencrypted PKCS#8 key: the [0] wrapper's content as it is.
                let cs = ContextSpecific::<der::Any>::from_der(&bag.bag_value).map_err(err)?;
                out.keys
                    .push(PrivatePkcs8KeyDer::from(cs.value.to_der().map_err(err)?));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Reads a whole PKCS12 file.
pub fn read(bytes: &[u8], password: &str) -> Result<Contents, String> {
    let pfx = Pfx::from_der(bytes).map_err(|e| format!("not a PKCS12 file: {e}"))?;
    if pfx.auth_safe.content_type.to_string() != DATA {
        return Err("signed (public-key integrity) PKCS12 files are not supported".into());
    }
    let safe = OctetString::from_der(&pfx.auth_safe.content.to_der().map_err(err)?).map_err(err)?;
    if let Some(mac) = &pfx.mac_data {
        verify_mac(mac, password, safe.as_bytes())?;
    }
    let infos = Vec::<ContentInfo>::from_der(safe.as_bytes()).map_err(err)?;
    let mut out = Contents::default();
    for info in infos {
        let content = info.content.to_der().map_err(err)?;
        let data = match info.content_type.to_string().as_str() {
            DATA => OctetString::from_der(&content)
                .map_err(err)?
                .as_bytes()
                .to_vec(),
            ENCRYPTED_DATA => {
                let e = EncryptedData::from_der(&content).map_err(err)?;
                let enc = &e.enc_content_info;
                match &enc.encrypted_content {
                    Some(c) => decrypt(&enc.content_enc_alg, c.as_bytes(), password)?,
                    None => continue,
                }
            }
            other => return Err(format!("content type {other} is not supported")),
        };
        read_bags(
            SafeContents::from_der(&data).map_err(err)?,
            password,
            &mut out,
        )?;
    }
    Ok(out)
}

/// Decrypts a DER `EncryptedPrivateKeyInfo` (PEM `ENCRYPTED PRIVATE KEY`).
pub fn decrypt_pkcs8(der: &[u8], password: &str) -> Result<PrivatePkcs8KeyDer<'static>, String> {
    let info = EncryptedPrivateKeyInfo::from_der(der).map_err(err)?;
    let key = decrypt(
        &info.encryption_algorithm,
        info.encrypted_data.as_bytes(),
        password,
    )?;
    Ok(PrivatePkcs8KeyDer::from(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_refused() {
        assert!(read(b"not pkcs12", "x").is_err());
        assert!(read(&[], "").is_err());
        assert!(decrypt_pkcs8(&[0x30, 0x03, 0x02, 0x01, 0x00], "x").is_err());
    }
}
