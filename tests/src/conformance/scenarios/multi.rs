//! multi (op 14): atomic success, ZooKeeper's result list on failure (OK before the
//! failing op, its error, RUNTIMEINCONSISTENCY after), check ops, the reply header, watch
//! triggers of successful and failed multis, read ops inside a write multi.

use crate::conformance::req::*;
use crate::conformance::{Ctx, Res};

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![
        sc!(multi_success_result_encoding),
        sc!(multi_failure_in_middle),
        sc!(multi_failure_first_and_last),
        sc!(multi_check_ops),
        sc!(multi_empty),
        sc!(multi_failed_fires_no_watches),
        sc!(multi_success_fires_watches_before_reply),
        sc!(multi_sequential_and_ephemeral),
        sc!(multi_dependent_ops),
        sc!(multi_read_op_inside_write_multi),
        sc!(multi_bad_path_inside),
        sc!(multi_under_ephemeral_and_versions),
    ]
}

/// Every write op kind in one successful multi: the result list's encoding.
async fn multi_success_result_encoding(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("x"), b"old", PERSISTENT)).await?;
    c.call("s1", create(&c.p("gone"), b"", PERSISTENT)).await?;
    c.call(
        "s1",
        multi(vec![
            op::create(&c.p("a"), b"A", PERSISTENT),
            op::create2(&c.p("b"), b"B", PERSISTENT),
            op::set_data(&c.p("x"), b"new", 0),
            op::check(&c.p("x"), 1),
            op::delete(&c.p("gone"), 0),
        ]),
    )
    .await?;
    c.call("s1", get_children2(&c.p(""), false)).await?;
    c.call("s1", get_data(&c.p("x"), false)).await?;
    c.call("s1", get_data(&c.p("a"), false)).await?;
    Ok(())
}

/// A failing op in the middle: earlier ops report 0, the failing one its error, later ones
/// RUNTIMEINCONSISTENCY; nothing is applied.
async fn multi_failure_in_middle(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("exists"), b"", PERSISTENT))
        .await?;
    c.call(
        "s1",
        multi(vec![
            op::create(&c.p("a"), b"", PERSISTENT),
            op::set_data(&c.p("exists"), b"x", -1),
            op::create(&c.p("exists"), b"", PERSISTENT),
            op::create(&c.p("b"), b"", PERSISTENT),
            op::delete(&c.p("exists"), -1),
        ]),
    )
    .await?;
    c.call("s1", get_children2(&c.p(""), false)).await?;
    c.call("s1", get_data(&c.p("exists"), false)).await?;
    Ok(())
}

/// The failing op first, then last; errors NONODE, BADVERSION, NOTEMPTY.
async fn multi_failure_first_and_last(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("p"), b"", PERSISTENT)).await?;
    c.call("s1", create(&c.p("p/c"), b"", PERSISTENT)).await?;
    c.call(
        "s1",
        multi(vec![
            op::delete(&c.p("missing"), -1),
            op::create(&c.p("a"), b"", PERSISTENT),
            op::set_data(&c.p("p"), b"", -1),
        ]),
    )
    .await?;
    c.call(
        "s1",
        multi(vec![
            op::create(&c.p("a"), b"", PERSISTENT),
            op::set_data(&c.p("p"), b"", -1),
            op::set_data(&c.p("p"), b"", 0),
        ]),
    )
    .await?;
    c.call(
        "s1",
        multi(vec![
            op::create(&c.p("a"), b"", PERSISTENT),
            op::delete(&c.p("p"), -1),
        ]),
    )
    .await?;
    c.call("s1", exists(&c.p("p"), false)).await?;
    c.call("s1", exists(&c.p("a"), false)).await?;
    Ok(())
}

/// check ops: matching version, -1, wrong version (BADVERSION), missing node (NONODE).
async fn multi_check_ops(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let x = c.p("x");
    c.call("s1", create(&x, b"", PERSISTENT)).await?;
    c.call("s1", set_data(&x, b"1", -1)).await?;
    c.call("s1", multi(vec![op::check(&x, 1)])).await?;
    c.call("s1", multi(vec![op::check(&x, -1)])).await?;
    c.call(
        "s1",
        multi(vec![op::check(&x, 0), op::set_data(&x, b"2", -1)]),
    )
    .await?;
    c.call(
        "s1",
        multi(vec![op::set_data(&x, b"2", -1), op::check(&x, 1)]),
    )
    .await?;
    c.call(
        "s1",
        multi(vec![op::set_data(&x, b"2", -1), op::check(&x, 2)]),
    )
    .await?;
    c.call("s1", multi(vec![op::check(&c.p("missing"), -1)]))
        .await?;
    c.call("s1", get_data(&x, false)).await?;
    Ok(())
}

/// A multi with no ops.
async fn multi_empty(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", multi(vec![])).await?;
    c.call("s1", multi_read(vec![])).await?;
    c.call("s1", exists(&c.p(""), false)).await?;
    Ok(())
}

/// A failed multi triggers no watch; the next successful change does.
async fn multi_failed_fires_no_watches(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let x = c.p("x");
    c.call("s1", create(&x, b"", PERSISTENT)).await?;
    c.call("s2", get_data(&x, true)).await?;
    c.call("s2", get_children(&c.p(""), true)).await?;
    c.call("s2", exists(&c.p("new"), true)).await?;
    c.call(
        "s1",
        multi(vec![
            op::set_data(&x, b"1", -1),
            op::create(&c.p("new"), b"", PERSISTENT),
            op::delete(&c.p("missing"), -1),
        ]),
    )
    .await?;
    c.quiet("s2", 300).await?;
    c.call("s1", set_data(&x, b"2", -1)).await?;
    c.events("s2", 1).await?;
    c.quiet("s2", 100).await?;
    Ok(())
}

