//! Issue 3 node types and reads: containers (createContainer, removal after the last
//! child goes), TTL nodes (createTTL, removal after the TTL), multiRead, getEphemerals,
//! getAllChildrenNumber.

use jute::Request;

use crate::conformance::req::*;
use crate::conformance::runner::ServerSpec;
use crate::conformance::{Ctx, Res};

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![
        sc!(container_create_variants),
        sc!(container_removed_after_last_child),
        sc!(container_never_used_is_kept),
        sc!(container_removed_after_ephemeral_child_session_closes),
        sc!(container_in_multi),
        sc!(ttl_create_variants),
        sc!(ttl_node_removed_after_ttl),
        sc!(ttl_node_with_children_kept),
        sc!(ttl_invalid_values),
        sc!(ttl_disabled_by_default, fresh ServerSpec::core()),
        sc!(multi_read_results),
        sc!(multi_read_with_write_op),
        sc!(multi_read_sets_watches),
        sc!(get_ephemerals_by_prefix),
        sc!(all_children_number_counts),
    ]
}

/// createContainer (op 19), create/create2 with the container flag, and createContainer
/// with other flags.
async fn container_create_variants(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create_container(&c.p("c1"), b"x")).await?;
    c.call("s1", create(&c.p("c2"), b"", CONTAINER)).await?;
    c.call("s1", create2(&c.p("c3"), b"", CONTAINER)).await?;
    c.call(
        "s1",
        Request::CreateContainer(create_req(&c.p("c4"), Some(b""), open_acl(), PERSISTENT)),
    )
    .await?;
    c.call(
        "s1",
        Request::CreateContainer(create_req(
            &c.p("c5"),
            Some(b""),
            open_acl(),
            PERSISTENT_SEQUENTIAL,
        )),
    )
    .await?;
    c.call("s1", create_container(&c.p("c1"), b"x")).await?;
    c.call("s1", create_container(&c.p("missing/c"), b"x"))
        .await?;
    c.call("s1", get_children2(&c.p(""), false)).await?;
    c.call("s1", get_data(&c.p("c1"), false)).await?;
    // Which of them are containers: give each a child and delete it again, all in one
    // multi (so the container reaper cannot interleave its deletes with ours and shift the
    // zxids), then wait for the NodeDeleted events rather than for a time.
    let names = ["c1", "c2", "c3", "c4", "c50000000004"];
    for n in names {
        c.call("s1", exists(&c.p(n), true)).await?;
    }
    let mut ops = Vec::new();
    for n in names {
        ops.push(op::create(&c.p(&format!("{n}/x")), b"", PERSISTENT));
        ops.push(op::delete(&c.p(&format!("{n}/x")), -1));
    }
    c.call("s1", multi(ops)).await?;
    c.events_unordered("s1", 3).await?;
    c.quiet("s1", 500).await?;
    c.call("s1", get_children(&c.p(""), false)).await?;
    Ok(())
}

/// A container goes once its last child is deleted; its watchers see NodeDeleted.
async fn container_removed_after_last_child(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let k = c.p("k");
    c.call("s1", create_container(&k, b"")).await?;
    c.call("s1", create(&c.p("k/a"), b"", PERSISTENT)).await?;
    c.call("s1", create(&c.p("k/b"), b"", PERSISTENT)).await?;
    c.call("s2", exists(&k, true)).await?;
    c.call("s2", get_children(&c.p(""), true)).await?;
    c.call("s1", delete(&c.p("k/a"), -1)).await?;
    c.quiet("s2", 400).await?;
    c.call("s1", exists(&k, false)).await?;
    c.call("s1", delete(&c.p("k/b"), -1)).await?;
    c.events("s2", 2).await?;
    c.call("s1", exists(&k, false)).await?;
    c.call("s1", get_children2(&c.p(""), false)).await?;
    Ok(())
}

/// A container that never had a child stays.
async fn container_never_used_is_kept(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let k = c.p("k");
    c.call("s1", create_container(&k, b"")).await?;
    c.call("s1", exists(&k, true)).await?;
    c.quiet("s1", 500).await?;
    c.call("s1", exists(&k, false)).await?;
    Ok(())
}

