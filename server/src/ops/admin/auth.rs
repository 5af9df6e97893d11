//! Who may run the AdminServer commands that hand out, replace or move the ensemble's
//! state.
//!
//! `snapshot` and `restore` follow ZooKeeper 3.9's rule, so scripts written for its
//! AdminServer work unchanged: the request names an auth scheme in `Authorization: <scheme>
//! [<auth>]` — `digest user:password`, `x509` (the client certificate of the TLS connection)
//! or `ip` (the caller's address) — and the ids that scheme authenticates must be granted
//! every permission (ALL) by the root znode's ACL, as a client's would be; the super user
//! always is. No header: 401 `Auth info is missing for the command`; a scheme that
//! authenticates nobody: 401 `Not authenticated`; ids without ALL on `/`: 403 `Not
//! authorized` (ZooKeeper's answers).
//!
//! The leader-transfer commands (zooraft's own) need, once
//! `DigestAuthenticationProvider.superDigest` is set, the super user's digest.

use std::net::SocketAddr;

use hyper::header::{HeaderMap, AUTHORIZATION};
use hyper::StatusCode;
use jute::{perms, Id};

use super::super::http::PeerSubject;
use crate::net::{Auth, ClientPort};
use crate::state::acl;

/// Why a request was refused, with ZooKeeper's status and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    Missing,
    NotAuthenticated,
    NotAuthorized,
}

impl Refusal {
    pub fn status(self) -> StatusCode {
        match self {
            Refusal::Missing | Refusal::NotAuthenticated => StatusCode::UNAUTHORIZED,
            Refusal::NotAuthorized => StatusCode::FORBIDDEN,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Refusal::Missing => "Auth info is missing for the command",
            Refusal::NotAuthenticated => "Not authenticated",
            Refusal::NotAuthorized => "Not authorized",
        }
    }
}

/// What a request says of its caller.
pub(super) struct Caller<'a> {
    pub headers: &'a HeaderMap,
    pub subject: Option<&'a PeerSubject>,
    pub peer: SocketAddr,
}

/// ZooKeeper 3.9's rule for `snapshot` and `restore`: authenticated ids holding ALL on `/`.
pub(super) fn root_all(shared: &ClientPort, auth: &Auth, caller: &Caller) -> Result<(), Refusal> {
    let header = caller
        .headers
        .get(AUTHORIZATION)
        .ok_or(Refusal::Missing)?
        .to_str()
        .map_err(|_| Refusal::NotAuthenticated)?;
    let ids = authenticate(auth, header, caller)?;
    let state = shared.replica.state.read();
    let root = state.tree.get("/").ok_or(Refusal::NotAuthorized)?;
    // Every bit on its own: `acl::check` passes when any one of the bits asked is granted.
    let bits = [
        perms::READ,
        perms::WRITE,
        perms::CREATE,
        perms::DELETE,
        perms::ADMIN,
    ];
    bits.iter()
        .try_for_each(|bit| acl::check(root.acl(), *bit, &ids))
        .map_err(|_| Refusal::NotAuthorized)
}

/// The ids `Authorization: <scheme> [<auth>]` proves (ZooKeeper splits it on one space).
fn authenticate(auth: &Auth, header: &str, caller: &Caller) -> Result<Vec<Id>, Refusal> {
    let parts: Vec<&str> = header.split(' ').collect();
    let (scheme, data) = match parts.as_slice() {
        [scheme] => (*scheme, None),
        [scheme, data] => (*scheme, Some(*data)),
        _ => return Err(Refusal::NotAuthenticated),
    };
    let ids = match (scheme, data) {
        ("digest", Some(data)) => acl::authenticate(
            "digest",
            data.as_bytes(),
            caller.peer.ip(),
            auth.super_digest.as_deref(),
        )
        .map_err(|_| Refusal::NotAuthenticated)?,
        ("ip", _) => vec![acl::ip_id(caller.peer.ip())],
        ("x509", _) => caller
            .subject
            .map(|s| auth.x509_ids(s.0.clone()))
            .unwrap_or_default(),
        _ => return Err(Refusal::NotAuthenticated),
    };
    if ids.is_empty() {
        return Err(Refusal::NotAuthenticated);
    }
    Ok(ids)
}

/// The leader-transfer commands: the super user's digest once a super digest is set.
pub(super) fn super_digest(auth: &Auth, caller: &Caller) -> bool {
    let Some(super_digest) = auth.super_digest.as_deref() else {
        return true;
    };
    let Some(creds) = caller
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().strip_prefix("digest "))
    else {
        return false;
    };
    acl::authenticate(
        "digest",
        creds.trim().as_bytes(),
        caller.peer.ip(),
        Some(super_digest),
    )
    .is_ok_and(|ids| ids.contains(&acl::super_id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn caller<'a>(headers: &'a HeaderMap, subject: Option<&'a PeerSubject>) -> Caller<'a> {
        Caller {
            headers,
            subject,
            peer: SocketAddr::from(([127, 0, 0, 1], 5000)),
        }
    }

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(value).expect("header"));
        h
    }

    #[test]
    fn each_scheme_authenticates_as_zookeeper_3_9_does() {
        let auth = Auth {
            super_digest: Some(acl::generate_digest("super:secret")),
            x509_super_user: Some("CN=admin".into()),
            ..Auth::default()
        };
        let ids = |value: &str, subject: Option<&PeerSubject>| {
            authenticate(&auth, value, &caller(&headers(value), subject))
        };
        let digest = ids("digest super:secret", None).expect("digest");
        assert!(digest.contains(&acl::super_id()));
        let user = ids("digest bob:pw", None).expect("any digest user");
        assert_eq!(user.len(), 1);
        assert_eq!(user[0].id, acl::generate_digest("bob:pw"));
        assert_eq!(ids("ip", None).expect("ip")[0].id, "127.0.0.1");
        let admin = PeerSubject("CN=admin".into());
        assert!(ids("x509", Some(&admin))
            .expect("x509")
            .contains(&acl::super_id()));
        // x509 over plain HTTP has no certificate; unknown schemes and extra words fail.
        for bad in ["x509", "kerberos x", "digest a:b c", "digest"] {
            assert_eq!(ids(bad, None), Err(Refusal::NotAuthenticated), "{bad}");
        }
    }

    #[test]
    fn transfers_need_the_super_digest_only_once_one_is_set() {
        let open = Auth::default();
        assert!(super_digest(&open, &caller(&HeaderMap::new(), None)));
        let closed = Auth {
            super_digest: Some(acl::generate_digest("super:secret")),
            ..Auth::default()
        };
        assert!(!super_digest(&closed, &caller(&HeaderMap::new(), None)));
        let right = headers("digest super:secret");
        assert!(super_digest(&closed, &caller(&right, None)));
        let wrong = headers("digest super:nope");
        assert!(!super_digest(&closed, &caller(&wrong, None)));
    }
}
