//! Null strings (length -1) in requests. Java's jute reads a null wherever a record has a
//! `ustring`, and clients send them: kazoo encodes an empty string as null (its
//! `CREATOR_ALL_ACL` is `ACL(ALL, Id("auth", ""))`), the Java client a `null` it was
//! given. Each scenario sends a null in one string field of one record and records what
//! the server answers (and whether the connection survives), then what the tree holds.

use bytes::{BufMut, BytesMut};
use jute::{OpCode, WriteExt};

use crate::conformance::req::*;
use crate::conformance::{Ctx, Res};

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![
        sc!(null_acl_ids),
        sc!(null_acl_scheme),
        sc!(null_paths_in_writes),
        sc!(null_paths_in_reads),
        sc!(null_paths_in_watch_requests),
        sc!(null_auth_scheme),
        sc!(null_strings_in_multi),
        sc!(null_entries_in_set_watches),
    ]
}

/// A body built field by field; `None` is a null string.
struct Body(BytesMut);

impl Body {
    fn new() -> Body {
        Body(BytesMut::new())
    }
    fn s(mut self, v: Option<&str>) -> Body {
        match v {
            Some(s) => self.0.put_ustring(s),
            None => self.0.put_i32(-1),
        }
        self
    }
    fn i(mut self, v: i32) -> Body {
        self.0.put_i32(v);
        self
    }
    fn l(mut self, v: i64) -> Body {
        self.0.put_i64(v);
        self
    }
    fn b(mut self, v: bool) -> Body {
        self.0.put_u8(v as u8);
        self
    }
    fn data(mut self, d: &[u8]) -> Body {
        self.0.put_buffer(Some(d));
        self
    }
    /// One ACL entry.
    fn acl(self, perms: i32, scheme: Option<&str>, id: Option<&str>) -> Body {
        self.i(perms).s(scheme).s(id)
    }
    fn bytes(&self) -> Vec<u8> {
        self.0.to_vec()
    }
}

/// A create body: path, data "x", one ACL entry, flags.
fn create_body(path: Option<&str>, scheme: Option<&str>, id: Option<&str>, flags: i32) -> Vec<u8> {
    Body::new()
        .s(path)
        .data(b"x")
        .i(1)
        .acl(31, scheme, id)
        .i(flags)
        .bytes()
}

/// Sends one raw request on a fresh session and records the answer (or the close); if the
/// connection survived, a ping shows it still works.
async fn probe(c: &mut Ctx, label: &str, op: OpCode, body: &[u8]) -> Res {
    c.open(label).await?;
    c.send_op(label, 7, op.code(), body).await?;
    if c.reply_or_close(label, 7).await?.is_some() {
        c.ping(label).await?;
    }
    Ok(())
}

/// ACL ids that are null, per scheme: `auth` (kazoo's `CREATOR_ALL_ACL`) without and with
/// an authenticated identity, `world`, `digest`, `ip`; then setACL with a null auth id.
async fn null_acl_ids(c: &mut Ctx) -> Res {
    let p = c.p("");
    c.open("s0").await?;
    c.call("s0", create(&p, b"", PERSISTENT)).await?;
    for (i, scheme) in ["auth", "world", "digest", "ip"].iter().enumerate() {
        let path = format!("{p}/n{i}");
        let body = create_body(Some(&path), Some(scheme), None, PERSISTENT);
        probe(c, &format!("c{i}"), OpCode::Create, &body).await?;
        c.call("s0", exists(&path, false)).await?;
    }
    // With an authenticated identity, `auth` with a null id grants it, as an empty id does.
    c.open("a").await?;
    c.auth("a", "digest", b"user:secret").await?;
    let path = format!("{p}/mine");
    let body = create_body(Some(&path), Some("auth"), None, PERSISTENT);
    c.send_op("a", 8, OpCode::Create2.code(), &body).await?;
    c.reply("a", 8).await?;
    c.call("a", get_acl(&path)).await?;
    // setACL with a null auth id, on the authenticated session.
    let body = Body::new()
        .s(Some(&path))
        .i(1)
        .acl(31, Some("auth"), None)
        .i(-1)
        .bytes();
    c.send_op("a", 9, OpCode::SetAcl.code(), &body).await?;
    c.reply("a", 9).await?;
    c.call("a", get_acl(&path)).await?;
    Ok(())
}

