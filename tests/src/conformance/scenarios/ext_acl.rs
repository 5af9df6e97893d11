//! Issue 3 access control: setACL/getACL with aversion and BADVERSION, enforcement of
//! READ/WRITE/CREATE/DELETE/ADMIN (NOAUTH), the auth packet (xid -4, digest
//! `user:password`, AUTHFAILED for an unknown scheme), the world/auth/digest/ip schemes,
//! INVALIDACL, and whoAmI.
//!
//! Nodes whose ACL would stop cleanup from deleting what lies under them carry an extra
//! `digest:cleaner` entry (see `req::cleaner`).

use jute::perms::{ADMIN, ALL, CREATE, DELETE, READ, WRITE};
use jute::Request;

use crate::conformance::req::*;
use crate::conformance::{Ctx, Res};

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![
        sc!(acl_set_get_aversion),
        sc!(acl_read_enforced),
        sc!(acl_write_enforced),
        sc!(acl_create_enforced),
        sc!(acl_delete_enforced),
        sc!(acl_admin_enforced_and_get_acl_masking),
        sc!(auth_digest_and_auth_scheme),
        sc!(auth_unknown_scheme_fails),
        sc!(auth_odd_digest_credentials),
        sc!(acl_digest_scheme_explicit),
        sc!(acl_ip_scheme),
        sc!(acl_invalid),
        sc!(acl_in_multi),
        sc!(who_am_i),
    ]
}

fn world(perms: i32) -> jute::Acl {
    acl(perms, "world", "anyone")
}

/// setACL bumps aversion (not version), BADVERSION on a stale aversion, getACL returns the
/// list as set (order kept).
async fn acl_set_get_aversion(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", create2(&a, b"", PERSISTENT)).await?;
    let list = vec![
        world(READ | WRITE | ADMIN),
        acl(ALL, "digest", BOB_DIGEST),
        acl(ALL, "digest", ALICE_DIGEST),
        acl(READ, "ip", "127.0.0.1"),
    ];
    c.call("s1", set_acl(&a, list.clone(), 0)).await?;
    c.call("s1", get_acl(&a)).await?;
    c.call("s1", set_acl(&a, vec![world(ALL)], 0)).await?;
    c.call("s1", set_acl(&a, vec![world(ALL)], 5)).await?;
    c.call("s1", set_acl(&a, vec![world(ALL)], 1)).await?;
    c.call("s1", set_acl(&a, vec![world(ALL)], -1)).await?;
    c.call("s1", set_data(&a, b"x", 0)).await?;
    c.call("s1", get_acl(&a)).await?;
    c.call("s1", set_acl(&c.p("missing"), vec![world(ALL)], -1))
        .await?;
    Ok(())
}

/// Without READ: getData, getChildren(2), getAllChildrenNumber, multiRead refused; exists
/// allowed; getACL allowed with ADMIN.
async fn acl_read_enforced(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call(
        "s1",
        create2_acl(&a, b"secret", vec![world(ALL & !READ)], PERSISTENT),
    )
    .await?;
    c.call("s1", get_data(&a, false)).await?;
    c.call("s1", get_children(&a, false)).await?;
    c.call("s1", get_children2(&a, false)).await?;
    c.call("s1", get_acl(&a)).await?;
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", get_all_children_number(&a)).await?;
    c.call("s1", multi_read(vec![op::get_data(&a)])).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s1", set_data(&a, b"x", -1)).await?;
    c.quiet("s1", 150).await?;
    Ok(())
}

/// Without WRITE: setData refused (also in a multi).
async fn acl_write_enforced(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call(
        "s1",
        create2_acl(&a, b"v", vec![world(ALL & !WRITE)], PERSISTENT),
    )
    .await?;
    c.call("s1", set_data(&a, b"x", -1)).await?;
    c.call("s1", set_data(&a, b"x", 7)).await?;
    c.call("s1", multi(vec![op::set_data(&a, b"x", -1)]))
        .await?;
    c.call("s1", multi(vec![op::check(&a, 0)])).await?;
    c.call("s1", get_data(&a, false)).await?;
    Ok(())
}

/// Without CREATE on the parent: creates of every mode refused; the check comes after
/// the parent lookup and before NODEEXISTS.
async fn acl_create_enforced(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let p = c.p("p");
    c.call(
        "s1",
        create2_acl(&p, b"", vec![world(ALL & !CREATE)], PERSISTENT),
    )
    .await?;
    for flags in 0..4 {
        c.call("s1", create(&c.p("p/c"), b"", flags)).await?;
    }
    c.call("s1", create_container(&c.p("p/k"), b"")).await?;
    c.call("s1", create(&c.p("p/missing/c"), b"", PERSISTENT))
        .await?;
    c.call("s1", set_acl(&p, vec![world(ALL)], -1)).await?;
    c.call("s1", create(&c.p("p/c"), b"", PERSISTENT)).await?;
    c.call("s1", set_acl(&p, vec![world(ALL & !CREATE)], -1))
        .await?;
    c.call("s1", create(&c.p("p/c"), b"", PERSISTENT)).await?;
    c.call("s1", get_children2(&p, false)).await?;
    Ok(())
}

