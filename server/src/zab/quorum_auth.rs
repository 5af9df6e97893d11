//! Quorum SASL, the learner's side (`quorum.auth.enableSasl=true` with
//! `quorum.auth.learnerRequireSasl=true`, as ZooKeeper's learners read them): right after
//! the connection to the leader opens (and its TLS handshake), before OBSERVERINFO, the
//! observer authenticates with DIGEST-MD5 as the user of the JAAS file's learner section
//! (`quorum.auth.learner.saslLoginContext`, default `QuorumLearner`; zooraft reads the file
//! named by `jaasLoginConfig`).
//!
//! The messages are bare jute `QuorumAuthPacket { long magic; int status; buffer token }`
//! records: the learner sends an empty first token, the leader challenges, the learner
//! answers, and the leader ends with SUCCESS (carrying its `rspauth`, checked here) or
//! ERROR.

use std::io::{Read, Write};
use std::path::Path;

use jute::quorum::QuorumAuthPacket;
use jute::Record;

use super::wire::read_auth_packet;
use crate::config::Config;
use crate::sasl::digest_md5;

const MAGIC: i64 = QuorumAuthPacket::MAGIC;
const IN_PROGRESS: i32 = QuorumAuthPacket::IN_PROGRESS;
const SUCCESS: i32 = QuorumAuthPacket::SUCCESS;
const ERROR: i32 = QuorumAuthPacket::ERROR;
/// ZooKeeper's quorum SASL service: protocol `zookeeper-quorum`, server name
/// `zk-quorum-sasl-md5`.
const DIGEST_URI: &str = "zookeeper-quorum/zk-quorum-sasl-md5";
/// The longest token taken from the leader.
const MAX_TOKEN: usize = 64 * 1024;

/// Who this member authenticates as.
pub struct Credentials {
    user: String,
    password: String,
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
    let section = config
        .security
        .get("quorum.auth.learner.saslLoginContext")
        .map_or("QuorumLearner", String::as_str);
    let path = config.security.get("jaasLoginConfig").ok_or(
        "quorum.auth.enableSasl: jaasLoginConfig must name the JAAS file with the learner's credentials",
    )?;
    let (user, password) = crate::sasl::login_credentials(Path::new(path), section)
        .map_err(|e| format!("quorum SASL: {e}"))?;
    Ok(Some(Credentials { user, password }))
}

fn send(w: &mut impl Write, token: &[u8]) -> std::io::Result<()> {
    let p = QuorumAuthPacket {
        magic: MAGIC,
        status: IN_PROGRESS,
        token: Some(bytes::Bytes::copy_from_slice(token)),
    };
    w.write_all(&p.to_bytes())?;
    w.flush()
}

fn receive(r: &mut impl Read) -> Result<(i32, Vec<u8>), String> {
    let p = read_auth_packet(r, MAX_TOKEN)
        .map_err(|e| format!("quorum SASL: reading the leader's answer: {e}"))?;
    if p.magic != MAGIC {
        return Err(format!(
            "quorum SASL: the leader answered without the magic number ({:#x})",
            p.magic
        ));
    }
    Ok((p.status, p.token.map(|t| t.to_vec()).unwrap_or_default()))
}

/// Authenticates to the leader over a connection just opened.
pub fn authenticate(r: &mut impl Read, w: &mut impl Write, c: &Credentials) -> Result<(), String> {
    let io = |e: std::io::Error| format!("quorum SASL: {e}");
    send(w, &[]).map_err(io)?;
    let mut rspauth = None;
    // ZooKeeper's leader ends an exchange after a handful of rounds.
    for _ in 0..5 {
        let (status, token) = receive(r)?;
        match status {
            SUCCESS => {
                return match rspauth {
                    Some(expected) if !token.is_empty() => {
                        let got = String::from_utf8_lossy(&token);
                        if got.trim_start_matches("rspauth=") == expected {
                            Ok(())
                        } else {
                            Err("quorum SASL: the leader's rspauth does not match (is it the leader we think?)".into())
                        }
                    }
                    _ => Ok(()),
                };
            }
            ERROR => {
                return Err(format!(
                    "quorum SASL: the leader refused user {} (a wrong password, or unknown to it)",
                    c.user
                ))
            }
            IN_PROGRESS => {
                let (answer, expected) =
                    digest_md5::client_response(&token, &c.user, &c.password, DIGEST_URI)
                        .map_err(|e| format!("quorum SASL: {e}"))?;
                rspauth = Some(expected);
                send(w, &answer).map_err(io)?;
            }
            other => {
                return Err(format!(
                    "quorum SASL: unknown status {other} from the leader"
                ))
            }
        }
    }
    Err("quorum SASL: the leader did not finish the exchange".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_magic_number_is_zookeepers() {
        assert_eq!(
            MAGIC.to_be_bytes(),
            [0x5F, 0x24, 0x35, 0x01, 0x35, 0x01, 0xED, 0xCC]
        );
    }

    #[test]
    fn an_error_or_garbage_from_the_leader_is_a_clear_error() {
        let c = Credentials {
            user: "u".into(),
            password: "p".into(),
        };
        let mut refused = Vec::new();
        refused.extend_from_slice(&MAGIC.to_be_bytes());
        refused.extend_from_slice(&ERROR.to_be_bytes());
        refused.extend_from_slice(&0i32.to_be_bytes());
        let mut sent = Vec::new();
        let e = authenticate(&mut &refused[..], &mut sent, &c).unwrap_err();
        assert!(e.contains("refused user u"), "{e}");
        assert_eq!(&sent[..8], &MAGIC.to_be_bytes(), "the first token went out");
        let e = authenticate(&mut &[0u8; 16][..], &mut Vec::new(), &c).unwrap_err();
        assert!(e.contains("magic"), "{e}");
        let mut huge = Vec::new();
        huge.extend_from_slice(&MAGIC.to_be_bytes());
        huge.extend_from_slice(&IN_PROGRESS.to_be_bytes());
        huge.extend_from_slice(&i32::MAX.to_be_bytes());
        let e = authenticate(&mut &huge[..], &mut Vec::new(), &c).unwrap_err();
        assert!(e.contains("a length of 2147483647"), "{e}");
    }
}