/// A null ACL scheme in create and in setACL.
async fn null_acl_scheme(c: &mut Ctx) -> Res {
    let p = c.p("");
    c.open("s0").await?;
    c.call("s0", create(&p, b"", PERSISTENT)).await?;
    let path = format!("{p}/n");
    let body = create_body(Some(&path), None, Some("anyone"), PERSISTENT);
    probe(c, "c", OpCode::Create, &body).await?;
    c.call("s0", exists(&path, false)).await?;
    let body = Body::new()
        .s(Some(&p))
        .i(1)
        .acl(31, None, Some("anyone"))
        .i(-1)
        .bytes();
    probe(c, "s", OpCode::SetAcl, &body).await?;
    c.call("s0", get_acl(&p)).await?;
    Ok(())
}

/// Null paths in every write.
async fn null_paths_in_writes(c: &mut Ctx) -> Res {
    let p = c.p("");
    c.open("s0").await?;
    c.call("s0", create(&p, b"", PERSISTENT)).await?;
    let cases: Vec<(&str, OpCode, Vec<u8>)> = vec![
        (
            "create",
            OpCode::Create,
            create_body(None, Some("world"), Some("anyone"), PERSISTENT),
        ),
        (
            "create2",
            OpCode::Create2,
            create_body(None, Some("world"), Some("anyone"), PERSISTENT),
        ),
        (
            "container",
            OpCode::CreateContainer,
            create_body(None, Some("world"), Some("anyone"), CONTAINER),
        ),
        ("delete", OpCode::Delete, Body::new().s(None).i(-1).bytes()),
        (
            "setdata",
            OpCode::SetData,
            Body::new().s(None).data(b"y").i(-1).bytes(),
        ),
        (
            "setacl",
            OpCode::SetAcl,
            Body::new()
                .s(None)
                .i(1)
                .acl(31, Some("world"), Some("anyone"))
                .i(-1)
                .bytes(),
        ),
    ];
    for (label, op, body) in cases {
        probe(c, label, op, &body).await?;
    }
    c.call("s0", get_children(&p, false)).await?;
    Ok(())
}

/// Null paths in every read.
async fn null_paths_in_reads(c: &mut Ctx) -> Res {
    let cases: Vec<(&str, OpCode, Vec<u8>)> = vec![
        (
            "exists",
            OpCode::Exists,
            Body::new().s(None).b(false).bytes(),
        ),
        (
            "exists_w",
            OpCode::Exists,
            Body::new().s(None).b(true).bytes(),
        ),
        (
            "getdata",
            OpCode::GetData,
            Body::new().s(None).b(false).bytes(),
        ),
        ("getacl", OpCode::GetAcl, Body::new().s(None).bytes()),
        (
            "children",
            OpCode::GetChildren,
            Body::new().s(None).b(false).bytes(),
        ),
        (
            "children2",
            OpCode::GetChildren2,
            Body::new().s(None).b(false).bytes(),
        ),
        (
            "allchildren",
            OpCode::GetAllChildrenNumber,
            Body::new().s(None).bytes(),
        ),
    ];
    for (label, op, body) in cases {
        probe(c, label, op, &body).await?;
    }
    Ok(())
}

/// Null paths in addWatch (accepted: a watch on a path nothing matches), removeWatches
/// (NOWATCHER) and checkWatches (MARSHALLINGERROR).
async fn null_paths_in_watch_requests(c: &mut Ctx) -> Res {
    let p = c.p("");
    c.open("s0").await?;
    c.call("s0", create(&p, b"", PERSISTENT)).await?;
    let cases: Vec<(&str, OpCode, Vec<u8>)> = vec![
        (
            "addwatch",
            OpCode::AddWatch,
            Body::new().s(None).i(0).bytes(),
        ),
        (
            "checkwatches",
            OpCode::CheckWatches,
            Body::new().s(None).i(1).bytes(),
        ),
        (
            "removewatches",
            OpCode::RemoveWatches,
            Body::new().s(None).i(3).bytes(),
        ),
    ];
    for (label, op, body) in cases {
        probe(c, label, op, &body).await?;
    }
    Ok(())
}

