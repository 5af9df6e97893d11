//! One-shot watches: which operations set them, which changes fire them, with which event
//! type and path, deduplication per connection, and the ordering guarantee (a client sees
//! the event before any response that reflects the change).

use crate::conformance::req::*;
use crate::conformance::{Ctx, Res};

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![
        sc!(watch_exists_missing_fires_created),
        sc!(watch_get_data_missing_sets_none),
        sc!(watch_data_changed_one_shot),
        sc!(watch_exists_present_changed_then_deleted),
        sc!(watch_child_create_delete),
        sc!(watch_child_not_fired_by_child_data),
        sc!(watch_delete_fires_data_and_child_watch),
        sc!(watch_dedup_exists_and_get_data),
        sc!(watch_dedup_same_watch_twice),
        sc!(watch_event_before_own_reply),
        sc!(watch_event_before_later_read),
        sc!(watch_many_sessions),
        sc!(watch_create_fires_created_and_parent),
        sc!(watch_delete_fires_deleted_and_parent),
        sc!(watch_set_same_data_fires),
        sc!(watch_failed_writes_fire_nothing),
        sc!(watch_get_children2_sets_child_watch),
        sc!(watch_parent_data_watch_ignores_children),
        sc!(watch_sequential_create_fires_child_watch),
        sc!(watch_close_session_fires_ephemeral_watches),
        sc!(watch_exists_create_then_delete_one_shot),
        sc!(watch_no_watch_flag_sets_nothing),
    ]
}

/// exists on a missing node sets a watch; the create fires NodeCreated.
async fn watch_exists_missing_fires_created(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s1", exists(&a, true)).await?;
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.events("s1", 1).await?;
    c.call("s2", set_data(&a, b"x", -1)).await?;
    c.quiet("s1", 150).await?;
    Ok(())
}

/// getData and getChildren on a missing node fail with NONODE and set no watch.
async fn watch_get_data_missing_sets_none(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s1", get_data(&a, true)).await?;
    c.call("s1", get_children(&a, true)).await?;
    c.call("s1", get_children2(&a, true)).await?;
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s2", create(&c.p("a/c"), b"", PERSISTENT)).await?;
    c.call("s2", set_data(&a, b"x", -1)).await?;
    c.quiet("s1", 300).await?;
    Ok(())
}

/// A data watch fires NodeDataChanged once; the second change is silent.
async fn watch_data_changed_one_shot(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.events("s1", 1).await?;
    c.call("s2", set_data(&a, b"2", -1)).await?;
    c.quiet("s1", 200).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s2", set_data(&a, b"3", -1)).await?;
    c.events("s1", 1).await?;
    Ok(())
}

/// exists on a present node: NodeDataChanged on setData, then (re-armed) NodeDeleted.
async fn watch_exists_present_changed_then_deleted(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", exists(&a, true)).await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.events("s1", 1).await?;
    c.call("s1", exists(&a, true)).await?;
    c.call("s2", delete(&a, -1)).await?;
    c.events("s1", 1).await?;
    c.quiet("s1", 150).await?;
    Ok(())
}

/// NodeChildrenChanged on child create and on child delete (re-armed between).
async fn watch_child_create_delete(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let p = c.p("");
    c.call("s1", get_children(&p, true)).await?;
    c.call("s2", create(&c.p("c"), b"", PERSISTENT)).await?;
    c.events("s1", 1).await?;
    c.call("s1", get_children(&p, true)).await?;
    c.call("s2", delete(&c.p("c"), -1)).await?;
    c.events("s1", 1).await?;
    c.call("s2", create(&c.p("d"), b"", PERSISTENT)).await?;
    c.quiet("s1", 150).await?;
    Ok(())
}

