//! Quorum SASL, the learner's side (`quorum.auth.enableSasl=true` with
//! `quorum.auth.learnerRequireSasl=true`, as ZooKeeper's learners read them): right after
//! the connection to the leader opens (and its TLS handshake), before OBSERVERINFO, the
//! observer authenticates as the JAAS file's learner section
//! (`quorum.auth.learner.saslLoginContext`, default `QuorumLearner`; zooraft reads the file
//! named by `jaasLoginConfig`) logs in: with Kerberos (GSSAPI, `quorum_gssapi.rs`) when the
//! section has a Krb5LoginModule, else with DIGEST-MD5 as its DigestLoginModule's user
//! (here), as ZooKeeper's learners choose.
//!
//! The messages are bare jute `QuorumAuthPacket { long magic; int status; buffer token }`
//! records (`wire.rs`). DIGEST-MD5: the learner sends an empty first token, the leader
//! challenges, the learner answers, and the leader ends with SUCCESS (carrying its
//! `rspauth`, checked here) or ERROR.

use std::io::{Read, Write};
use std::path::Path;

use jute::quorum::QuorumAuthPacket;

use super::quorum_gssapi::Kerberos;
use super::wire::{receive_auth, send_auth};
use crate::config::Config;
use crate::sasl::{digest_md5, LearnerLogin};

const IN_PROGRESS: i32 = QuorumAuthPacket::IN_PROGRESS;
const SUCCESS: i32 = QuorumAuthPacket::SUCCESS;
const ERROR: i32 = QuorumAuthPacket::ERROR;
/// ZooKeeper's quorum SASL service: protocol `zookeeper-quorum`, server name
/// `zk-quorum-sasl-md5`.
const DIGEST_URI: &str = "zookeeper-quorum/zk-quorum-sasl-md5";
/// `quorum.auth.kerberos.servicePrincipal`'s default, as ZooKeeper's.
const SERVICE_PRINCIPAL: &str = "zkquorum/localhost";

/// Who this member authenticates as, and how.
pub enum Credentials {
    Digest { user: String, password: String },
    Kerberos(Kerberos),
}

/// (As ZooKeeper reads these: anything but true is false.)
fn flag(config: &Config, key: &str) -> bool {
    config.security_flag(key).unwrap_or(false)
}

/// The credentials, when zoo.cfg asks this learner to authenticate.
pub fn credentials(config: &Config) -> Result<Option<Credentials>, String> {
    if !flag(config, "quorum.auth.enableSasl") || !flag(config, "quorum.auth.learnerRequireSasl") {
        return Ok(None);
    }
    let key = |k: &str, default: &'static str| config.security.get(k).map_or(default, |v| v);
    let section = key("quorum.auth.learner.saslLoginContext", "QuorumLearner");
    let path = config.security.get("jaasLoginConfig").ok_or(
        "quorum.auth.enableSasl: jaasLoginConfig must name the JAAS file with the learner's credentials",
    )?;
    let login = crate::sasl::learner_login(Path::new(path), section)
        .map_err(|e| format!("quorum SASL: {e}"))?;
    Ok(Some(match login {
        LearnerLogin::Digest { user, password } => Credentials::Digest { user, password },
        LearnerLogin::Kerberos { principal, keytab } => Credentials::Kerberos(Kerberos::new(
            principal,
            keytab,
            key("quorum.auth.kerberos.servicePrincipal", SERVICE_PRINCIPAL),
        )),
    }))
}

/// Authenticates to the leader at `host` (its `server.N` line's host, for `_HOST` in the
/// Kerberos service principal) over a connection just opened.
pub fn authenticate(
    r: &mut impl Read,
    w: &mut impl Write,
    c: &Credentials,
    host: &str,
) -> Result<(), String> {
    match c {
        Credentials::Digest { user, password } => digest(r, w, user, password),
        Credentials::Kerberos(k) => k.authenticate(r, w, host),
    }
    .map_err(|e| format!("quorum SASL: {e}"))
}

fn digest(r: &mut impl Read, w: &mut impl Write, user: &str, password: &str) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    send_auth(w, &[]).map_err(io)?;
    let mut rspauth = None;
    // ZooKeeper's leader ends an exchange after a handful of rounds.
    for _ in 0..5 {
        let (status, token) = receive_auth(r)?;
        match status {
            SUCCESS => {
                return match rspauth {
                    Some(expected) if !token.is_empty() => {
                        let got = String::from_utf8_lossy(&token);
                        if got.trim_start_matches("rspauth=") == expected {
                            Ok(())
                        } else {
                            Err(
                                "the leader's rspauth does not match (is it the leader we think?)"
                                    .into(),
                            )
                        }
                    }
                    _ => Ok(()),
                };
            }
            ERROR => {
                return Err(format!(
                    "the leader refused user {user} (a wrong password, or unknown to it)"
                ))
            }
            IN_PROGRESS => {
                let (answer, expected) =
                    digest_md5::client_response(&token, user, password, DIGEST_URI)
                        .map_err(|e| e.to_string())?;
                rspauth = Some(expected);
                send_auth(w, &answer).map_err(io)?;
            }
            other => return Err(format!("unknown status {other} from the leader")),
        }
    }
    Err("the leader did not finish the exchange".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_magic_number_is_zookeepers() {
        assert_eq!(
            QuorumAuthPacket::MAGIC.to_be_bytes(),
            [0x5F, 0x24, 0x35, 0x01, 0x35, 0x01, 0xED, 0xCC]
        );
    }

    #[test]
    fn an_error_or_garbage_from_the_leader_is_a_clear_error() {
        let c = Credentials::Digest {
            user: "u".into(),
            password: "p".into(),
        };
        let magic = QuorumAuthPacket::MAGIC.to_be_bytes();
        let mut refused = Vec::new();
        refused.extend_from_slice(&magic);
        refused.extend_from_slice(&ERROR.to_be_bytes());
        refused.extend_from_slice(&0i32.to_be_bytes());
        let mut sent = Vec::new();
        let e = authenticate(&mut &refused[..], &mut sent, &c, "h").unwrap_err();
        assert!(e.contains("refused user u"), "{e}");
        assert_eq!(&sent[..8], &magic, "the first token went out");
        let e = authenticate(&mut &[0u8; 16][..], &mut Vec::new(), &c, "h").unwrap_err();
        assert!(e.contains("magic"), "{e}");
        let mut huge = Vec::new();
        huge.extend_from_slice(&magic);
        huge.extend_from_slice(&IN_PROGRESS.to_be_bytes());
        huge.extend_from_slice(&i32::MAX.to_be_bytes());
        let e = authenticate(&mut &huge[..], &mut Vec::new(), &c, "h").unwrap_err();
        assert!(e.contains("a length of 2147483647"), "{e}");
    }
}
