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
//! | `gssapi.rs` | the GSSAPI (Kerberos) mechanism (RFC 4752), server side, and ids |
//! | `gss_ffi.rs` | the system GSSAPI library (MIT krb5): an acceptor's calls, and an initiator's for quorum learners |
//! | `gss_sys.rs` | that library's C declarations, for `gss_ffi.rs` alone |
//!
//! A `Server` section may name DigestLoginModule users, a Krb5LoginModule (keytab and
//! principal), or both; a connection's first token tells which mechanism it speaks
//! (DIGEST-MD5 clients start empty, GSSAPI clients with a Kerberos token).

pub mod digest_md5;
pub mod gss_ffi;
mod gss_sys;
pub mod gssapi;
mod jaas;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

pub use gss_ffi::Credentials;
use gssapi::PrincipalRules;

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

/// The Kerberos side of the `Server` section: the server's principal and its keytab.
#[derive(Clone)]
pub struct Kerberos {
    pub principal: String,
    pub keytab: String,
    credentials: Arc<Credentials>,
    /// How an authenticated principal becomes a `sasl` id.
    pub rules: PrincipalRules,
}

impl fmt::Debug for Kerberos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kerberos")
            .field("principal", &self.principal)
            .field("keytab", &self.keytab)
            .field("rules", &self.rules)
            .finish()
    }
}

impl Kerberos {
    /// The acceptor credentials acquired at start-up.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    fn from_options(options: &BTreeMap<String, String>) -> Result<Kerberos, String> {
        let (principal, keytab) = keytab_login(options)?;
        let credentials = Credentials::acquire(&principal, &keytab)
            .map_err(|e| format!("Krb5LoginModule {principal} (keyTab {keytab}): {e}"))?;
        Ok(Kerberos {
            principal,
            keytab,
            credentials: Arc::new(credentials),
            rules: PrincipalRules {
                default_realm: gss_ffi::default_realm(),
                ..Default::default()
            },
        })
    }
}

/// The principal and keytab of a Krb5LoginModule's options (zooraft reads no ticket cache:
/// `useKeyTab=true` with `keyTab` and `principal`).
fn keytab_login(options: &BTreeMap<String, String>) -> Result<(String, String), String> {
    let opt = |k: &str| options.get(k).map(|v| v.trim().to_string());
    if opt("useKeyTab").as_deref() != Some("true") {
        return Err("Krb5LoginModule: zooraft needs useKeyTab=true and a keyTab".into());
    }
    let keytab = opt("keyTab").ok_or("Krb5LoginModule: keyTab is missing")?;
    let principal = opt("principal").ok_or("Krb5LoginModule: principal is missing")?;
    Ok((principal, keytab))
}

/// The server's SASL settings: the DIGEST-MD5 users and the Kerberos principal of the JAAS
/// `Server` section.
#[derive(Debug, Clone, Default)]
pub struct SaslSettings {
    users: BTreeMap<String, String>,
    pub kerberos: Option<Kerberos>,
}

impl SaslSettings {
    /// Reads the JAAS file at `path`: the DigestLoginModule's `user_<name>="<password>"`
    /// options of its `Server` section are the users, its Krb5LoginModule the Kerberos
    /// identity. A file without a `Server` section (one that only holds the quorum's
    /// `QuorumLearner`, say) gives `None`: no client SASL, as ZooKeeper's
    /// `configureSaslLogin` goes on without it.
    pub fn load(path: &Path) -> Result<Option<SaslSettings>, SaslError> {
        let (sections, invalid) = read_sections(path)?;
        let Some(modules) = sections.get(SERVER_SECTION) else {
            return Ok(None);
        };
        let mut users = BTreeMap::new();
        let mut kerberos = None;
        for m in modules {
            if m.class.ends_with("DigestLoginModule") {
                for (k, v) in &m.options {
                    if let Some(user) = k.strip_prefix("user_") {
                        users.insert(user.to_string(), v.clone());
                    }
                }
            } else if m.class.ends_with("Krb5LoginModule") {
                kerberos = Some(Kerberos::from_options(&m.options).map_err(&invalid)?);
            } else {
                return Err(invalid(format!(
                    "login module {} is not supported (DigestLoginModule and Krb5LoginModule are)",
                    m.class
                )));
            }
        }
        Ok(Some(SaslSettings { users, kerberos }))
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

/// The JAAS file at `path`, by section, and how to report what is wrong with it.
#[allow(clippy::type_complexity)]
fn read_sections(
    path: &Path,
) -> Result<
    (
        BTreeMap<String, Vec<jaas::LoginModule>>,
        impl Fn(String) -> SaslError,
    ),
    SaslError,
> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SaslError::Read {
        path: shown.clone(),
        source,
    })?;
    let invalid = move |message: String| SaslError::Invalid {
        path: shown.clone(),
        message,
    };
    let sections = jaas::parse(&text).map_err(&invalid)?;
    Ok((sections, invalid))
}

