//! The server side of SASL GSSAPI (RFC 4752) with Kerberos, as the JDK's `GssKrb5Server`
//! answers ZooKeeper's clients, and the identity ZooKeeper derives from the principal.
//!
//! Three stages: context tokens until the Kerberos context is established (the last
//! answer is the AP-REP when the client asked for mutual authentication); then the server
//! offers its security layers in a wrapped 4-byte token (`auth` only, the JDK's
//! 65536-byte maximum buffer), after the client's empty answer to the AP-REP or at once
//! when there is none (ZooKeeper's Java client asks for no AP-REP); the client's wrapped
//! choice (and optional authorization id) completes it. The
//! identity follows ZooKeeper's `SaslServerCallbackHandler`: the authorization id must be
//! the authenticated principal, then `kerberos.removeHostFromPrincipal` /
//! `kerberos.removeRealmFromPrincipal` shorten it.

use super::gss_ffi::{Context, Credentials, GssError};

/// The longest client token accepted (Kerberos tickets with large PACs stay well below).
const MAX_TOKEN: usize = 64 * 1024;
/// The security layer bit for "no protection", the only one offered (SASL QOP `auth`).
const NO_PROTECTION: u8 = 1;
/// The JDK's default maximum receive buffer, announced in the layer offer.
const MAX_BUFFER: u32 = 65536;

/// Runs blocking `f` on this thread, first handing the tasks queued on it to another
/// worker (`block_in_place`) when it is a worker of a multi-threaded runtime, so that
/// other connections do not wait behind it. (The exchange is a step of its connection's
/// request handling, answered in order, so the work stays on the connection's task.)
fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Why an exchange failed (logged; the client gets AUTHFAILED).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GssapiError {
    #[error("GSSAPI: token of {0} bytes is too long")]
    TooLong(usize),
    #[error("GSSAPI: {0}")]
    Gss(#[from] GssError),
    #[error("GSSAPI: {0}")]
    Protocol(String),
    #[error("GSSAPI: {authn} may not act as {authz}")]
    NotAuthorized { authn: String, authz: String },
    #[error("GSSAPI: the exchange is already complete")]
    Complete,
}

/// What the server answers a token with.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// More to come: send this token (`None`: ZooKeeper's empty answer, a -1 buffer).
    Continue(Option<Vec<u8>>),
    /// Authenticated as the principal; nothing more to send (ZooKeeper answers -1).
    Done { principal: String },
}

enum Stage {
    Context,
    Offer { peer: String },
    Choice { peer: String },
    Complete,
}

/// One connection's GSSAPI exchange.
pub struct Gssapi {
    ctx: Context,
    stage: Stage,
}

impl Default for Gssapi {
    fn default() -> Self {
        Gssapi {
            ctx: Context::default(),
            stage: Stage::Context,
        }
    }
}

impl Gssapi {
    /// Answers one client token.
    pub fn step(&mut self, cred: &Credentials, token: &[u8]) -> Result<Step, GssapiError> {
        if token.len() > MAX_TOKEN {
            return Err(GssapiError::TooLong(token.len()));
        }
        match std::mem::replace(&mut self.stage, Stage::Complete) {
            Stage::Context => {
                // gss_accept_sec_context reads the keytab and writes the replay cache (file
                // I/O, an fsync): blocking work, kept off the runtime's task queue.
                let accepted = off_worker(|| self.ctx.accept(cred, token))?;
                match accepted.peer {
                    // Established without an AP-REP to send (the client asked for no
                    // mutual authentication, as ZooKeeper's Java client does): the offer
                    // goes at once, as the JDK's server sends it.
                    Some(peer) if accepted.token.is_empty() => self.offer(peer),
                    // The AP-REP; the client answers it with an empty token.
                    Some(peer) => {
                        self.stage = Stage::Offer { peer };
                        Ok(Step::Continue(Some(accepted.token)))
                    }
                    None => {
                        self.stage = Stage::Context;
                        let out = (!accepted.token.is_empty()).then_some(accepted.token);
                        Ok(Step::Continue(out))
                    }
                }
            }
            Stage::Offer { peer } => {
                if !token.is_empty() {
                    return Err(GssapiError::Protocol(
                        "expected an empty token before the security layer offer".into(),
                    ));
                }
                self.offer(peer)
            }
            Stage::Choice { peer } => {
                let choice = self.ctx.unwrap(token)?;
                if choice.len() < 4 {
                    return Err(GssapiError::Protocol(format!(
                        "security layer choice of {} bytes (4 expected)",
                        choice.len()
                    )));
                }
                if choice[0] != NO_PROTECTION {
                    return Err(GssapiError::Protocol(format!(
                        "the client chose security layer {:#04x}; only 'auth' (0x01) is offered",
                        choice[0]
                    )));
                }
                if choice.len() > 4 {
                    let authz = String::from_utf8_lossy(&choice[4..]).into_owned();
                    if authz != peer {
                        return Err(GssapiError::NotAuthorized { authn: peer, authz });
                    }
                }
                Ok(Step::Done { principal: peer })
            }
            Stage::Complete => Err(GssapiError::Complete),
        }
    }
}