/// Without DELETE on the parent: the child cannot be deleted (the node's own ACL does not
/// matter); NONODE vs NOAUTH order for a missing child.
async fn acl_delete_enforced(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let p = c.p("p");
    c.call(
        "s1",
        create2_acl(&p, b"", vec![world(ALL & !DELETE), cleaner()], PERSISTENT),
    )
    .await?;
    c.call(
        "s1",
        create2_acl(&c.p("p/c"), b"", vec![world(ALL)], PERSISTENT),
    )
    .await?;
    c.call("s1", delete(&c.p("p/c"), -1)).await?;
    c.call("s1", delete(&c.p("p/c"), 9)).await?;
    c.call("s1", delete(&c.p("p/missing"), -1)).await?;
    c.call("s1", multi(vec![op::delete(&c.p("p/c"), -1)]))
        .await?;
    c.call(
        "s1",
        create2_acl(&c.p("q"), b"", vec![world(ALL & !DELETE)], PERSISTENT),
    )
    .await?;
    c.call("s1", delete(&c.p("q"), -1)).await?;
    c.call("s1", get_children(&p, false)).await?;
    Ok(())
}

/// Without ADMIN: setACL refused; getACL (READ suffices) hides digest hashes.
async fn acl_admin_enforced_and_get_acl_masking(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call(
        "s1",
        create2_acl(
            &a,
            b"",
            vec![world(ALL & !ADMIN), acl(ALL, "digest", ALICE_DIGEST)],
            PERSISTENT,
        ),
    )
    .await?;
    c.call("s1", set_acl(&a, vec![world(ALL)], -1)).await?;
    c.call("s1", get_acl(&a)).await?;
    c.auth("s1", "digest", b"alice:secret").await?;
    c.call("s1", get_acl(&a)).await?;
    c.call("s1", set_acl(&a, vec![world(ALL)], -1)).await?;
    c.call("s1", get_acl(&a)).await?;
    Ok(())
}

/// addauth digest (xid -4), then the `auth` scheme: the ACL becomes the session's digest
/// identity; another session is refused until it authenticates too.
async fn auth_digest_and_auth_scheme(c: &mut Ctx) -> Res {
    c.unordered_acls();
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call(
        "s1",
        create2_acl(&c.p("x"), b"", vec![acl(ALL, "auth", "")], PERSISTENT),
    )
    .await?;
    c.auth("s1", "digest", b"alice:secret").await?;
    c.call(
        "s1",
        create2_acl(&a, b"private", vec![acl(ALL, "auth", "")], PERSISTENT),
    )
    .await?;
    c.call("s1", get_acl(&a)).await?;
    c.call("s1", get_data(&a, false)).await?;
    c.call("s2", get_data(&a, false)).await?;
    c.auth("s2", "digest", b"bob:secret").await?;
    c.call("s2", get_data(&a, false)).await?;
    c.auth("s2", "digest", b"alice:secret").await?;
    c.call("s2", get_data(&a, false)).await?;
    c.auth("s1", "digest", b"bob:secret").await?;
    c.call(
        "s1",
        create2_acl(
            &c.p("both"),
            b"",
            vec![acl(READ, "auth", "ignored")],
            PERSISTENT,
        ),
    )
    .await?;
    c.call("s1", get_acl(&c.p("both"))).await?;
    Ok(())
}

/// An auth packet for a scheme the server does not know: AUTHFAILED, and what follows.
async fn auth_unknown_scheme_fails(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    if c.auth("s1", "nosuchscheme", b"whatever").await?.is_some() {
        c.wait_closed("s1", 1000).await?;
    }
    c.call("s2", exists(&c.p(""), false)).await?;
    Ok(())
}

/// Digest credentials without a colon, empty, with several colons; auth_type other than 0.
async fn auth_odd_digest_credentials(c: &mut Ctx) -> Res {
    c.open("s0").await?;
    let cases: &[(&str, &[u8])] = &[
        ("d1", b"alice"),
        ("d2", b""),
        ("d3", b"carol:pw:extra"),
        ("d4", b":"),
    ];
    for (label, cred) in cases {
        c.open(label).await?;
        if c.auth(label, "digest", cred).await?.is_some() {
            c.call(label, Request::WhoAmI).await?;
        }
        c.call("s0", exists(&c.p(""), false)).await?;
    }
    c.open("d5").await?;
    let pkt = jute::AuthPacket {
        auth_type: 7,
        scheme: "digest".into(),
        auth: Some(bytes::Bytes::from_static(b"alice:secret")),
    };
    c.send_xid("d5", jute::xid::AUTH, Request::Auth(pkt))
        .await?;
    if c.reply_or_close("d5", jute::xid::AUTH).await?.is_some() {
        c.call("d5", Request::WhoAmI).await?;
    }
    Ok(())
}