/// A successful multi fires every watch it touches; the session that sent it sees its own
/// events before the multi's reply.
async fn multi_success_fires_watches_before_reply(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let x = c.p("x");
    c.call("s1", create(&x, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&x, true)).await?;
    c.call("s1", exists(&c.p("y"), true)).await?;
    c.call("s1", get_children(&c.p(""), true)).await?;
    c.call("s2", get_data(&x, true)).await?;
    c.call("s2", exists(&c.p("y"), true)).await?;
    c.call(
        "s1",
        multi(vec![
            op::set_data(&x, b"1", -1),
            op::create(&c.p("y"), b"", PERSISTENT),
        ]),
    )
    .await?;
    c.events("s2", 2).await?;
    c.quiet("s1", 100).await?;
    c.quiet("s2", 100).await?;
    Ok(())
}

/// Sequential and ephemeral creates inside a multi.
async fn multi_sequential_and_ephemeral(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    c.call(
        "s1",
        multi(vec![
            op::create(&c.p("s-"), b"", PERSISTENT_SEQUENTIAL),
            op::create(&c.p("s-"), b"", PERSISTENT_SEQUENTIAL),
            op::create2(&c.p("e-"), b"", EPHEMERAL_SEQUENTIAL),
            op::create2(&c.p("e"), b"", EPHEMERAL),
        ]),
    )
    .await?;
    c.call("s1", get_children2(&c.p(""), false)).await?;
    c.close_session("s1").await?;
    c.call("s2", get_children2(&c.p(""), false)).await?;
    Ok(())
}

/// Later ops see earlier ones: create parent then child, set then check the new version,
/// delete child then parent.
async fn multi_dependent_ops(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let p = c.p("p");
    let ch = c.p("p/c");
    c.call(
        "s1",
        multi(vec![
            op::create(&p, b"", PERSISTENT),
            op::create2(&ch, b"", PERSISTENT),
            op::set_data(&ch, b"v1", 0),
            op::check(&ch, 1),
            op::set_data(&ch, b"v2", 1),
        ]),
    )
    .await?;
    c.call("s1", get_data(&ch, false)).await?;
    c.call("s1", exists(&p, false)).await?;
    c.call("s1", multi(vec![op::delete(&ch, 2), op::delete(&p, 0)]))
        .await?;
    c.call("s1", exists(&p, false)).await?;
    c.call(
        "s1",
        multi(vec![
            op::create(&p, b"", PERSISTENT),
            op::delete(&p, -1),
            op::create(&p, b"again", PERSISTENT),
        ]),
    )
    .await?;
    c.call("s1", exists(&p, false)).await?;
    Ok(())
}

/// getData / getChildren ops inside a write multi (op 14).
async fn multi_read_op_inside_write_multi(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let x = c.p("x");
    c.call("s1", create(&x, b"d", PERSISTENT)).await?;
    if c.try_call(
        "s1",
        multi(vec![op::set_data(&x, b"1", -1), op::get_data(&x)]),
    )
    .await?
    .is_none()
    {
        return Ok(());
    }
    c.call("s1", get_data(&x, false)).await?;
    Ok(())
}

/// Malformed paths inside a multi.
async fn multi_bad_path_inside(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call(
        "s1",
        multi(vec![
            op::create(&c.p("ok"), b"", PERSISTENT),
            op::create(&c.p("bad/"), b"", PERSISTENT),
        ]),
    )
    .await?;
    c.call(
        "s1",
        multi(vec![
            op::create(&c.p("ok"), b"", PERSISTENT),
            op::create("relative", b"", PERSISTENT),
        ]),
    )
    .await?;
    c.call(
        "s1",
        multi(vec![
            op::create(&c.p("ok"), b"", PERSISTENT),
            op::set_data(&c.p("a/../b"), b"", -1),
        ]),
    )
    .await?;
    c.call(
        "s1",
        multi(vec![
            op::check("", -1),
            op::create(&c.p("ok"), b"", PERSISTENT),
        ]),
    )
    .await?;
    c.call("s1", get_children(&c.p(""), false)).await?;
    Ok(())
}

/// NOCHILDRENFOREPHEMERALS and BADVERSION as multi results; a create under an ephemeral
/// created by the same multi.
async fn multi_under_ephemeral_and_versions(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call(
        "s1",
        multi(vec![
            op::create(&c.p("e"), b"", EPHEMERAL),
            op::create(&c.p("e/c"), b"", PERSISTENT),
        ]),
    )
    .await?;
    c.call("s1", create(&c.p("e"), b"", EPHEMERAL)).await?;
    c.call(
        "s1",
        multi(vec![
            op::set_data(&c.p("e"), b"", 0),
            op::create(&c.p("e/c"), b"", PERSISTENT),
        ]),
    )
    .await?;
    c.call(
        "s1",
        multi(vec![
            op::set_data(&c.p("e"), b"", 5),
            op::delete(&c.p("e"), 7),
        ]),
    )
    .await?;
    c.call("s1", exists(&c.p("e"), false)).await?;
    Ok(())
}
