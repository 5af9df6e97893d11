//! SASL for the client port (ZooKeeper's opcode 102 and the `sasl` ACL scheme): the JAAS
//! file that names the users, and the mechanisms.
//!
//! A leaf beside `config.rs`, like `tls/`: the network layer asks it for a mechanism per
//! connection and feeds it the client's tokens. ZooKeeper takes the JAAS file from the JVM
//! property `java.security.auth.login.config`; zooraft from the zoo.cfg key
//! `jaasLoginConfig` (or `--jaas-config`), and reads its `Server` section.
//!
//! | file | concern |
//! |------|---------|
//! | `mod.rs` | the server's SASL settings from the JAAS file |
//! | `jaas.rs` | the JAAS login configuration format |
//! | `digest_md5.rs` | the DIGEST-MD5 mechanism (RFC 2831), server side |

pub mod digest_md5;
mod jaas;

use std::collections::BTreeMap;
use std::path::Path;

/// The server name ZooKeeper gives its DIGEST-MD5 server (the realm clients expect).
pub const DIGEST_REALM: &str = "zk-sasl-md5";

/// The JAAS section ZooKeeper's server reads (`zookeeper.sasl.serverconfig`).
const SERVER_SECTION: &str = "Server";

/// Why SASL cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SaslError {
    #[error("jaasLoginConfig: cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("jaasLoginConfig: {path}: {message}")]
    Invalid { path: String, message: String },
}

/// The server's SASL settings: the DIGEST-MD5 users of the JAAS `Server` section.
#[derive(Debug, Clone, Default)]
pub struct SaslSettings {
    users: BTreeMap<String, String>,
}

impl SaslSettings {
    /// Reads the JAAS file at `path`. Its `Server` section must exist; the
    /// DigestLoginModule's `user_<name>="<password>"` options are the users.
    pub fn load(path: &Path) -> Result<SaslSettings, SaslError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SaslError::Read {
            path: shown.clone(),
            source,
        })?;
        let invalid = |message: String| SaslError::Invalid {
            path: shown.clone(),
            message,
        };
        let sections = jaas::parse(&text).map_err(invalid)?;
        let modules = sections
            .get(SERVER_SECTION)
            .ok_or_else(|| invalid(format!("no {SERVER_SECTION} section")))?;
        let mut users = BTreeMap::new();
        for m in modules {
            if m.class.ends_with("DigestLoginModule") {
                for (k, v) in &m.options {
                    if let Some(user) = k.strip_prefix("user_") {
                        users.insert(user.to_string(), v.clone());
                    }
                }
            } else {
                return Err(invalid(format!(
                    "login module {} is not supported (DigestLoginModule is)",
                    m.class
                )));
            }
        }
        Ok(SaslSettings { users })
    }

    /// A DIGEST-MD5 user's password.
    pub fn password(&self, user: &str) -> Option<String> {
        self.users.get(user).cloned()
    }

    /// How many users the file names (for the start-up log).
    pub fn user_count(&self) -> usize {
        self.users.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_digest_users() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jaas.conf");
        std::fs::write(
            &path,
            "Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n \
             user_super=\"adminsecret\" user_bob=\"bobsecret\";\n};\n",
        )
        .unwrap();
        let s = SaslSettings::load(&path).unwrap();
        assert_eq!(s.password("bob").as_deref(), Some("bobsecret"));
        assert_eq!(s.user_count(), 2);
        std::fs::write(&path, "Client { x required; };").unwrap();
        let e = SaslSettings::load(&path).unwrap_err().to_string();
        assert!(e.contains("no Server section"), "{e}");
        let e = SaslSettings::load(&dir.path().join("none")).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }
}
