//! Authentication on a connection: auth packets (`addauth`), SASL (opcode 102) and
//! enforced authentication (`enforce.auth.enabled`/`enforce.auth.schemes`,
//! `sessionRequireClientSASLAuth`), as ZooKeeper 3.8's `processSasl` and
//! `AuthenticationHelper` do it.
//!
//! Each connection has a [`ConnAuth`] that sees every request before it is dispatched: it
//! answers SASL tokens itself (DIGEST-MD5 or GSSAPI, by the first token), and refuses any
//! other request of a connection that has no id of an enforced scheme with
//! SESSIONCLOSEDREQUIRESASLAUTH, then closes it. A SASL failure is AUTHFAILED and the
//! connection closed (ZooKeeper's default, without `zookeeper.allowSaslFailedClients`).
//! Refusals count in `auth_failed_count`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes};
use jute::{AuthPacket, ErrorCode, Id, OpCode, Reader, Record};
use parking_lot::Mutex;

use super::metrics::{AuthFailure, Metrics};
use super::outbox::Outbox;
use super::pipeline::Pipeline;
use super::reply;
use crate::config::Config;
use crate::sasl::digest_md5::{self, DigestMd5};
use crate::sasl::gssapi::{self, Gssapi};
use crate::sasl::{SaslSettings, DIGEST_REALM};
use crate::state::acl;
use crate::state::opcodes::{self, OpClass};

/// The server's authentication settings, shared by its connections.
#[derive(Debug, Default)]
pub struct Auth {
    /// `X509AuthenticationProvider.superUser`: this certificate subject is also `super`.
    pub x509_super_user: Option<String>,
    /// Users for SASL (from the JAAS file), if SASL is configured.
    pub sasl: Option<SaslSettings>,
    /// The schemes one of which a connection must have before any request, if enforced.
    pub enforced: Option<Vec<String>>,
    /// `DigestAuthenticationProvider.superDigest`.
    pub super_digest: Option<String>,
}

fn get<'a>(keys: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    keys.get(key)
        .or_else(|| keys.get(&format!("zookeeper.{key}")))
        .map(|v| v.trim())
}

fn flag(keys: &BTreeMap<String, String>, key: &str) -> Result<bool, String> {
    match get(keys, key).map(str::to_ascii_lowercase).as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(v) => Err(format!("{key}: '{v}' is not true or false")),
    }
}

impl Auth {
    /// The ids a client certificate with this subject (RFC 2253) gives: `x509:<subject>`,
    /// and super when it is `X509AuthenticationProvider.superUser`.
    pub fn x509_ids(&self, subject: String) -> Vec<Id> {
        let is_super = self.x509_super_user.as_deref() == Some(subject.as_str());
        let mut ids = vec![Id {
            scheme: "x509".into(),
            id: subject,
        }];
        if is_super {
            ids.push(acl::super_id());
        }
        ids
    }

    /// Reads the settings from the configuration.
    pub fn from_config(config: &Config) -> Result<Auth, String> {
        Ok(Auth {
            super_digest: config.super_digest.clone(),
            ..Auth::from_keys(&config.security)?
        })
    }

    /// Reads the settings from zoo.cfg's security keys (`Config::security`).
    fn from_keys(keys: &BTreeMap<String, String>) -> Result<Auth, String> {
        let loaded = match get(keys, "jaasLoginConfig") {
            Some(path) => {
                let s =
                    SaslSettings::load(std::path::Path::new(path)).map_err(|e| e.to_string())?;
                if s.is_none() {
                    tracing::info!("SASL: {path} has no Server section; clients cannot use SASL");
                }
                s.map(|s| (path, s))
            }
            None => None,
        };
        let sasl = match loaded {
            Some((path, mut s)) => {
                tracing::info!("SASL: {} DIGEST-MD5 users from {path}", s.user_count());
                if let Some(k) = &mut s.kerberos {
                    k.rules.remove_host = flag(keys, "kerberos.removeHostFromPrincipal")?;
                    k.rules.remove_realm = flag(keys, "kerberos.removeRealmFromPrincipal")?;
                    tracing::info!(
                        "SASL: GSSAPI as {} (keytab {}, default realm {:?})",
                        k.principal,
                        k.keytab,
                        k.rules.default_realm
                    );
                }
                Some(s)
            }
            None => None,
        };
        let enforced = if flag(keys, "sessionRequireClientSASLAuth")? {
            Some(vec!["sasl".to_string()])
        } else if flag(keys, "enforce.auth.enabled")? {
            let schemes: Vec<String> = get(keys, "enforce.auth.schemes")
                .unwrap_or_default()
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            if schemes.is_empty() {
                return Err("enforce.auth.enabled=true needs enforce.auth.schemes".into());
            }
            Some(schemes)
        } else {
            None
        };
        if enforced
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s == "sasl"))
            && sasl.is_none()
        {
            return Err(
                "authentication by sasl is enforced but jaasLoginConfig is not set (or its file has no Server section)"
                    .into(),
            );
        }
        Ok(Auth {
            x509_super_user: get(keys, "X509AuthenticationProvider.superUser").map(str::to_string),
            sasl,
            enforced,
            super_digest: None,
        })
    }
}