impl Gssapi {
    /// The security layers offered, wrapped: `auth` only, the JDK's maximum buffer.
    fn offer(&mut self, peer: String) -> Result<Step, GssapiError> {
        let mut offer = MAX_BUFFER.to_be_bytes();
        offer[0] = NO_PROTECTION;
        let wrapped = self.ctx.wrap(&offer)?;
        self.stage = Stage::Choice { peer };
        Ok(Step::Continue(Some(wrapped)))
    }
}

/// How ZooKeeper turns an authenticated principal into its `sasl` id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrincipalRules {
    /// `kerberos.removeHostFromPrincipal`.
    pub remove_host: bool,
    /// `kerberos.removeRealmFromPrincipal`.
    pub remove_realm: bool,
    /// The default realm of the Kerberos configuration.
    pub default_realm: Option<String>,
}

impl PrincipalRules {
    /// The `sasl` id of `principal` (`service[/host][@REALM]`). The first part is the
    /// "short name" by the DEFAULT `auth_to_local` rule, which only knows the default
    /// realm: a principal of another realm keeps its full name, as in ZooKeeper.
    pub fn id(&self, principal: &str) -> String {
        let (name, realm) = match principal.rsplit_once('@') {
            Some((n, r)) => (n, Some(r)),
            None => (principal, None),
        };
        let (service, host) = match name.split_once('/') {
            Some((s, h)) => (s, Some(h)),
            None => (name, None),
        };
        if realm.is_some() && realm != self.default_realm.as_deref() {
            return principal.to_string();
        }
        let mut id = service.to_string();
        if let Some(h) = host.filter(|_| !self.remove_host) {
            id.push('/');
            id.push_str(h);
        }
        if let Some(r) = realm.filter(|_| !self.remove_realm) {
            id.push('@');
            id.push_str(r);
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_as_zookeeper_shortens_them() {
        let mut r = PrincipalRules {
            default_realm: Some("EXAMPLE.COM".into()),
            ..Default::default()
        };
        assert_eq!(r.id("bob@EXAMPLE.COM"), "bob@EXAMPLE.COM");
        assert_eq!(r.id("kafka/h1@EXAMPLE.COM"), "kafka/h1@EXAMPLE.COM");
        r.remove_realm = true;
        assert_eq!(r.id("bob@EXAMPLE.COM"), "bob");
        assert_eq!(r.id("kafka/h1@EXAMPLE.COM"), "kafka/h1");
        r.remove_host = true;
        assert_eq!(r.id("kafka/h1@EXAMPLE.COM"), "kafka");
        // Another realm: no rule applies, the full principal stays.
        assert_eq!(r.id("kafka/h1@OTHER.ORG"), "kafka/h1@OTHER.ORG");
        r.remove_realm = false;
        assert_eq!(r.id("kafka/h1@EXAMPLE.COM"), "kafka@EXAMPLE.COM");
    }

    #[test]
    fn oversized_and_late_tokens_are_refused() {
        let mut g = Gssapi {
            ctx: Context::default(),
            stage: Stage::Complete,
        };
        let cred = Credentials::null_for_tests();
        assert_eq!(
            g.step(&cred, &vec![0u8; MAX_TOKEN + 1]),
            Err(GssapiError::TooLong(MAX_TOKEN + 1))
        );
        assert_eq!(g.step(&cred, b""), Err(GssapiError::Complete));
        g.stage = Stage::Offer { peer: "a@B".into() };
        assert!(matches!(g.step(&cred, b"x"), Err(GssapiError::Protocol(_))));
    }
}