/// An auth packet whose scheme is null: AUTHFAILED, then the connection is closed.
async fn null_auth_scheme(c: &mut Ctx) -> Res {
    c.open("a").await?;
    let body = Body::new().i(0).s(None).data(b"user:pw").bytes();
    c.send_op("a", -4, OpCode::Auth.code(), &body).await?;
    c.reply_or_close("a", -4).await?;
    c.wait_closed("a", 2000).await?;
    Ok(())
}

/// Null strings inside a multi: a null path in any op (first or later) fails the whole
/// multi with MARSHALLINGERROR and an empty list of results; a null id under `digest` is
/// MARSHALLINGERROR with no body; a null scheme is that op's INVALIDACL.
async fn null_strings_in_multi(c: &mut Ctx) -> Res {
    let p = c.p("");
    c.open("s0").await?;
    c.call("s0", create(&p, b"", PERSISTENT)).await?;
    let op = |b: Body, op: OpCode| b.i(op.code()).b(false).i(-1);
    let end = |b: Body| b.i(-1).b(true).i(-1);
    let open = |b: Body| b.i(1).acl(31, Some("world"), Some("anyone"));
    let cases: Vec<(&str, Body)> = vec![
        (
            "create",
            open(op(Body::new(), OpCode::Create).s(None).data(b"")).i(0),
        ),
        ("delete", op(Body::new(), OpCode::Delete).s(None).i(-1)),
        (
            "setdata",
            op(Body::new(), OpCode::SetData).s(None).data(b"").i(-1),
        ),
        ("check", op(Body::new(), OpCode::Check).s(None).i(-1)),
        (
            "second",
            op(
                op(Body::new(), OpCode::Check).s(Some(&p)).i(-1),
                OpCode::Delete,
            )
            .s(None)
            .i(-1),
        ),
        (
            "digest",
            op(Body::new(), OpCode::Create)
                .s(Some(&format!("{p}/d")))
                .data(b"")
                .i(1)
                .acl(31, Some("digest"), None)
                .i(0),
        ),
        (
            "scheme",
            op(Body::new(), OpCode::Create)
                .s(Some(&format!("{p}/e")))
                .data(b"")
                .i(1)
                .acl(31, None, Some("x"))
                .i(0),
        ),
    ];
    for (label, body) in cases {
        probe(c, label, OpCode::Multi, &end(body).bytes()).await?;
    }
    c.call("s0", get_children(&p, false)).await?;
    Ok(())
}

/// A null entry in each list of a setWatches: the entries before it are handled (events
/// fired, watches set), the rest is not, and the answer is MARSHALLINGERROR.
async fn null_entries_in_set_watches(c: &mut Ctx) -> Res {
    let p = c.p("");
    c.open("s0").await?;
    c.call("s0", create(&p, b"", PERSISTENT)).await?;
    c.call("s0", create(&format!("{p}/y1"), b"", PERSISTENT))
        .await?;
    for which in 0..3 {
        let mut body = Body::new().l(0);
        for list in 0..3 {
            body = if list == which {
                body.i(3).s(Some(&p)).s(None).s(Some(&format!("{p}/zz")))
            } else {
                body.i(1).s(Some(&format!("{p}/y{list}")))
            };
        }
        let label = format!("sw{which}");
        probe(c, &label, OpCode::SetWatches, &body.bytes()).await?;
        // Which watches the entries before the null left: a change to each path tells.
        c.call("s0", set_data(&format!("{p}/y1"), b"changed", -1))
            .await?;
        c.quiet(&label, 200).await?;
    }
    Ok(())
}