/// What the guard did with a request.
pub enum Verdict {
    /// Not its business: dispatch as usual.
    Pass,
    /// Answered (a SASL step).
    Answered,
    /// Answered with an error; the connection must close.
    Close,
}

/// What the guard needs of its connection.
#[derive(Clone, Copy)]
pub struct ConnParts<'a> {
    pub pipeline: &'a Mutex<Pipeline>,
    pub out: &'a Outbox,
    pub metrics: &'a Metrics,
}

/// A connection's SASL exchange, of the mechanism its first token speaks.
enum Exchange {
    Digest(DigestMd5),
    Gssapi(Box<Gssapi>),
}

/// One connection's view of [`Auth`], with its SASL exchange.
pub struct ConnAuth {
    auth: Arc<Auth>,
    peer: IpAddr,
    exchange: Option<Exchange>,
    /// The connection has an id of an enforced scheme: ids are only ever added, so every
    /// later request passes without looking again.
    enforced_met: bool,
}

/// A SASL reply: the header, then the token buffer (-1 for none) even after an error, as
/// ZooKeeper sends it (the Java client reads the buffer whatever the error).
fn sasl_reply(out: &Outbox, xid: i32, err: ErrorCode, token: Option<&[u8]>) {
    out.push_frame(|b| {
        reply::header(b, xid, 0, err.code());
        match token {
            Some(t) => {
                b.put_i32(t.len() as i32);
                b.put_slice(t);
            }
            None => b.put_i32(-1),
        }
    });
}

impl ConnAuth {
    pub fn new(auth: Arc<Auth>, peer: IpAddr) -> ConnAuth {
        ConnAuth {
            auth,
            peer,
            exchange: None,
            enforced_met: false,
        }
    }

    /// Looks at one request before dispatch.
    pub fn check(&mut self, op: i32, xid: i32, body: &Bytes, cx: &ConnParts) -> Verdict {
        let ConnParts {
            pipeline,
            out,
            metrics,
        } = *cx;
        if op == OpCode::Sasl.code() {
            return self.sasl(xid, body, cx);
        }
        if opcodes::info(op).class == OpClass::Auth {
            return self.auth_packet(xid, body, pipeline, out);
        }
        let Some(schemes) = &self.auth.enforced else {
            return Verdict::Pass;
        };
        if self.enforced_met {
            return Verdict::Pass;
        }
        let have: Vec<String> = {
            let p = pipeline.lock();
            if p.auth.iter().any(|id| schemes.contains(&id.scheme)) {
                self.enforced_met = true;
                return Verdict::Pass;
            }
            p.auth.iter().map(|id| id.scheme.clone()).collect()
        };
        tracing::warn!(
            "client authentication scheme(s) {have:?} match none of the required {schemes:?}: closing the session's connection"
        );
        metrics.auth_failure(AuthFailure::Enforced);
        reply::push_error(out, xid, 0, ErrorCode::SessionClosedRequireSaslAuth);
        Verdict::Close
    }

    /// An auth packet takes effect at once (ZooKeeper handles it on arrival, ahead of
    /// queued requests), so the requests after it carry the new identity.
    fn auth_packet(
        &self,
        xid: i32,
        body: &Bytes,
        pipeline: &Mutex<Pipeline>,
        out: &Outbox,
    ) -> Verdict {
        let result = match AuthPacket::decode(&mut Reader::new(body.clone())) {
            Ok(packet) => acl::authenticate(
                &packet.scheme,
                packet.auth.as_deref().unwrap_or_default(),
                self.peer,
                self.auth.super_digest.as_deref(),
            ),
            Err(_) => Err(ErrorCode::AuthFailed),
        };
        match result {
            Ok(ids) => {
                let mut p = pipeline.lock();
                for id in ids {
                    p.add_auth(id);
                }
                drop(p);
                reply::push_error(out, xid, 0, ErrorCode::Ok);
                Verdict::Answered
            }
            Err(e) => {
                // ZooKeeper answers AUTHFAILED and closes the connection. Like ZooKeeper, this
                // is not counted in `auth_failed_count` (which counts refused certificates,
                // SASL and enforced authentication).
                reply::push_error(out, xid, 0, e);
                Verdict::Close
            }
        }
    }