/// How a quorum learner logs in to its leader, from a JAAS section (ZooKeeper's
/// `QuorumLearner`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnerLogin {
    /// The DigestLoginModule's `username` and `password`: DIGEST-MD5.
    Digest { user: String, password: String },
    /// A Krb5LoginModule's `principal` and `keyTab`: GSSAPI.
    Kerberos { principal: String, keytab: String },
}

/// How the learner of `section` in the JAAS file at `path` logs in. As in ZooKeeper, whose
/// learner speaks GSSAPI when the section's login leaves Kerberos principals in its
/// subject: a Krb5LoginModule means Kerberos, else the DigestLoginModule's user.
pub fn learner_login(path: &Path, section: &str) -> Result<LearnerLogin, SaslError> {
    let (sections, invalid) = read_sections(path)?;
    let modules = sections
        .get(section)
        .ok_or_else(|| invalid(format!("no {section} section")))?;
    if let Some(krb5) = modules
        .iter()
        .find(|m| m.class.ends_with("Krb5LoginModule"))
    {
        let (principal, keytab) = keytab_login(&krb5.options)
            .map_err(|e| invalid(format!("the {section} section's {e}")))?;
        return Ok(LearnerLogin::Kerberos { principal, keytab });
    }
    let digest = modules
        .iter()
        .find(|m| m.class.ends_with("DigestLoginModule"))
        .ok_or_else(|| {
            invalid(format!(
                "the {section} section has neither a DigestLoginModule nor a Krb5LoginModule"
            ))
        })?;
    match (
        digest.options.get("username"),
        digest.options.get("password"),
    ) {
        (Some(u), Some(p)) => Ok(LearnerLogin::Digest {
            user: u.clone(),
            password: p.clone(),
        }),
        _ => Err(invalid(format!(
            "the {section} section's DigestLoginModule needs username and password"
        ))),
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
        let s = SaslSettings::load(&path).unwrap().unwrap();
        assert_eq!(s.password("bob").as_deref(), Some("bobsecret"));
        assert_eq!(s.user_count(), 2);
        // Only other sections (a quorum learner's): no client SASL, and no error.
        std::fs::write(&path, "QuorumLearner { x required; };").unwrap();
        assert!(SaslSettings::load(&path).unwrap().is_none());
        let e = SaslSettings::load(&dir.path().join("none")).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }

    #[test]
    fn kerberos_module_needs_a_usable_keytab() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jaas.conf");
        let module = "Server { com.sun.security.auth.module.Krb5LoginModule required";
        std::fs::write(&path, format!("{module} useKeyTab=false; }};")).unwrap();
        let e = SaslSettings::load(&path).unwrap_err().to_string();
        assert!(e.contains("useKeyTab=true"), "{e}");
        std::fs::write(
            &path,
            format!("{module} useKeyTab=true principal=\"zk\"; }};"),
        )
        .unwrap();
        let e = SaslSettings::load(&path).unwrap_err().to_string();
        assert!(e.contains("keyTab is missing"), "{e}");
        std::fs::write(
            &path,
            format!(
                "{module} useKeyTab=true keyTab=\"{}/none.keytab\" storeKey=true \
                 principal=\"zookeeper/localhost@NO.SUCH\"; }};",
                dir.path().display()
            ),
        )
        .unwrap();
        let e = SaslSettings::load(&path).unwrap_err().to_string();
        assert!(e.contains("gss_acquire_cred"), "{e}");
    }

    #[test]
    fn a_learner_logs_in_with_kerberos_when_its_section_has_krb5() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jaas.conf");
        let digest = "org.apache.zookeeper.server.auth.DigestLoginModule required \
                      username=\"learner\" password=\"secret\";";
        let krb5 = "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true \
                    keyTab=\"/k/learner.keytab\" storeKey=true principal=\"learner/h@R\";";
        std::fs::write(&path, format!("QuorumLearner {{ {digest} }};")).unwrap();
        assert_eq!(
            learner_login(&path, "QuorumLearner").unwrap(),
            LearnerLogin::Digest {
                user: "learner".into(),
                password: "secret".into()
            }
        );
        std::fs::write(&path, format!("QuorumLearner {{ {digest} {krb5} }};")).unwrap();
        assert_eq!(
            learner_login(&path, "QuorumLearner").unwrap(),
            LearnerLogin::Kerberos {
                principal: "learner/h@R".into(),
                keytab: "/k/learner.keytab".into()
            }
        );
        let e = learner_login(&path, "Other").unwrap_err().to_string();
        assert!(e.contains("no Other section"), "{e}");
        std::fs::write(
            &path,
            "QuorumLearner { com.sun.security.auth.module.Krb5LoginModule required \
             useTicketCache=true; };",
        )
        .unwrap();
        let e = learner_login(&path, "QuorumLearner")
            .unwrap_err()
            .to_string();
        assert!(e.contains("useKeyTab=true"), "{e}");
    }
}
