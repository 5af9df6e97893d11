//! Access control: ZooKeeper's ACL schemes, auth ids, and the permission check.
//!
//! A connection carries a list of auth ids (`ip:<address>` from the start, `digest:user:hash`
//! after `addauth digest`, `super:` for the configured super user). Every write carries its
//! session's ids into the replicated log, so the ACL check at apply time is deterministic on
//! every member. Behaviour follows ZooKeeper 3.8: `fixupACL` (dedup, `auth` expansion,
//! InvalidACL), `checkACL` (world:anyone, super bypass, per-scheme matching), and the
//! `digest` and `ip` providers.

use base64::Engine;
use jute::{Acl, ErrorCode, Id};
use sha1::{Digest, Sha1};

/// `digest` scheme: `user:password` → `user:base64(sha1("user:password"))`.
pub fn generate_digest(user_password: &str) -> String {
    let user = user_password.split(':').next().unwrap_or_default();
    let hash = Sha1::digest(user_password.as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// The auth id ZooKeeper gives every connection: its client address.
pub fn ip_id(addr: std::net::IpAddr) -> Id {
    Id {
        scheme: "ip".into(),
        id: addr.to_string(),
    }
}

/// The id that bypasses every ACL.
pub fn super_id() -> Id {
    Id {
        scheme: "super".into(),
        id: String::new(),
    }
}

/// Handles an auth packet: the ids to add to the connection, or `AuthFailed`.
pub fn authenticate(
    scheme: &str,
    auth: &[u8],
    peer: std::net::IpAddr,
    super_digest: Option<&str>,
) -> Result<Vec<Id>, ErrorCode> {
    match scheme {
        "digest" => {
            let text = String::from_utf8_lossy(auth);
            let digest = generate_digest(&text);
            let mut ids = Vec::with_capacity(2);
            if super_digest == Some(digest.as_str()) {
                ids.push(super_id());
            }
            ids.push(Id {
                scheme: "digest".into(),
                id: digest,
            });
            Ok(ids)
        }
        "ip" => Ok(vec![ip_id(peer)]),
        _ => Err(ErrorCode::AuthFailed),
    }
}

/// Java's `IPAuthenticationProvider.addr2Bytes` for IPv4 (each part parsed as an int 0..=255)
/// and IPv6.
fn addr_bytes(addr: &str) -> Option<Vec<u8>> {
    let parts: Vec<&str> = addr.split('.').collect();
    if parts.len() == 4 {
        let mut out = Vec::with_capacity(4);
        for p in parts {
            let v: i64 = p.parse().ok()?;
            if !(0..=255).contains(&v) {
                return None;
            }
            out.push(v as u8);
        }
        return Some(out);
    }
    addr.parse::<std::net::Ipv6Addr>()
        .ok()
        .map(|a| a.octets().to_vec())
}

fn ip_valid(id: &str) -> bool {
    let mut parts = id.splitn(2, '/');
    let Some(bytes) = parts.next().and_then(addr_bytes) else {
        return false;
    };
    match parts.next() {
        None => true,
        Some(bits) => bits
            .parse::<i64>()
            .is_ok_and(|b| b >= 0 && b <= bytes.len() as i64 * 8),
    }
}

fn ip_matches(client: &str, expr: &str) -> bool {
    let mut parts = expr.splitn(2, '/');
    let Some(acl_addr) = parts.next().and_then(addr_bytes) else {
        return false;
    };
    let bits = match parts.next() {
        None => acl_addr.len() * 8,
        Some(b) => match b.parse::<usize>() {
            Ok(b) if b <= acl_addr.len() * 8 => b,
            _ => return false,
        },
    };
    let Some(client_addr) = addr_bytes(client) else {
        return false;
    };
    if client_addr.len() != acl_addr.len() {
        return false;
    }
    for i in 0..bits {
        let mask = 0x80u8 >> (i % 8);
        if (client_addr[i / 8] & mask) != (acl_addr[i / 8] & mask) {
            return false;
        }
    }
    true
}

/// The schemes whose ids prove who a client is (ZooKeeper's `isAuthenticated()`
/// providers), and so stand for `auth` in an ACL.
const AUTHENTICATING: &[&str] = &["digest", "x509", "sasl"];

fn is_world_anyone(id: &Id) -> bool {
    id.scheme == "world" && id.id == "anyone"
}

/// ZooKeeper's `fixupACL`: removes duplicates, expands `auth` to the caller's authenticated
/// ids, and rejects an empty list or an id no provider accepts (INVALIDACL).
pub fn fixup(auth: &[Id], acls: &[Acl]) -> Result<Vec<Acl>, ErrorCode> {
    let mut unique: Vec<&Acl> = Vec::with_capacity(acls.len());
    for a in acls {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    if unique.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    let mut out = Vec::with_capacity(unique.len());
    for a in unique {
        if is_world_anyone(&a.id) {
            out.push(a.clone());
        } else if a.id.scheme == "auth" {
            // Only providers that authenticate (digest, x509, sasl) count; an ip id does not.
            let mut any = false;
            for id in auth
                .iter()
                .filter(|id| AUTHENTICATING.contains(&id.scheme.as_str()))
            {
                any = true;
                out.push(Acl {
                    perms: a.perms,
                    id: id.clone(),
                });
            }
            if !any {
                return Err(ErrorCode::InvalidAcl);
            }
        } else {
            let valid = match a.id.scheme.as_str() {
                "digest" => a.id.id.split(':').count() == 2,
                "ip" => ip_valid(&a.id.id),
                // X509AuthenticationProvider takes any subject; SASLAuthenticationProvider
                // any principal (KerberosName accepts plain names too).
                "x509" | "sasl" => !a.id.id.is_empty(),
                _ => false,
            };
            if !valid {
                return Err(ErrorCode::InvalidAcl);
            }
            out.push(a.clone());
        }
    }
    Ok(out)
}

/// ZooKeeper's `checkACL`: passes if any entry grants one of `perm`'s bits to one of the
/// caller's ids (or to world:anyone), or if the caller is super; otherwise NOAUTH.
pub fn check(acl: &[Acl], perm: i32, auth: &[Id]) -> Result<(), ErrorCode> {
    if acl.is_empty() || auth.iter().any(|id| id.scheme == "super") {
        return Ok(());
    }
    for a in acl {
        if a.perms & perm == 0 {
            continue;
        }
        if is_world_anyone(&a.id) {
            return Ok(());
        }
        for id in auth.iter().filter(|id| id.scheme == a.id.scheme) {
            let matches = match a.id.scheme.as_str() {
                "digest" | "x509" | "sasl" => id.id == a.id.id,
                "ip" => ip_matches(&id.id, &a.id.id),
                _ => false,
            };
            if matches {
                return Ok(());
            }
        }
    }
    Err(ErrorCode::NoAuth)
}

/// The user name an id shows in `whoAmI` (`AuthenticationProvider.getUserName`).
pub fn user_name(id: &Id) -> String {
    match id.scheme.as_str() {
        "digest" => id.id.split(':').next().unwrap_or_default().to_string(),
        _ => id.id.clone(),
    }
}

/// getACL without ADMIN permission masks digest hashes (`user:x`).
pub fn mask_digests(acl: &[Acl]) -> Vec<Acl> {
    acl.iter()
        .map(|a| {
            if a.id.scheme == "digest" {
                let user = a.id.id.split(':').next().unwrap_or_default();
                Acl {
                    perms: a.perms,
                    id: Id {
                        scheme: "digest".into(),
                        id: format!("{user}:x"),
                    },
                }
            } else {
                a.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use jute::perms;

    fn id(scheme: &str, id: &str) -> Id {
        Id {
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    #[test]
    fn digest_matches_zookeeper() {
        // DigestAuthenticationProvider.generateDigest("super:test") from ZooKeeper's docs.
        assert_eq!(
            generate_digest("super:test"),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        );
    }

    #[test]
    fn fixup_rules() {
        let open = Acl::open_unsafe();
        assert_eq!(
            fixup(&[], &[open.clone(), open.clone()]).unwrap(),
            vec![open.clone()]
        );
        assert_eq!(fixup(&[], &[]), Err(ErrorCode::InvalidAcl));
        let auth_acl = Acl {
            perms: perms::ALL,
            id: id("auth", ""),
        };
        assert_eq!(
            fixup(&[id("ip", "127.0.0.1")], std::slice::from_ref(&auth_acl)),
            Err(ErrorCode::InvalidAcl)
        );
        let user = id("digest", "u:hash");
        assert_eq!(
            fixup(&[id("ip", "127.0.0.1"), user.clone()], &[auth_acl]).unwrap(),
            vec![Acl {
                perms: perms::ALL,
                id: user
            }]
        );
        assert!(fixup(
            &[],
            &[Acl {
                perms: 1,
                id: id("ip", "10.0.0.0/8")
            }]
        )
        .is_ok());
        assert_eq!(
            fixup(
                &[],
                &[Acl {
                    perms: 1,
                    id: id("ip", "10.0.0.0/33")
                }]
            ),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup(
                &[],
                &[Acl {
                    perms: 1,
                    id: id("digest", "nocolon")
                }]
            ),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup(
                &[],
                &[Acl {
                    perms: 1,
                    id: id("world", "someone")
                }]
            ),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup(
                &[],
                &[Acl {
                    perms: 1,
                    id: id("sasl", "")
                }]
            ),
            Err(ErrorCode::InvalidAcl)
        );
        // x509 and sasl ids (any subject, any principal) are valid, and `auth` stands for
        // them as for digest ids.
        let x509 = Acl {
            perms: 1,
            id: id("x509", "CN=client1,O=Acme"),
        };
        assert_eq!(
            fixup(&[], std::slice::from_ref(&x509)),
            Ok(vec![x509.clone()])
        );
        let auth = Acl {
            perms: 1,
            id: id("auth", ""),
        };
        assert_eq!(
            fixup(&[id("ip", "1.2.3.4"), id("sasl", "bob")], &[auth]),
            Ok(vec![Acl {
                perms: 1,
                id: id("sasl", "bob")
            }])
        );
        assert!(check(&[x509], perms::READ, &[id("x509", "CN=client1,O=Acme")]).is_ok());
    }

    #[test]
    fn check_rules() {
        let acl = vec![
            Acl {
                perms: perms::READ,
                id: id("ip", "10.0.0.0/8"),
            },
            Acl {
                perms: perms::ALL,
                id: id("digest", "u:h"),
            },
        ];
        assert!(check(&acl, perms::READ, &[id("ip", "10.1.2.3")]).is_ok());
        assert_eq!(
            check(&acl, perms::WRITE, &[id("ip", "10.1.2.3")]),
            Err(ErrorCode::NoAuth)
        );
        assert_eq!(
            check(&acl, perms::READ, &[id("ip", "11.1.2.3")]),
            Err(ErrorCode::NoAuth)
        );
        assert!(check(&acl, perms::WRITE, &[id("digest", "u:h")]).is_ok());
        assert!(check(&acl, perms::WRITE, &[super_id()]).is_ok());
        assert!(check(&[Acl::open_unsafe()], perms::ADMIN, &[]).is_ok());
        assert!(check(&[Acl::read_unsafe()], perms::READ | perms::ADMIN, &[]).is_ok());
        assert_eq!(
            check(&[Acl::read_unsafe()], perms::WRITE, &[]),
            Err(ErrorCode::NoAuth)
        );
    }

    #[test]
    fn super_user_is_recognised() {
        let ids = authenticate(
            "digest",
            b"super:test",
            "127.0.0.1".parse().unwrap(),
            Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU="),
        )
        .unwrap();
        assert_eq!(ids[0], super_id());
        assert_eq!(
            authenticate("bogus", b"", "127.0.0.1".parse().unwrap(), None),
            Err(ErrorCode::AuthFailed)
        );
    }
}