    fn sasl(&mut self, xid: i32, body: &Bytes, cx: &ConnParts) -> Verdict {
        let ConnParts {
            pipeline,
            out,
            metrics,
        } = *cx;
        let Some(settings) = &self.auth.sasl else {
            tracing::warn!(
                "a client sent a SASL token, but SASL is not configured (jaasLoginConfig)"
            );
            metrics.auth_failure(AuthFailure::Sasl);
            sasl_reply(out, xid, ErrorCode::AuthFailed, None);
            return Verdict::Close;
        };
        let token = match Reader::new(body.clone()).read_buffer() {
            Ok(t) => t.unwrap_or_default(),
            Err(e) => {
                return self.refuse(xid, out, metrics, &format!("undecodable SASL request: {e}"))
            }
        };
        // DIGEST-MD5 clients open with an empty token, GSSAPI clients with a Kerberos one;
        // a server with only one of the two answers every client with it, as ZooKeeper does.
        let exchange = self.exchange.get_or_insert_with(|| {
            if settings.kerberos.is_none() || (token.is_empty() && settings.user_count() > 0) {
                Exchange::Digest(DigestMd5::new(DIGEST_REALM))
            } else {
                Exchange::Gssapi(Box::default())
            }
        });
        let step = match exchange {
            Exchange::Digest(d) => match d.step(&token, |u| settings.password(u)) {
                Ok(digest_md5::Step::Challenge(c)) => Ok((Some(c), None)),
                Ok(digest_md5::Step::Done { id, final_token }) => Ok((Some(final_token), Some(id))),
                Err(e) => Err(e.to_string()),
            },
            Exchange::Gssapi(g) => match &settings.kerberos {
                Some(k) => match g.step(k.credentials(), &token) {
                    Ok(gssapi::Step::Continue(t)) => Ok((t, None)),
                    Ok(gssapi::Step::Done { principal }) => {
                        let id = k.rules.id(&principal);
                        tracing::info!("SASL: GSSAPI principal {principal} authenticated");
                        Ok((None, Some(id)))
                    }
                    Err(e) => Err(e.to_string()),
                },
                None => Err("GSSAPI is not configured (no Krb5LoginModule)".into()),
            },
        };
        match step {
            Ok((token, None)) => {
                sasl_reply(out, xid, ErrorCode::Ok, token.as_deref());
                Verdict::Answered
            }
            Ok((token, Some(id))) => {
                tracing::info!("SASL: authenticated as sasl:{id}");
                let mut p = pipeline.lock();
                let id = Id {
                    scheme: "sasl".into(),
                    id,
                };
                p.add_auth(id);
                drop(p);
                sasl_reply(out, xid, ErrorCode::Ok, token.as_deref());
                Verdict::Answered
            }
            Err(e) => self.refuse(xid, out, metrics, &e),
        }
    }

    fn refuse(&self, xid: i32, out: &Outbox, metrics: &Metrics, why: &str) -> Verdict {
        tracing::warn!("SASL authentication failed: {why}; closing the connection");
        metrics.auth_failure(AuthFailure::Sasl);
        let err = match &self.auth.enforced {
            Some(s) if s.iter().any(|s| s == "sasl") => ErrorCode::SessionClosedRequireSaslAuth,
            _ => ErrorCode::AuthFailed,
        };
        sasl_reply(out, xid, err, None);
        Verdict::Close
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::keys;

    #[test]
    fn enforcement_keys() {
        let a = Auth::from_keys(&keys(&[])).unwrap();
        assert!(a.enforced.is_none() && a.sasl.is_none());
        let a = Auth::from_keys(&keys(&[
            ("enforce.auth.enabled", "true"),
            ("enforce.auth.schemes", "x509, digest"),
            ("X509AuthenticationProvider.superUser", "CN=admin"),
        ]))
        .unwrap();
        assert_eq!(a.enforced.unwrap(), ["x509", "digest"]);
        assert_eq!(a.x509_super_user.as_deref(), Some("CN=admin"));
        assert!(Auth::from_keys(&keys(&[("enforce.auth.enabled", "true")])).is_err());
        assert!(Auth::from_keys(&keys(&[("sessionRequireClientSASLAuth", "true")])).is_err());
        assert!(Auth::from_keys(&keys(&[("enforce.auth.enabled", "yes please")])).is_err());
    }
}
