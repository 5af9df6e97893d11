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

use crate::config::Config;
use crate::sasl::digest_md5;

/// `QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER`.
const MAGIC: i64 = 0x5F24_3501_3501_EDCC;
const IN_PROGRESS: i32 = 0;
const SUCCESS: i32 = 1;
const ERROR: i32 = -1;
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
    let mut b = Vec::with_capacity(16 + token.len());
    b.extend_from_slice(&MAGIC.to_be_bytes());
    b.extend_from_slice(&IN_PROGRESS.to_be_bytes());
    b.extend_from_slice(&(token.len() as i32).to_be_bytes());
    b.extend_from_slice(token);
    w.write_all(&b)?;
    w.flush()
}

fn receive(r: &mut impl Read) -> Result<(i32, Vec<u8>), String> {
    let mut head = [0u8; 16];
    r.read_exact(&mut head)
        .map_err(|e| format!("quorum SASL: reading the leader's answer: {e}"))?;
    let field = |a: usize, b: usize| head[a..b].to_vec();
    let magic = i64::from_be_bytes(field(0, 8).try_into().unwrap_or_default());
    let status = i32::from_be_bytes(field(8, 12).try_into().unwrap_or_default());
    let len = i32::from_be_bytes(field(12, 16).try_into().unwrap_or_default());
    if magic != MAGIC {
        return Err(format!(
            "quorum SASL: the leader answered without the magic number ({magic:#x})"
        ));
    }
    let len = match len {
        -1 => 0,
        n if n < 0 || n as usize > MAX_TOKEN => {
            return Err(format!("quorum SASL: a token of {n} bytes from the leader"))
        }
        n => n as usize,
    };
    let mut token = vec![0u8; len];
    r.read_exact(&mut token)
        .map_err(|e| format!("quorum SASL: reading the leader's token: {e}"))?;
    Ok((status, token))
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
        assert!(e.contains("bytes from the leader"), "{e}");
    }
}
