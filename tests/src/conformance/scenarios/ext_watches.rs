//! Issue 3 watches: addWatch (op 106) PERSISTENT and PERSISTENT_RECURSIVE (not consumed
//! by firing; recursive covers the subtree), setWatches2 (op 105), removeWatches (op 18)
//! and checkWatches (op 17) with NOWATCHER.

use jute::Request;

use crate::conformance::req::*;
use crate::conformance::{Ctx, Res};

const PERSISTENT_MODE: i32 = 0;
const RECURSIVE_MODE: i32 = 1;
const W_CHILDREN: i32 = 1;
const W_DATA: i32 = 2;
const W_ANY: i32 = 3;
const W_PERSISTENT: i32 = 4;
const W_RECURSIVE: i32 = 5;

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![
        sc!(add_watch_persistent_not_consumed),
        sc!(add_watch_persistent_missing_node),
        sc!(add_watch_recursive_subtree),
        sc!(add_watch_recursive_and_one_shot_together),
        sc!(add_watch_invalid_mode_and_paths),
        sc!(add_watch_persistent_on_delete_and_recreate),
        sc!(set_watches2_restores_persistent_watches),
        sc!(remove_watches_one_shot),
        sc!(remove_watches_persistent),
        sc!(check_watches_no_watcher),
    ]
}

/// A persistent watch fires for every data change, child change, delete and re-create of
/// its node, and stays.
async fn add_watch_persistent_not_consumed(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", add_watch(&a, PERSISTENT_MODE)).await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.call("s2", set_data(&a, b"2", -1)).await?;
    c.call("s2", create(&c.p("a/c"), b"", PERSISTENT)).await?;
    c.call("s2", set_data(&c.p("a/c"), b"x", -1)).await?;
    c.call("s2", delete(&c.p("a/c"), -1)).await?;
    c.events("s1", 4).await?;
    c.quiet("s1", 150).await?;
    Ok(())
}

/// A persistent watch on a missing node: NodeCreated, then more.
async fn add_watch_persistent_missing_node(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s1", add_watch(&a, PERSISTENT_MODE)).await?;
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s2", delete(&a, -1)).await?;
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.events("s1", 3).await?;
    c.quiet("s1", 150).await?;
    Ok(())
}

/// A recursive watch covers every descendant (created, changed, deleted), without
/// NodeChildrenChanged events.
async fn add_watch_recursive_subtree(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let t = c.p("t");
    c.call("s2", create(&t, b"", PERSISTENT)).await?;
    c.call("s1", add_watch(&t, RECURSIVE_MODE)).await?;
    c.call("s2", create(&c.p("t/a"), b"", PERSISTENT)).await?;
    c.call("s2", create(&c.p("t/a/b"), b"", PERSISTENT)).await?;
    c.call("s2", set_data(&c.p("t/a/b"), b"x", -1)).await?;
    c.call("s2", set_data(&t, b"y", -1)).await?;
    c.call("s2", delete(&c.p("t/a/b"), -1)).await?;
    c.call("s2", create(&c.p("sibling"), b"", PERSISTENT))
        .await?;
    c.call("s2", create(&c.p("tt"), b"", PERSISTENT)).await?;
    c.events("s1", 5).await?;
    c.quiet("s1", 200).await?;
    Ok(())
}

/// A recursive watch and one-shot watches on the same node from one connection.
///
/// ZooKeeper 3.8 keeps one watch mode per (connection, path): the one-shot getData watch
/// set after addWatch replaces the recursive mode, so the first change fires once and the
/// recursive watch is gone afterwards (the child create fires only the one-shot child
/// watch, later changes fire nothing). Fixed upstream in 3.9 (ZOOKEEPER-4466); 3.8 is
/// what is compared here.
async fn add_watch_recursive_and_one_shot_together(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let t = c.p("t");
    c.call("s2", create(&t, b"", PERSISTENT)).await?;
    c.call("s1", add_watch(&t, RECURSIVE_MODE)).await?;
    c.call("s1", get_data(&t, true)).await?;
    c.call("s1", get_children(&t, true)).await?;
    c.call("s2", set_data(&t, b"1", -1)).await?;
    c.call("s2", create(&c.p("t/c"), b"", PERSISTENT)).await?;
    c.events("s1", 2).await?;
    c.quiet("s1", 200).await?;
    c.call("s2", set_data(&t, b"2", -1)).await?;
    c.call("s2", create(&c.p("t/c2"), b"", PERSISTENT)).await?;
    c.quiet("s1", 300).await?;
    Ok(())
}

/// addWatch with an unknown mode, a relative path and the root.
async fn add_watch_invalid_mode_and_paths(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    if c.try_call("s1", add_watch(&c.p("a"), 2)).await?.is_none() {
        return Ok(());
    }
    if c.try_call("s1", add_watch("relative", 0)).await?.is_none() {
        return Ok(());
    }
    if c.try_call("s1", add_watch("", 1)).await?.is_none() {
        return Ok(());
    }
    c.call("s1", exists(&c.p(""), false)).await?;
    Ok(())
}

