//! Basic operations: create/create2 in every mode, delete, exists, getData, setData,
//! getChildren(2), sync, standalone check, ping, Stat fields, sequential numbering, the
//! reply header's zxid and xid, null vs empty data, world-only getACL/setACL.

use jute::Request;

use crate::conformance::req::*;
use crate::conformance::{Ctx, Res};

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![
        sc!(create_persistent),
        sc!(create2_every_mode),
        sc!(create_ephemeral_owner),
        sc!(create_sequential_suffix),
        sc!(create_sequential_trailing_slash),
        sc!(sequence_counter_mixed),
        sc!(sequence_never_reused),
        sc!(create_ephemeral_sequential),
        sc!(create_node_exists),
        sc!(create_missing_parent),
        sc!(create_under_ephemeral),
        sc!(null_vs_empty_data),
        sc!(create_invalid_flags),
        sc!(delete_versions_and_errors),
        sc!(exists_and_get_data),
        sc!(set_data_versions),
        sc!(get_children_variants),
        sc!(stat_after_child_ops),
        sc!(sync_replies),
        sc!(check_standalone),
        sc!(ping_replies),
        sc!(xid_echo),
        sc!(read_reply_zxid),
        sc!(failed_write_reply_zxid),
        sc!(large_data),
        sc!(acl_world_only),
        sc!(pipelined_requests),
        sc!(unicode_and_odd_names),
        sc!(many_children_cversion),
    ]
}

/// create (op 1) returns only the path; exists then shows a fresh node's Stat.
async fn create_persistent(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", create(&a, b"hello", PERSISTENT)).await?;
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", get_data(&a, false)).await?;
    Ok(())
}