/// An explicit digest ACL: only the session authenticated as that user gets in.
async fn acl_digest_scheme_explicit(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call(
        "s1",
        create2_acl(
            &a,
            b"d",
            vec![acl(READ | WRITE, "digest", ALICE_DIGEST), cleaner()],
            PERSISTENT,
        ),
    )
    .await?;
    c.call("s1", get_data(&a, false)).await?;
    c.auth("s2", "digest", b"alice:secret").await?;
    c.call("s2", get_data(&a, false)).await?;
    c.call("s2", set_data(&a, b"e", -1)).await?;
    c.call("s2", set_acl(&a, vec![world(ALL)], -1)).await?;
    c.call("s2", create(&c.p("a/c"), b"", PERSISTENT)).await?;
    Ok(())
}

/// ip ACLs: an exact address, a CIDR range, another address.
async fn acl_ip_scheme(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let cases = [
        ("local", "127.0.0.1"),
        ("range", "127.0.0.0/8"),
        ("other", "10.1.2.3"),
        ("otherrange", "10.0.0.0/8"),
    ];
    for (name, ip) in cases {
        let p = c.p(name);
        c.call(
            "s1",
            create2_acl(&p, b"", vec![acl(ALL, "ip", ip), cleaner()], PERSISTENT),
        )
        .await?;
        c.call("s1", get_data(&p, false)).await?;
        c.call("s1", create(&format!("{p}/c"), b"", PERSISTENT))
            .await?;
    }
    Ok(())
}

/// INVALIDACL: empty list, unknown scheme, malformed ip and digest ids, `auth` without
/// authentication, world with another id; in create and setACL.
async fn acl_invalid(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let cases: Vec<Vec<jute::Acl>> = vec![
        vec![],
        vec![acl(ALL, "nosuch", "x")],
        vec![acl(ALL, "ip", "not-an-ip")],
        vec![acl(ALL, "ip", "300.1.1.1")],
        vec![acl(ALL, "ip", "127.0.0.1/99")],
        vec![acl(ALL, "digest", "nocolon")],
        vec![acl(ALL, "auth", "")],
        vec![acl(ALL, "world", "someone")],
        vec![acl(0, "world", "anyone")],
        vec![acl(64, "world", "anyone")],
        vec![world(ALL), acl(ALL, "nosuch", "x")],
    ];
    for (i, list) in cases.into_iter().enumerate() {
        c.call(
            "s1",
            create2_acl(&c.p(&format!("n{i}")), b"", list.clone(), PERSISTENT),
        )
        .await?;
    }
    let a = c.p("a");
    c.call("s1", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", set_acl(&a, vec![], -1)).await?;
    c.call("s1", set_acl(&a, vec![acl(ALL, "nosuch", "x")], -1))
        .await?;
    c.call("s1", set_acl(&a, vec![acl(ALL, "auth", "")], -1))
        .await?;
    c.call("s1", get_acl(&a)).await?;
    c.call("s1", get_children(&c.p(""), false)).await?;
    Ok(())
}

/// NOAUTH inside a multi: the result list, nothing applied.
async fn acl_in_multi(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let p = c.p("p");
    c.call(
        "s1",
        create2_acl(
            &p,
            b"",
            vec![world(READ | WRITE | ADMIN), cleaner()],
            PERSISTENT,
        ),
    )
    .await?;
    c.call(
        "s1",
        multi(vec![
            op::set_data(&p, b"1", -1),
            op::create(&c.p("p/c"), b"", PERSISTENT),
            op::set_data(&p, b"2", -1),
        ]),
    )
    .await?;
    c.call("s1", get_data(&p, false)).await?;
    Ok(())
}

/// whoAmI (op 107) before and after digest authentications.
async fn who_am_i(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", Request::WhoAmI).await?;
    c.auth("s1", "digest", b"alice:secret").await?;
    c.call("s1", Request::WhoAmI).await?;
    c.auth("s1", "digest", b"bob:secret").await?;
    c.auth("s1", "digest", b"alice:secret").await?;
    c.call("s1", Request::WhoAmI).await?;
    c.drop_conn("s1").await?;
    c.reconnect("s1", None).await?;
    c.call("s1", Request::WhoAmI).await?;
    Ok(())
}