/// A child's data change and the parent's own data change do not fire a child watch.
async fn watch_child_not_fired_by_child_data(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let p = c.p("p");
    c.call("s2", create(&p, b"", PERSISTENT)).await?;
    c.call("s2", create(&c.p("p/c"), b"", PERSISTENT)).await?;
    c.call("s1", get_children(&p, true)).await?;
    c.call("s2", set_data(&c.p("p/c"), b"x", -1)).await?;
    c.call("s2", set_data(&p, b"y", -1)).await?;
    c.call("s2", create(&c.p("p/c/g"), b"", PERSISTENT)).await?;
    c.quiet("s1", 250).await?;
    c.call("s2", create(&c.p("p/d"), b"", PERSISTENT)).await?;
    c.events("s1", 1).await?;
    Ok(())
}

/// Deleting a node with both a data watch and a child watch on it, from one connection.
async fn watch_delete_fires_data_and_child_watch(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    c.open("s3").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s1", get_children(&a, true)).await?;
    c.call("s3", get_children(&a, true)).await?;
    c.call("s2", delete(&a, -1)).await?;
    c.events("s1", 1).await?;
    c.events("s3", 1).await?;
    c.quiet("s1", 200).await?;
    c.quiet("s3", 50).await?;
    Ok(())
}

/// exists + getData watches on one path from one connection: one event.
async fn watch_dedup_exists_and_get_data(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", exists(&a, true)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.events("s1", 1).await?;
    c.quiet("s1", 200).await?;
    Ok(())
}

/// The same watch set three times: one event.
async fn watch_dedup_same_watch_twice(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    for _ in 0..3 {
        c.call("s1", get_data(&a, true)).await?;
        c.call("s1", get_children(&a, true)).await?;
    }
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.call("s2", create(&c.p("a/c"), b"", PERSISTENT)).await?;
    c.events("s1", 2).await?;
    c.quiet("s1", 200).await?;
    Ok(())
}

/// A session that changes a node it watches sees the event before its own reply.
async fn watch_event_before_own_reply(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    let a = c.p("a");
    c.call("s1", exists(&a, true)).await?;
    c.call("s1", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s1", set_data(&a, b"1", -1)).await?;
    c.call("s1", get_children(&c.p(""), true)).await?;
    c.call("s1", exists(&a, true)).await?;
    c.call("s1", delete(&a, -1)).await?;
    Ok(())
}

/// Another session's change: the watcher's next read (sent after the change was
/// acknowledged) is answered after the event.
async fn watch_event_before_later_read(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"0", PERSISTENT)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.call("s1", get_data(&a, false)).await?;
    c.call("s1", get_children(&c.p(""), true)).await?;
    c.call("s2", create(&c.p("b"), b"", PERSISTENT)).await?;
    c.call("s1", get_children(&c.p(""), false)).await?;
    Ok(())
}

/// Three sessions watching one node all get the event.
async fn watch_many_sessions(c: &mut Ctx) -> Res {
    for s in ["s1", "s2", "s3", "s4"] {
        c.open(s).await?;
    }
    let a = c.p("a");
    c.call("s4", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s2", exists(&a, true)).await?;
    c.call("s3", get_data(&a, true)).await?;
    c.call("s4", set_data(&a, b"x", -1)).await?;
    for s in ["s1", "s2", "s3"] {
        c.events(s, 1).await?;
    }
    c.quiet("s4", 100).await?;
    Ok(())
}

/// A create fires NodeCreated on the node and NodeChildrenChanged on the parent: order.
async fn watch_create_fires_created_and_parent(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s1", get_children(&c.p(""), true)).await?;
    c.call("s1", exists(&a, true)).await?;
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.events("s1", 2).await?;
    c.quiet("s1", 100).await?;
    Ok(())
}

/// A delete fires NodeDeleted on the node and NodeChildrenChanged on the parent: order.
async fn watch_delete_fires_deleted_and_parent(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", exists(&a, true)).await?;
    c.call("s1", get_children(&c.p(""), true)).await?;
    c.call("s2", delete(&a, -1)).await?;
    c.events("s1", 2).await?;
    c.quiet("s1", 100).await?;
    Ok(())
}

/// Setting identical data still fires NodeDataChanged.
async fn watch_set_same_data_fires(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"same", PERSISTENT)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s2", set_data(&a, b"same", -1)).await?;
    c.events("s1", 1).await?;
    Ok(())
}

