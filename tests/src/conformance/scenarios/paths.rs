//! Malformed paths: which error (BADARGUMENTS or NONODE, or success) each operation gives
//! for empty, relative, trailing-slash, `//`, `.`/`..`, NUL, control and special Unicode
//! characters, and invalid UTF-8, in ZooKeeper's order of checks.

use bytes::{BufMut, BytesMut};
use jute::{OpCode, WriteExt};

use crate::conformance::req::*;
use crate::conformance::{Ctx, Res};

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![
        sc!(path_empty),
        sc!(path_relative),
        sc!(path_trailing_slash),
        sc!(path_double_slash),
        sc!(path_dot_segments),
        sc!(path_nul_character),
        sc!(path_control_characters),
        sc!(path_special_unicode),
        sc!(path_invalid_utf8),
        sc!(path_sync_echo),
    ]
}

/// Every path-taking operation on `path`, in a fixed order.
async fn matrix(c: &mut Ctx, path: &str) -> Res {
    c.call("s1", create(path, b"", PERSISTENT)).await?;
    c.call("s1", create(path, b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", create2(path, b"", EPHEMERAL)).await?;
    c.call("s1", delete(path, -1)).await?;
    c.call("s1", exists(path, false)).await?;
    c.call("s1", get_data(path, false)).await?;
    c.call("s1", set_data(path, b"", -1)).await?;
    c.call("s1", get_children(path, false)).await?;
    c.call("s1", get_children2(path, false)).await?;
    c.call("s1", get_acl(path)).await?;
    c.call("s1", set_acl(path, open_acl(), -1)).await?;
    c.call("s1", multi(vec![op::check(path, -1)])).await?;
    c.call("s1", multi(vec![op::delete(path, -1)])).await?;
    Ok(())
}

/// Sets up `a` (with child `b`) under the root, then runs the matrix on each path.
async fn run_paths(c: &mut Ctx, paths: &[String]) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("a"), b"", PERSISTENT)).await?;
    c.call("s1", create(&c.p("a/b"), b"", PERSISTENT)).await?;
    for p in paths {
        matrix(c, p).await?;
    }
    c.call("s1", get_children(&c.p(""), false)).await?;
    c.call("s1", get_children(&c.p("a"), false)).await?;
    Ok(())
}

/// The empty path.
async fn path_empty(c: &mut Ctx) -> Res {
    run_paths(c, &[String::new()]).await
}

/// Paths without the leading slash.
async fn path_relative(c: &mut Ctx) -> Res {
    let rel = c.p("a")[1..].to_string();
    run_paths(c, &["a".into(), rel]).await
}

/// A trailing slash on an existing node, a missing node and the scenario root.
async fn path_trailing_slash(c: &mut Ctx) -> Res {
    let paths = vec![c.p("a/"), c.p("missing/"), c.p("a/b/")];
    run_paths(c, &paths).await
}

/// Empty segments.
async fn path_double_slash(c: &mut Ctx) -> Res {
    let paths = vec![
        c.p("/a"),
        c.p("a//b"),
        "//".into(),
        format!("/{}", c.p("a")),
    ];
    run_paths(c, &paths).await
}

/// `.` and `..` segments (names merely containing dots are valid, see ops).
async fn path_dot_segments(c: &mut Ctx) -> Res {
    let paths = vec![
        c.p("."),
        c.p(".."),
        c.p("a/."),
        c.p("a/./b"),
        c.p("a/../a"),
        c.p("./a"),
        "/.".into(),
        "/..".into(),
    ];
    run_paths(c, &paths).await
}

/// The NUL character.
async fn path_nul_character(c: &mut Ctx) -> Res {
    let paths = vec![c.p("a\0"), c.p("x\0y"), c.p("\0")];
    run_paths(c, &paths).await
}

/// C0 and C1 control characters and DEL.
async fn path_control_characters(c: &mut Ctx) -> Res {
    let paths = vec![
        c.p("x\u{1}"),
        c.p("x\t"),
        c.p("x\n"),
        c.p("x\u{1f}"),
        c.p("x\u{7f}"),
        c.p("x\u{80}"),
        c.p("x\u{9f}"),
        c.p("x\u{a0}"),
    ];
    run_paths(c, &paths).await
}

/// Unicode ranges ZooKeeper forbids: private use up to U+F8FF, U+FFF0..U+FFFF, and every
/// character outside the BMP (Java stores it as a surrogate pair); neighbours allowed.
async fn path_special_unicode(c: &mut Ctx) -> Res {
    let paths = vec![
        c.p("x\u{d7ff}"),
        c.p("x\u{e000}"),
        c.p("x\u{f8ff}"),
        c.p("x\u{f900}"),
        c.p("x\u{ffef}"),
        c.p("x\u{fff0}"),
        c.p("x\u{fffd}"),
        c.p("x\u{1f600}"),
    ];
    c.open("s1").await?;
    for p in &paths {
        c.call("s1", create(p, b"", PERSISTENT)).await?;
        c.call("s1", exists(p, false)).await?;
    }
    c.call("s1", get_children(&c.p(""), false)).await?;
    Ok(())
}

/// Bytes that are not UTF-8 in a path (Java decodes them to U+FFFD).
async fn path_invalid_utf8(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let mut base = c.p("bad").into_bytes();
    base.extend_from_slice(&[0xff, 0xfe]);
    let mut surrogate = c.p("sur").into_bytes();
    surrogate.extend_from_slice(&[0xed, 0xa0, 0x80]);
    for raw in [base, surrogate] {
        // create
        let mut b = BytesMut::new();
        b.put_buffer(Some(&raw));
        b.put_buffer(Some(b""));
        b.put_i32(1);
        b.put_i32(31);
        b.put_ustring("world");
        b.put_ustring("anyone");
        b.put_i32(0);
        c.send_op("s1", 100, OpCode::Create.code(), &b).await?;
        c.reply("s1", 100).await?;
        // exists, sync
        let mut b = BytesMut::new();
        b.put_buffer(Some(&raw));
        b.put_u8(0);
        c.send_op("s1", 101, OpCode::Exists.code(), &b).await?;
        c.reply("s1", 101).await?;
    }
    c.call("s1", get_children(&c.p(""), false)).await?;
    Ok(())
}

/// sync validates nothing: every malformed path is answered OK and echoed. The echo is
/// Java's re-encoding of the decoded string: invalid UTF-8 comes back as U+FFFD, and a
/// character outside the BMP as two 3-byte surrogate encodings (CESU-8), not 4 bytes.
async fn path_sync_echo(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let paths = vec![
        String::new(),
        "a".into(),
        c.p("a/"),
        c.p("/a"),
        c.p("."),
        c.p("a\0b"),
        c.p("x\u{1}"),
        c.p("x\u{e000}"),
        c.p("x\u{1f600}"),
        c.p("ü"),
    ];
    for p in &paths {
        c.call("s1", sync(p)).await?;
    }
    let mut raw = c.p("bad").into_bytes();
    raw.extend_from_slice(&[0xff, 0xfe]);
    let mut b = BytesMut::new();
    b.put_buffer(Some(&raw));
    c.send_op("s1", 100, OpCode::Sync.code(), &b).await?;
    c.reply("s1", 100).await?;
    Ok(())
}