/// A container whose only child is an ephemeral goes after that session closes.
async fn container_removed_after_ephemeral_child_session_closes(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let k = c.p("k");
    c.call("s1", create_container(&k, b"")).await?;
    c.call("s1", create(&c.p("k/e"), b"", EPHEMERAL)).await?;
    c.call("s2", exists(&k, true)).await?;
    c.close_session("s1").await?;
    c.events("s2", 1).await?;
    c.call("s2", exists(&k, false)).await?;
    Ok(())
}

/// createContainer inside a multi: its result entry.
async fn container_in_multi(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call(
        "s1",
        multi(vec![
            op::create_container(&c.p("k"), b"m"),
            op::create(&c.p("k/child"), b"", PERSISTENT),
        ]),
    )
    .await?;
    c.call("s1", exists(&c.p("k"), true)).await?;
    c.call("s1", delete(&c.p("k/child"), -1)).await?;
    c.events("s1", 1).await?;
    Ok(())
}

/// createTTL (op 21) with the TTL modes, create2 with a TTL flag, and a TTL create in a
/// multi.
async fn ttl_create_variants(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call(
        "s1",
        create_ttl(&c.p("t1"), b"x", PERSISTENT_WITH_TTL, 60_000),
    )
    .await?;
    c.call(
        "s1",
        create_ttl(&c.p("t-"), b"", PERSISTENT_SEQUENTIAL_WITH_TTL, 60_000),
    )
    .await?;
    c.call("s1", create2(&c.p("t2"), b"", PERSISTENT_WITH_TTL))
        .await?;
    c.call("s1", create(&c.p("t3"), b"", PERSISTENT_WITH_TTL))
        .await?;
    c.call(
        "s1",
        multi(vec![op::create_ttl(
            &c.p("t4"),
            b"",
            PERSISTENT_WITH_TTL,
            60_000,
        )]),
    )
    .await?;
    c.call("s1", get_children2(&c.p(""), false)).await?;
    c.call("s1", get_data(&c.p("t1"), false)).await?;
    Ok(())
}

/// A childless TTL node goes after its TTL; its watchers see NodeDeleted.
async fn ttl_node_removed_after_ttl(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let t = c.p("t");
    c.call("s1", create_ttl(&t, b"", PERSISTENT_WITH_TTL, 1000))
        .await?;
    c.call("s1", exists(&t, true)).await?;
    c.events("s1", 1).await?;
    c.call("s1", exists(&t, false)).await?;
    Ok(())
}

/// A TTL node with a child outlives its TTL; once the child goes, so does it.
async fn ttl_node_with_children_kept(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let t = c.p("t");
    // One multi, so the node is never childless before the scenario deletes the child
    // (otherwise the reaper may pick it as a candidate in between and fail a delete).
    c.call(
        "s1",
        multi(vec![
            op::create_ttl(&t, b"", PERSISTENT_WITH_TTL, 200),
            op::create(&c.p("t/c"), b"", PERSISTENT),
        ]),
    )
    .await?;
    c.call("s1", exists(&t, true)).await?;
    c.quiet("s1", 600).await?;
    c.call("s1", delete(&c.p("t/c"), -1)).await?;
    c.events("s1", 1).await?;
    Ok(())
}

/// TTL values out of range, and createTTL with non-TTL modes.
async fn ttl_invalid_values(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let cases: &[(i32, i64)] = &[
        (PERSISTENT_WITH_TTL, 0),
        (PERSISTENT_WITH_TTL, -1),
        (PERSISTENT_WITH_TTL, 1 << 40),
        (PERSISTENT_WITH_TTL, (1 << 40) - 1),
        (PERSISTENT, 1000),
        (EPHEMERAL, 1000),
        (CONTAINER, 1000),
        (PERSISTENT_SEQUENTIAL, 1000),
    ];
    for (i, (flags, ttl)) in cases.iter().enumerate() {
        c.call("s1", create_ttl(&c.p(&format!("t{i}")), b"", *flags, *ttl))
            .await?;
    }
    c.call("s1", get_children(&c.p(""), false)).await?;
    Ok(())
}