/// BADVERSION, NOTEMPTY, NODEEXISTS and NONODE writes fire nothing.
async fn watch_failed_writes_fire_nothing(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s2", create(&c.p("a/c"), b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s1", get_children(&a, true)).await?;
    c.call("s1", exists(&c.p("a/x"), true)).await?;
    c.call("s2", set_data(&a, b"", 9)).await?;
    c.call("s2", delete(&a, -1)).await?;
    c.call("s2", create(&c.p("a/c"), b"", PERSISTENT)).await?;
    c.call("s2", delete(&c.p("a/x"), -1)).await?;
    c.call("s2", create(&c.p("a/x/y"), b"", PERSISTENT)).await?;
    c.quiet("s1", 250).await?;
    Ok(())
}

/// getChildren2 with watch=true sets a child watch.
async fn watch_get_children2_sets_child_watch(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    c.call("s1", get_children2(&c.p(""), true)).await?;
    c.call("s2", create(&c.p("c"), b"", PERSISTENT)).await?;
    c.events("s1", 1).await?;
    Ok(())
}

/// A data watch on a parent is not fired by creating or deleting its children.
async fn watch_parent_data_watch_ignores_children(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let p = c.p("p");
    c.call("s2", create(&p, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&p, true)).await?;
    c.call("s2", create(&c.p("p/c"), b"", PERSISTENT)).await?;
    c.call("s2", delete(&c.p("p/c"), -1)).await?;
    c.quiet("s1", 250).await?;
    c.call("s2", set_data(&p, b"x", -1)).await?;
    c.events("s1", 1).await?;
    Ok(())
}

/// Sequential and ephemeral-sequential creates fire the parent's child watch.
async fn watch_sequential_create_fires_child_watch(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    c.call("s1", get_children(&c.p(""), true)).await?;
    c.call("s2", create(&c.p("q-"), b"", EPHEMERAL_SEQUENTIAL))
        .await?;
    c.events("s1", 1).await?;
    c.call("s1", get_children(&c.p(""), true)).await?;
    c.call("s2", create(&c.p("q-"), b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.events("s1", 1).await?;
    Ok(())
}

/// closeSession deletes the ephemerals at once and fires their watches.
async fn watch_close_session_fires_ephemeral_watches(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    c.call("s1", create(&c.p("e1"), b"", EPHEMERAL)).await?;
    c.call("s1", create(&c.p("e2"), b"", EPHEMERAL)).await?;
    c.call("s2", exists(&c.p("e1"), true)).await?;
    c.call("s2", get_data(&c.p("e2"), true)).await?;
    c.call("s2", get_children(&c.p(""), true)).await?;
    c.close_session("s1").await?;
    // Which ephemeral goes first is hash-set order in ZooKeeper: compare as a set.
    c.events_unordered("s2", 3).await?;
    c.call("s2", get_children2(&c.p(""), false)).await?;
    Ok(())
}

/// An exists watch fires once for create-then-delete.
async fn watch_exists_create_then_delete_one_shot(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s1", exists(&a, true)).await?;
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s2", delete(&a, -1)).await?;
    c.events("s1", 1).await?;
    c.quiet("s1", 150).await?;
    Ok(())
}

/// Reads with watch=false leave no watch behind.
async fn watch_no_watch_flag_sets_nothing(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s1", exists(&a, false)).await?;
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, false)).await?;
    c.call("s1", get_children(&a, false)).await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.call("s2", create(&c.p("a/b"), b"", PERSISTENT)).await?;
    c.quiet("s1", 200).await?;
    Ok(())
}