/// create2 (op 15) in the four classic modes: the Stat of each, and the parent's.
async fn create2_every_mode(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create2(&c.p("p"), b"1", PERSISTENT)).await?;
    c.call("s1", create2(&c.p("e"), b"22", EPHEMERAL)).await?;
    c.call("s1", create2(&c.p("ps-"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", create2(&c.p("es-"), b"4444", EPHEMERAL_SEQUENTIAL))
        .await?;
    c.call("s1", get_children2(&c.p(""), false)).await?;
    Ok(())
}

/// An ephemeral's owner is its session; another session sees it; it goes with closeSession.
async fn create_ephemeral_owner(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let e = c.p("eph");
    c.call("s1", create(&e, b"x", EPHEMERAL)).await?;
    c.call("s2", exists(&e, false)).await?;
    c.call("s2", get_data(&e, false)).await?;
    c.close_session("s1").await?;
    c.call("s2", exists(&e, false)).await?;
    c.call("s2", get_children2(&c.p(""), false)).await?;
    Ok(())
}

/// Sequential suffixes: ten zero-padded digits, a counter per parent.
async fn create_sequential_suffix(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("x"), b"", PERSISTENT)).await?;
    for _ in 0..3 {
        c.call("s1", create(&c.p("n-"), b"", PERSISTENT_SEQUENTIAL))
            .await?;
    }
    c.call("s1", create(&c.p("x/n-"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", create(&c.p("x/"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", create(&c.p("x/lock-"), b"", EPHEMERAL_SEQUENTIAL))
        .await?;
    c.call("s1", get_children(&c.p("x"), false)).await?;
    Ok(())
}

/// A sequential create may end in "/" (the name is only the counter); a plain one may not.
async fn create_sequential_trailing_slash(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("q"), b"", PERSISTENT)).await?;
    c.call("s1", create2(&c.p("q/"), b"a", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", create2(&c.p("q/"), b"b", EPHEMERAL_SEQUENTIAL))
        .await?;
    c.call("s1", create(&c.p("q/"), b"", PERSISTENT)).await?;
    c.call("s1", create(&c.p("q/"), b"", EPHEMERAL)).await?;
    c.call("s1", create(&c.p("missing/"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", get_children2(&c.p("q"), false)).await?;
    Ok(())
}

/// Mixed sequential and plain creates and deletes: every create uses a number, deletes
/// never free one; the visible cversion counts creates and deletes.
async fn sequence_counter_mixed(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let d = c.p("d");
    c.call("s1", create(&d, b"", PERSISTENT)).await?;
    c.call("s1", create(&c.p("d/a"), b"", PERSISTENT)).await?;
    c.call("s1", create(&c.p("d/s-"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", get_children2(&d, false)).await?;
    c.call("s1", delete(&c.p("d/a"), -1)).await?;
    c.call("s1", get_children2(&d, false)).await?;
    c.call("s1", create(&c.p("d/s-"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", create(&c.p("d/b"), b"", EPHEMERAL)).await?;
    c.call("s1", create(&c.p("d/b"), b"", EPHEMERAL)).await?; // NodeExists: no number used?
    c.call("s1", create(&c.p("d/s-"), b"", EPHEMERAL_SEQUENTIAL))
        .await?;
    c.call("s1", delete(&c.p("d/b"), -1)).await?;
    c.call("s1", delete(&c.p("d/s-0000000001"), -1)).await?;
    c.call("s1", get_children2(&d, false)).await?;
    c.call("s1", create2(&c.p("d/s-"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", exists(&d, false)).await?;
    Ok(())
}

/// Deleting the highest sequential node does not make its number available again.
async fn sequence_never_reused(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let r = c
        .call("s1", create(&c.p("job-"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    let first = r.created_path().unwrap_or_default().to_string();
    c.call("s1", delete(&first, -1)).await?;
    c.call("s1", create(&c.p("job-"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", create(&c.p("job-"), b"", EPHEMERAL_SEQUENTIAL))
        .await?;
    c.call("s1", exists(&c.p(""), false)).await?;
    Ok(())
}

/// Ephemeral-sequential nodes: owner, numbering, gone with the session.
async fn create_ephemeral_sequential(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    c.call("s1", create2(&c.p("lock-"), b"a", EPHEMERAL_SEQUENTIAL))
        .await?;
    c.call("s2", create2(&c.p("lock-"), b"b", EPHEMERAL_SEQUENTIAL))
        .await?;
    c.call("s1", get_children2(&c.p(""), false)).await?;
    c.close_session("s1").await?;
    c.call("s2", get_children2(&c.p(""), false)).await?;
    Ok(())
}

/// NODEEXISTS for create and create2, in every mode, and for an existing ephemeral.
async fn create_node_exists(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", create(&a, b"1", PERSISTENT)).await?;
    c.call("s1", create(&a, b"2", PERSISTENT)).await?;
    c.call("s1", create2(&a, b"2", PERSISTENT)).await?;
    c.call("s1", create(&a, b"2", EPHEMERAL)).await?;
    c.call("s1", create(&c.p(""), b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, false)).await?;
    Ok(())
}

/// NONODE when the parent is missing, in every mode.
async fn create_missing_parent(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    for flags in 0..4 {
        c.call("s1", create(&c.p("no/x"), b"", flags)).await?;
    }
    c.call("s1", create2(&c.p("no/deeper/x"), b"", PERSISTENT))
        .await?;
    c.call("s1", exists(&c.p("no"), false)).await?;
    Ok(())
}

/// NOCHILDRENFOREPHEMERALS for every mode under an ephemeral; NODEEXISTS is checked first.
async fn create_under_ephemeral(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let e = c.p("e");
    c.call("s1", create(&e, b"", EPHEMERAL)).await?;
    for flags in 0..4 {
        c.call("s1", create(&c.p("e/c"), b"", flags)).await?;
    }
    c.call("s2", create2(&c.p("e/c"), b"", PERSISTENT)).await?;
    c.call("s1", create(&c.p("e/"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", get_children2(&e, false)).await?;
    Ok(())
}

/// Null data and empty data: both dataLength 0; what getData returns for each.
async fn null_vs_empty_data(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let n = c.p("null");
    let e = c.p("empty");
    c.call("s1", create2_null(&n, PERSISTENT)).await?;
    c.call("s1", create2(&e, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&n, false)).await?;
    c.call("s1", get_data(&e, false)).await?;
    c.call("s1", set_data(&n, b"x", -1)).await?;
    c.call("s1", set_data_null(&n, -1)).await?;
    c.call("s1", get_data(&n, false)).await?;
    c.call("s1", set_data_null(&e, -1)).await?;
    c.call("s1", get_data(&e, false)).await?;
    Ok(())
}

/// Create flags outside 0..=3 (and the container/TTL flags sent with plain create).
async fn create_invalid_flags(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    for flags in [7, 99, -1, 4, 5, 6] {
        c.call("s1", create(&c.p(&format!("f{flags}")), b"", flags))
            .await?;
    }
    c.call("s1", get_children(&c.p(""), false)).await?;
    Ok(())
}

/// delete: BADVERSION, version match, -1 any, NONODE, NOTEMPTY.
async fn delete_versions_and_errors(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", set_data(&a, b"1", 0)).await?;
    c.call("s1", delete(&a, 0)).await?;
    c.call("s1", delete(&a, 7)).await?;
    c.call("s1", delete(&a, 1)).await?;
    c.call("s1", delete(&a, -1)).await?;
    c.call("s1", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", delete(&a, -1)).await?;
    c.call("s1", delete(&a, -5)).await?;
    let b = c.p("b");
    c.call("s1", create(&b, b"", PERSISTENT)).await?;
    c.call("s1", create(&c.p("b/c"), b"", PERSISTENT)).await?;
    c.call("s1", delete(&b, -1)).await?;
    c.call("s1", delete(&b, 5)).await?; // NOTEMPTY or BADVERSION first?
    c.call("s1", delete(&c.p("b/c"), -1)).await?;
    c.call("s1", delete(&b, 0)).await?;
    Ok(())
}

/// exists and getData on present and missing nodes.
async fn exists_and_get_data(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", get_data(&a, false)).await?;
    c.call("s1", create(&a, b"data", PERSISTENT)).await?;
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", get_data(&a, false)).await?;
    c.call("s1", exists(&c.p("a/b/c"), false)).await?;
    Ok(())
}

/// setData: version increments, BADVERSION, -1 any, mzxid/mtime move, ctime stays.
async fn set_data_versions(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", create2(&a, b"v0", PERSISTENT)).await?;
    c.call("s1", set_data(&a, b"v1", 0)).await?;
    c.call("s1", set_data(&a, b"v2", 0)).await?;
    c.call("s1", set_data(&a, b"v2", 1)).await?;
    c.call("s1", set_data(&a, b"longer value", -1)).await?;
    c.call("s1", set_data(&a, b"longer value", -1)).await?;
    c.call("s1", set_data(&a, b"", 4)).await?;
    c.call("s1", set_data(&a, b"x", -2)).await?;
    c.call("s1", set_data(&c.p("missing"), b"x", -1)).await?;
    c.call("s1", set_data(&c.p("missing"), b"x", 3)).await?;
    c.call("s1", get_data(&a, false)).await?;
    Ok(())
}

/// getChildren and getChildren2: leaf, several children, missing node.
async fn get_children_variants(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let r = c.p("");
    c.call("s1", get_children(&r, false)).await?;
    c.call("s1", get_children2(&r, false)).await?;
    for n in ["b", "a", "c", "aa", "B"] {
        c.call("s1", create(&c.p(n), n.as_bytes(), PERSISTENT))
            .await?;
    }
    c.call("s1", get_children(&r, false)).await?;
    c.call("s1", get_children2(&r, false)).await?;
    c.call("s1", get_children(&c.p("a"), false)).await?;
    c.call("s1", get_children2(&c.p("a"), false)).await?;
    c.call("s1", get_children(&c.p("zz"), false)).await?;
    c.call("s1", get_children2(&c.p("zz"), false)).await?;
    Ok(())
}

/// The parent's Stat after a child's create, data change and delete (pzxid, cversion,
/// numChildren; mzxid and version unchanged).
async fn stat_after_child_ops(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let p = c.p("p");
    c.call("s1", create2(&p, b"parent", PERSISTENT)).await?;
    c.call("s1", create2(&c.p("p/c1"), b"", PERSISTENT)).await?;
    c.call("s1", exists(&p, false)).await?;
    c.call("s1", set_data(&c.p("p/c1"), b"changed", -1)).await?;
    c.call("s1", exists(&p, false)).await?;
    c.call("s1", create2(&c.p("p/c2"), b"", EPHEMERAL)).await?;
    c.call("s1", exists(&p, false)).await?;
    c.call("s1", delete(&c.p("p/c1"), -1)).await?;
    c.call("s1", exists(&p, false)).await?;
    c.call("s1", delete(&c.p("p/c1"), -1)).await?;
    c.call("s1", exists(&p, false)).await?;
    c.call("s1", set_data(&p, b"p2", -1)).await?;
    c.call("s1", get_children2(&p, false)).await?;
    Ok(())
}

/// sync: the reply echoes the path; a missing or odd path.
async fn sync_replies(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", sync(&c.p(""))).await?;
    c.call("s1", create(&c.p("a"), b"", PERSISTENT)).await?;
    c.call("s1", sync(&c.p("a"))).await?;
    c.call("s1", sync(&c.p("missing"))).await?;
    c.call("s1", sync("/")).await?;
    c.call("s1", sync("")).await?;
    c.call("s1", sync("relative")).await?;
    Ok(())
}

/// check (op 13) sent on its own, outside a multi. Apache ZooKeeper 3.8 has a bug here:
/// FinalRequestProcessor serializes a null Stat, the NullPointerException is logged and
/// NO reply is sent (the connection stays open, and the check consumed a zxid). zooraft
/// need not copy a crash, so the answer to the check is an allowed difference; what is
/// compared is that the server and the connection carry on.
async fn check_standalone(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", create(&a, b"", PERSISTENT)).await?;
    c.send("s1", check(&a, 0)).await?;
    let closed = c.probe_closed("s1", 300).await?;
    c.allowed(format!(
        "s1 standalone check: connection closed={closed} (Apache: no reply at all, NPE logged)"
    ));
    c.open("s2").await?;
    c.call("s2", set_data(&a, b"x", 0)).await?;
    c.call("s2", get_data(&a, false)).await?;
    Ok(())
}

/// Pings: xid -2 echoed, the header zxid follows the server's last zxid. A ping sent with
/// an ordinary xid is still answered with xid -2.
async fn ping_replies(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.ping("s1").await?;
    c.call("s1", create(&c.p("a"), b"", PERSISTENT)).await?;
    c.ping("s1").await?;
    c.call("s1", set_data(&c.p("a"), b"1", -1)).await?;
    c.ping("s1").await?;
    // A ping is answered with xid -2 whatever xid it was sent with.
    c.send_xid("s1", 77, Request::Ping).await?;
    c.recv("s1").await?;
    c.call("s1", exists(&c.p("a"), false)).await?;
    Ok(())
}

/// Replies echo the request's xid, whatever it is (non-reserved values).
async fn xid_echo(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call_xid("s1", 0, create(&a, b"", PERSISTENT)).await?;
    c.call_xid("s1", 1_000_000, exists(&a, false)).await?;
    c.call_xid("s1", i32::MAX, get_data(&a, false)).await?;
    c.call_xid("s1", 5, exists(&a, false)).await?;
    c.call_xid("s1", 5, exists(&a, false)).await?;
    c.call_xid("s1", 3, get_children(&a, false)).await?;
    c.call_xid("s1", -3, exists(&a, false)).await?;
    c.call_xid("s1", -100, exists(&a, false)).await?;
    c.call_xid("s1", i32::MIN, exists(&a, false)).await?;
    Ok(())
}

/// A read's reply header carries the server's last zxid, including other sessions' writes.
async fn read_reply_zxid(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s1", create(&a, b"", PERSISTENT)).await?;
    c.call("s2", exists(&a, false)).await?;
    c.call("s2", set_data(&a, b"x", -1)).await?;
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", get_children(&c.p(""), false)).await?;
    c.call("s1", get_data(&c.p("missing"), false)).await?;
    c.call("s2", create(&c.p("b"), b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, false)).await?;
    Ok(())
}

/// The reply header zxid of failed writes, and of the reads that follow them.
async fn failed_write_reply_zxid(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", create(&a, b"", PERSISTENT)).await?; // NODEEXISTS
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", set_data(&a, b"", 9)).await?; // BADVERSION
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", delete(&c.p("nope"), -1)).await?; // NONODE
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", create(&c.p("x/y"), b"", PERSISTENT)).await?; // NONODE parent
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", create(&c.p("bad//path"), b"", PERSISTENT))
        .await?; // BADARGUMENTS
    c.call("s1", exists(&a, false)).await?;
    c.call("s1", set_data(&a, b"ok", -1)).await?;
    c.call("s1", exists(&a, false)).await?;
    Ok(())
}

/// A 512 KiB value is stored and returned whole.
async fn large_data(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let big: Vec<u8> = (0..512 * 1024).map(|i| (i % 251) as u8).collect();
    let a = c.p("big");
    c.call("s1", create2(&a, &big, PERSISTENT)).await?;
    c.call("s1", get_data(&a, false)).await?;
    let bigger: Vec<u8> = (0..900 * 1024).map(|i| (i % 13) as u8).collect();
    c.call("s1", set_data(&a, &bigger, -1)).await?;
    c.call("s1", get_data(&a, false)).await?;
    Ok(())
}

/// getACL and setACL with world:anyone only: aversion, BADVERSION, NONODE.
async fn acl_world_only(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", get_acl(&a)).await?;
    c.call(
        "s1",
        set_acl(&a, vec![acl(jute::perms::ALL, "world", "anyone")], 0),
    )
    .await?;
    c.call("s1", get_acl(&a)).await?;
    c.call(
        "s1",
        set_acl(&a, vec![acl(jute::perms::ALL, "world", "anyone")], 0),
    )
    .await?;
    c.call(
        "s1",
        set_acl(&a, vec![acl(jute::perms::ALL, "world", "anyone")], -1),
    )
    .await?;
    c.call("s1", get_acl(&c.p("missing"))).await?;
    c.call("s1", exists(&a, false)).await?;
    Ok(())
}

/// Many requests written at once are answered in order.
async fn pipelined_requests(c: &mut Ctx) -> Res {
    c.mask_times();
    c.open("s1").await?;
    let a = c.p("a");
    let reqs = vec![
        create(&a, b"0", PERSISTENT),
        get_data(&a, false),
        set_data(&a, b"1", 0),
        set_data(&a, b"2", 0),
        exists(&a, false),
        create(&c.p("a/s-"), b"", PERSISTENT_SEQUENTIAL),
        create(&c.p("a/s-"), b"", PERSISTENT_SEQUENTIAL),
        get_children2(&a, false),
        delete(&a, -1),
        delete(&c.p("a/s-0000000000"), -1),
        delete(&c.p("a/s-0000000001"), -1),
        delete(&a, -1),
        exists(&a, false),
    ];
    let n = reqs.len();
    c.send_batch("s1", reqs).await?;
    c.replies("s1", n).await?;
    Ok(())
}

/// Names that are valid though unusual: unicode, spaces, dots inside names, long names.
async fn unicode_and_odd_names(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let long = "n".repeat(1000);
    for n in [
        "ü名前",
        "with space",
        "...",
        ".hidden",
        "a.b",
        "-",
        "zookeeper",
        long.as_str(),
    ] {
        c.call("s1", create(&c.p(n), b"", PERSISTENT)).await?;
    }
    c.call("s1", get_children(&c.p(""), false)).await?;
    c.call("s1", exists(&c.p("ü名前"), false)).await?;
    Ok(())
}

/// cversion and numChildren over twenty creates and ten deletes.
async fn many_children_cversion(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    for i in 0..20 {
        c.call("s1", create(&c.p(&format!("c{i}")), b"", PERSISTENT))
            .await?;
    }
    c.call("s1", exists(&c.p(""), false)).await?;
    for i in 0..10 {
        c.call("s1", delete(&c.p(&format!("c{i}")), -1)).await?;
    }
    c.call("s1", get_children2(&c.p(""), false)).await?;
    c.call("s1", create(&c.p("s-"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    Ok(())
}