/// A persistent watch survives the node's delete and fires again after a re-create; a
/// second addWatch on the same path changes nothing.
async fn add_watch_persistent_on_delete_and_recreate(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", add_watch(&a, PERSISTENT_MODE)).await?;
    c.call("s1", add_watch(&a, PERSISTENT_MODE)).await?;
    c.call("s2", delete(&a, -1)).await?;
    c.events("s1", 1).await?;
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.events("s1", 1).await?;
    c.call("s1", add_watch(&a, RECURSIVE_MODE)).await?;
    c.call("s2", create(&c.p("a/c"), b"", PERSISTENT)).await?;
    c.events("s1", 1).await?;
    c.quiet("s1", 150).await?;
    Ok(())
}

/// setWatches2 (op 105, xid -8) after a reconnect: one-shot lists as in setWatches plus
/// persistent and recursive lists, which fire nothing now and keep firing later.
async fn set_watches2_restores_persistent_watches(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let (a, t) = (c.p("a"), c.p("t"));
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s2", create(&t, b"", PERSISTENT)).await?;
    c.call("s1", add_watch(&a, PERSISTENT_MODE)).await?;
    c.call("s1", add_watch(&t, RECURSIVE_MODE)).await?;
    let rel = c.last_zxid("s1");
    c.drop_conn("s1").await?;
    c.call("s2", set_data(&a, b"missed", -1)).await?;
    c.call("s2", create(&c.p("t/missed"), b"", PERSISTENT))
        .await?;
    c.reconnect("s1", Some(rel)).await?;
    c.call_xid(
        "s1",
        jute::xid::SET_WATCHES,
        Request::SetWatches2(set_watches2(rel, &[], &[], &[], &[&a], &[&t])),
    )
    .await?;
    c.quiet("s1", 150).await?;
    c.call("s2", set_data(&a, b"after", -1)).await?;
    c.call("s2", create(&c.p("t/after"), b"", PERSISTENT))
        .await?;
    c.events("s1", 2).await?;
    c.quiet("s1", 100).await?;
    Ok(())
}

/// removeWatches (op 18) for data, child and any watches; NOWATCHER when there is none.
async fn remove_watches_one_shot(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", remove_watches(&a, W_DATA)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s1", get_children(&a, true)).await?;
    c.call("s1", remove_watches(&a, W_DATA)).await?;
    c.call("s1", remove_watches(&a, W_DATA)).await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.quiet("s1", 200).await?;
    c.call("s1", remove_watches(&a, W_ANY)).await?;
    c.call("s1", remove_watches(&a, W_CHILDREN)).await?;
    c.call("s2", create(&c.p("a/c"), b"", PERSISTENT)).await?;
    c.quiet("s1", 200).await?;
    c.call("s1", exists(&c.p("b"), true)).await?;
    c.call("s1", remove_watches(&c.p("b"), W_DATA)).await?;
    c.call("s1", remove_watches(&c.p("missing"), W_ANY)).await?;
    c.call("s1", remove_watches(&a, 9)).await?;
    Ok(())
}

/// removeWatches for persistent and recursive watches.
async fn remove_watches_persistent(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let (a, t) = (c.p("a"), c.p("t"));
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s2", create(&t, b"", PERSISTENT)).await?;
    c.call("s1", add_watch(&a, PERSISTENT_MODE)).await?;
    c.call("s1", add_watch(&t, RECURSIVE_MODE)).await?;
    c.call("s1", remove_watches(&a, W_RECURSIVE)).await?;
    c.call("s1", remove_watches(&a, W_PERSISTENT)).await?;
    c.call("s1", remove_watches(&t, W_DATA)).await?;
    c.call("s1", remove_watches(&t, W_ANY)).await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.call("s2", create(&c.p("t/c"), b"", PERSISTENT)).await?;
    c.events("s1", 1).await?;
    c.quiet("s1", 200).await?;
    Ok(())
}

/// checkWatches (op 17): OK for a watch that exists, NOWATCHER otherwise, per type.
async fn check_watches_no_watcher(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let (a, t) = (c.p("a"), c.p("t"));
    c.call("s1", create(&a, b"", PERSISTENT)).await?;
    for ty in [W_DATA, W_CHILDREN, W_ANY] {
        c.call("s1", check_watches(&a, ty)).await?;
    }
    c.call("s1", get_data(&a, true)).await?;
    for ty in [W_DATA, W_CHILDREN, W_ANY, W_PERSISTENT, W_RECURSIVE] {
        c.call("s1", check_watches(&a, ty)).await?;
    }
    c.call("s1", add_watch(&t, RECURSIVE_MODE)).await?;
    for ty in [W_DATA, W_ANY, W_PERSISTENT, W_RECURSIVE] {
        c.call("s1", check_watches(&t, ty)).await?;
    }
    c.call("s1", check_watches(&a, 0)).await?;
    Ok(())
}