/// Without extendedTypesEnabled, TTL creates are refused.
async fn ttl_disabled_by_default(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create_ttl("/t1", b"", PERSISTENT_WITH_TTL, 1000))
        .await?;
    c.call("s1", create2("/t2", b"", PERSISTENT_WITH_TTL))
        .await?;
    c.call(
        "s1",
        multi(vec![op::create_ttl("/t3", b"", PERSISTENT_WITH_TTL, 1000)]),
    )
    .await?;
    c.call("s1", create_container("/k", b"")).await?;
    c.call("s1", get_children("/", false)).await?;
    Ok(())
}

/// multiRead (op 22): every op runs; a failing op gets its own error and later ops still
/// answer (no RUNTIMEINCONSISTENCY).
async fn multi_read_results(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("a"), b"A", PERSISTENT)).await?;
    c.call("s1", create(&c.p("a/x"), b"", PERSISTENT)).await?;
    c.call(
        "s1",
        multi_read(vec![
            op::get_data(&c.p("a")),
            op::get_children(&c.p("a")),
            op::get_data(&c.p("missing")),
            op::get_children(&c.p("missing")),
            op::get_data(&c.p("a/x")),
            op::get_children(""),
            op::get_children(&c.p("")),
        ]),
    )
    .await?;
    c.call("s1", multi_read(vec![op::get_data(&c.p("a"))]))
        .await?;
    Ok(())
}

/// multiRead holding a write op, and multi (op 14) holding only reads.
async fn multi_read_with_write_op(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("a"), b"A", PERSISTENT)).await?;
    c.call(
        "s1",
        multi_read(vec![
            op::get_data(&c.p("a")),
            op::create(&c.p("b"), b"", PERSISTENT),
        ]),
    )
    .await?;
    c.call(
        "s1",
        multi_read(vec![op::check(&c.p("a"), 0), op::get_data(&c.p("a"))]),
    )
    .await?;
    c.call("s1", exists(&c.p("b"), false)).await?;
    Ok(())
}

/// Watch flags on ops inside a multiRead.
async fn multi_read_sets_watches(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call(
        "s1",
        multi_read(vec![op::get_data_w(&a, true), op::get_children_w(&a, true)]),
    )
    .await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.call("s2", create(&c.p("a/c"), b"", PERSISTENT)).await?;
    c.quiet("s1", 300).await?;
    Ok(())
}

/// getEphemerals (op 103): this session's ephemerals under a prefix (a path prefix, not
/// a subtree).
async fn get_ephemerals_by_prefix(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    c.call("s1", get_ephemerals(&c.p(""))).await?;
    c.call("s1", create(&c.p("p"), b"", PERSISTENT)).await?;
    c.call("s1", create(&c.p("p/e1"), b"", EPHEMERAL)).await?;
    c.call("s1", create(&c.p("p/e2-"), b"", EPHEMERAL_SEQUENTIAL))
        .await?;
    c.call("s1", create(&c.p("pe"), b"", EPHEMERAL)).await?;
    c.call("s2", create(&c.p("p/other"), b"", EPHEMERAL))
        .await?;
    c.call("s1", get_ephemerals(&c.p(""))).await?;
    c.call("s1", get_ephemerals(&c.p("p"))).await?;
    c.call("s1", get_ephemerals(&c.p("p/"))).await?;
    c.call("s1", get_ephemerals(&c.p("p/e"))).await?;
    c.call("s1", get_ephemerals(&c.p("zzz"))).await?;
    c.call("s2", get_ephemerals(&c.p(""))).await?;
    c.call("s1", get_ephemerals("relative")).await?;
    Ok(())
}

/// getAllChildrenNumber (op 104): every descendant, not the node itself.
async fn all_children_number_counts(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", get_all_children_number(&c.p(""))).await?;
    for n in ["a", "a/b", "a/b/c", "a/d", "e"] {
        c.call("s1", create(&c.p(n), b"", PERSISTENT)).await?;
    }
    c.call("s1", get_all_children_number(&c.p(""))).await?;
    c.call("s1", get_all_children_number(&c.p("a"))).await?;
    c.call("s1", get_all_children_number(&c.p("a/b/c"))).await?;
    c.call("s1", get_all_children_number(&c.p("missing")))
        .await?;
    c.call("s1", get_all_children_number("bad")).await?;
    Ok(())
}
