//! Sessions: the handshake (36 vs 37 bytes, flags), timeout negotiation and clamping,
//! resume with id and password (ephemerals kept, old connection closed), wrong password,
//! unknown and expired sessions (timeout 0, then close), expiry deleting ephemerals and
//! firing watches, closeSession, pings keeping a session alive, lastZxidSeen ahead of the
//! server, and SetWatches after a reconnect.

use bytes::Bytes;

use crate::conformance::req::*;
use crate::conformance::runner::ServerSpec;
use crate::conformance::{Ctx, Res};
use crate::raw_client::ConnectOptions;

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![
        sc!(handshake_variants),
        sc!(handshake_pipelined_with_requests),
        sc!(timeout_clamp_defaults, fresh ServerSpec::defaults(100)),
        sc!(timeout_clamp_explicit, fresh ServerSpec::defaults(100)
            .with("minSessionTimeout", "500")
            .with("maxSessionTimeout", "3000")),
        sc!(session_resume_keeps_ephemerals),
        sc!(session_resume_wrong_password),
        sc!(session_unknown_id),
        sc!(session_expired_reconnect),
        sc!(session_expiry_deletes_ephemerals),
        sc!(session_expiry_with_open_connection),
        sc!(close_session_then_connection),
        sc!(close_session_pipelined_requests),
        sc!(pings_keep_session_alive),
        sc!(last_zxid_ahead_refused),
        sc!(reconnect_closes_old_connection),
        sc!(set_watches_fires_missed_events),
        sc!(set_watches_rearms_when_nothing_missed),
        sc!(set_watches_deleted_and_missing_nodes),
        sc!(set_watches_relative_zxid_zero),
        sc!(watches_lost_without_set_watches),
    ]
}

/// 45-byte handshake -> 37-byte response; 44 -> 36; readOnly=true on a standalone server;
/// another protocolVersion. Each session then works.
async fn handshake_variants(c: &mut Ctx) -> Res {
    let variants = [
        ("s1", 0, Some(false)),
        ("s2", 0, None),
        ("s3", 0, Some(true)),
        ("s4", 7, Some(false)),
    ];
    for (label, proto, ro) in variants {
        let opts = ConnectOptions {
            protocol_version: proto,
            read_only: ro,
            ..ConnectOptions::default()
        };
        if c.open_with(label, opts).await?.is_some() {
            c.call(label, create(&c.p(label), b"", EPHEMERAL)).await?;
        }
    }
    c.call("s1", get_children(&c.p(""), false)).await?;
    Ok(())
}

/// Requests written right behind the handshake, before its response was read.
async fn handshake_pipelined_with_requests(c: &mut Ctx) -> Res {
    c.connect_only("s1", ConnectOptions::default()).await?;
    c.send("s1", create(&c.p("a"), b"x", PERSISTENT)).await?;
    c.send("s1", get_data(&c.p("a"), false)).await?;
    c.recv("s1").await?;
    c.replies("s1", 2).await?;
    Ok(())
}

async fn open_many(c: &mut Ctx, timeouts: &[i32]) -> Res {
    for (i, t) in timeouts.iter().enumerate() {
        let label = format!("t{i}");
        c.open_timeout(&label, *t).await?;
    }
    Ok(())
}

/// tickTime 100 ms and no explicit bounds: timeouts clamped to [200, 2000].
async fn timeout_clamp_defaults(c: &mut Ctx) -> Res {
    open_many(c, &[1, 199, 200, 1500, 2000, 2001, 100_000, 0, -1]).await
}

/// minSessionTimeout 500 and maxSessionTimeout 3000.
async fn timeout_clamp_explicit(c: &mut Ctx) -> Res {
    open_many(c, &[100, 499, 500, 1000, 3000, 3001, 60_000]).await
}

/// Dropping the TCP connection keeps the session: ephemerals stay, the resumed handshake
/// gives the same id and timeout.
async fn session_resume_keeps_ephemerals(c: &mut Ctx) -> Res {
    c.open_timeout("s1", 4000).await?;
    c.open("s2").await?;
    let e = c.p("e");
    c.call("s1", create(&e, b"", EPHEMERAL)).await?;
    let before = c.passwd("s1");
    c.drop_conn("s1").await?;
    c.call("s2", exists(&e, false)).await?;
    c.reconnect("s1", None).await?;
    let same = c.passwd("s1") == before;
    c.note(format!("s1 password unchanged after resume: {same}"));
    c.call("s1", exists(&e, false)).await?;
    c.call("s1", create(&c.p("e2"), b"", EPHEMERAL)).await?;
    c.call("s2", get_children2(&c.p(""), false)).await?;
    Ok(())
}

/// A resume with the wrong password: timeout 0, session 0, zero password, then close.
/// ZooKeeper also closes the session's current connection (it drops the old connection
/// of a session before it checks the password), but the session itself lives on.
async fn session_resume_wrong_password(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    c.call("s1", create(&c.p("e"), b"", EPHEMERAL)).await?;
    let opts = ConnectOptions::resume(
        c.session_id("s1"),
        Bytes::from_static(b"0123456789abcdef"),
        c.last_zxid("s1"),
    );
    c.open_with("bad", opts).await?;
    c.wait_closed("bad", 3000).await?;
    c.wait_closed("s1", 1000).await?;
    c.call("s2", exists(&c.p("e"), false)).await?;
    c.reconnect("s1", None).await?;
    c.call("s1", exists(&c.p("e"), false)).await?;
    Ok(())
}

/// A session id the server never issued: timeout 0, then close.
async fn session_unknown_id(c: &mut Ctx) -> Res {
    let opts = ConnectOptions::resume(0x7777_0000_0000_0001, Bytes::from_static(&[7u8; 16]), 0);
    c.open_with("ghost", opts).await?;
    c.wait_closed("ghost", 3000).await?;
    let opts = ConnectOptions {
        read_only: None,
        ..ConnectOptions::resume(0x7777_0000_0000_0002, Bytes::from_static(&[7u8; 16]), 0)
    };
    c.open_with("ghost2", opts).await?;
    c.wait_closed("ghost2", 3000).await?;
    Ok(())
}

/// A session that expired while disconnected: its resume gets timeout 0, then close.
async fn session_expired_reconnect(c: &mut Ctx) -> Res {
    c.open_timeout("s1", 1000).await?;
    c.open("s2").await?;
    let e = c.p("e");
    c.call("s1", create(&e, b"", EPHEMERAL)).await?;
    c.call("s2", exists(&e, true)).await?;
    c.drop_conn("s1").await?;
    c.events("s2", 1).await?;
    c.reconnect("s1", None).await?;
    c.wait_closed("s1", 3000).await?;
    c.call("s2", exists(&e, false)).await?;
    Ok(())
}

/// Expiry deletes every ephemeral of the session and fires their watches.
async fn session_expiry_deletes_ephemerals(c: &mut Ctx) -> Res {
    c.open_timeout("s1", 1000).await?;
    c.open("s2").await?;
    c.call("s1", create(&c.p("e1"), b"", EPHEMERAL)).await?;
    c.call("s1", create(&c.p("q-"), b"", EPHEMERAL_SEQUENTIAL))
        .await?;
    c.call("s1", create(&c.p("p"), b"", PERSISTENT)).await?;
    c.call("s1", create(&c.p("p/e2"), b"", EPHEMERAL)).await?;
    c.call("s2", get_data(&c.p("e1"), true)).await?;
    c.call("s2", exists(&c.p("p/e2"), true)).await?;
    c.call("s2", get_children(&c.p("p"), true)).await?;
    c.drop_conn("s1").await?;
    c.events_unordered("s2", 3).await?;
    c.call("s2", get_children2(&c.p(""), false)).await?;
    c.call("s2", get_children2(&c.p("p"), false)).await?;
    Ok(())
}

/// A connected session that sends nothing expires; what the server does with its
/// connection.
async fn session_expiry_with_open_connection(c: &mut Ctx) -> Res {
    c.open_timeout("s1", 1000).await?;
    c.open("s2").await?;
    c.call("s1", create(&c.p("e"), b"", EPHEMERAL)).await?;
    c.call("s2", exists(&c.p("e"), true)).await?;
    c.events("s2", 1).await?;
    c.wait_closed("s1", 3000).await?;
    c.forget("s1");
    Ok(())
}

/// closeSession: reply, then the server closes the connection.
async fn close_session_then_connection(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("e"), b"", EPHEMERAL)).await?;
    c.close_session("s1").await?;
    c.wait_closed("s1", 3000).await?;
    c.reconnect("s1", None).await?;
    c.wait_closed("s1", 3000).await?;
    Ok(())
}

/// Requests pipelined behind closeSession: none of them is carried out. Apache ZooKeeper
/// answers some of them with SESSIONEXPIRED or none at all, depending on a race between
/// its request pipeline and the connection close, so those replies are not compared;
/// what is compared is the replies up to closeSession, that anything after it is refused,
/// and that the connection closes.
async fn close_session_pipelined_requests(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let e = c.p("e");
    c.send_batch(
        "s1",
        vec![
            create(&e, b"", EPHEMERAL),
            jute::Request::CloseSession,
            exists(&e, false),
            create(&c.p("after"), b"", PERSISTENT),
        ],
    )
    .await?;
    c.replies("s1", 2).await?;
    let mut refused_only = true;
    let mut closed = false;
    while let Some(inc) = c.take("s1", 3000).await? {
        match &inc {
            crate::raw_client::Incoming::Closed { .. } => {
                closed = true;
                break;
            }
            crate::raw_client::Incoming::Reply(r) => {
                refused_only &= r.err == jute::ErrorCode::SessionExpired.code();
                c.allowed_incoming("s1", &inc);
            }
            _ => {
                refused_only = false;
                c.allowed_incoming("s1", &inc);
            }
        }
    }
    c.note(format!(
        "s1 after closeSession: only SESSIONEXPIRED replies (or none)={refused_only}, then closed={closed}"
    ));
    c.forget("s1");
    // A write first: whether the refused requests consumed zxids is part of the race, and
    // a read's reply zxid would show it.
    c.call("s2", create(&c.p("s2"), b"", PERSISTENT)).await?;
    c.call("s2", exists(&e, false)).await?;
    c.call("s2", exists(&c.p("after"), false)).await?;
    Ok(())
}

/// Pings every 100 ms keep a 1 s session alive for 2.5 s.
async fn pings_keep_session_alive(c: &mut Ctx) -> Res {
    c.open_timeout("s1", 1000).await?;
    c.open("s2").await?;
    c.call("s1", create(&c.p("e"), b"", EPHEMERAL)).await?;
    for _ in 0..25 {
        c.sleep(100).await;
        c.ping("s1").await?;
    }
    c.call("s2", exists(&c.p("e"), false)).await?;
    c.call("s1", get_data(&c.p("e"), false)).await?;
    Ok(())
}

/// A client that has seen a zxid the server has not is refused, new or resuming.
async fn last_zxid_ahead_refused(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("a"), b"", PERSISTENT)).await?;
    let ahead = c.last_zxid("s1") + 1000;
    let opts = ConnectOptions {
        last_zxid_seen: ahead,
        ..ConnectOptions::default()
    };
    if c.open_with("new", opts).await?.is_some() {
        c.quiet("new", 200).await?;
    }
    c.drop_conn("s1").await?;
    if c.reconnect("s1", Some(ahead)).await?.is_some() {
        c.quiet("s1", 200).await?;
    }
    c.reconnect("s1", None).await?;
    c.call("s1", exists(&c.p("a"), false)).await?;
    Ok(())
}

/// A second connection for the same session makes the server close the first.
async fn reconnect_closes_old_connection(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create(&c.p("e"), b"", EPHEMERAL)).await?;
    c.attach("s1b", "s1").await?;
    c.wait_closed("s1", 3000).await?;
    c.call("s1b", exists(&c.p("e"), false)).await?;
    c.call("s1b", create(&c.p("e2"), b"", EPHEMERAL)).await?;
    c.call("s1b", get_children2(&c.p(""), false)).await?;
    Ok(())
}

/// While disconnected, a watched node changes, a missing one is created and a child is
/// added: SetWatches with the old zxid fires all three.
async fn set_watches_fires_missed_events(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let (a, b, p) = (c.p("a"), c.p("b"), c.p("p"));
    c.call("s2", create(&a, b"0", PERSISTENT)).await?;
    c.call("s2", create(&p, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s1", exists(&b, true)).await?;
    c.call("s1", get_children(&p, true)).await?;
    let rel = c.last_zxid("s1");
    c.drop_conn("s1").await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.call("s2", create(&b, b"", PERSISTENT)).await?;
    c.call("s2", create(&c.p("p/c"), b"", PERSISTENT)).await?;
    c.reconnect("s1", Some(rel)).await?;
    c.set_watches("s1", set_watches(rel, &[&a], &[&b], &[&p]))
        .await?;
    c.call("s2", set_data(&a, b"2", -1)).await?;
    c.quiet("s1", 200).await?;
    Ok(())
}

/// Nothing changed while disconnected: SetWatches fires nothing and re-arms the watches.
async fn set_watches_rearms_when_nothing_missed(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let (a, b, p) = (c.p("a"), c.p("b"), c.p("p"));
    c.call("s2", create(&a, b"0", PERSISTENT)).await?;
    c.call("s2", create(&p, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s1", exists(&b, true)).await?;
    c.call("s1", get_children(&p, true)).await?;
    let rel = c.last_zxid("s1");
    c.drop_conn("s1").await?;
    c.reconnect("s1", Some(rel)).await?;
    c.set_watches("s1", set_watches(rel, &[&a], &[&b], &[&p]))
        .await?;
    c.quiet("s1", 150).await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.events("s1", 1).await?;
    c.call("s2", create(&b, b"", PERSISTENT)).await?;
    c.events("s1", 1).await?;
    c.call("s2", create(&c.p("p/c"), b"", PERSISTENT)).await?;
    c.events("s1", 1).await?;
    Ok(())
}

/// SetWatches for nodes deleted meanwhile (data and child watches -> NodeDeleted), for an
/// exists watch on a node still missing (re-armed), and for an exists watch on a node that
/// existed all along.
async fn set_watches_deleted_and_missing_nodes(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let (a, p, m, k) = (c.p("a"), c.p("p"), c.p("missing"), c.p("kept"));
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s2", create(&p, b"", PERSISTENT)).await?;
    c.call("s2", create(&k, b"", PERSISTENT)).await?;
    let rel = c.last_zxid("s2");
    c.call("s2", delete(&a, -1)).await?;
    c.call("s2", delete(&p, -1)).await?;
    c.set_watches("s1", set_watches(rel, &[&a], &[&m, &k], &[&p]))
        .await?;
    c.quiet("s1", 150).await?;
    c.call("s2", create(&m, b"", PERSISTENT)).await?;
    c.events("s1", 1).await?;
    c.quiet("s1", 100).await?;
    Ok(())
}

/// SetWatches with relativeZxid 0 on unchanged nodes.
async fn set_watches_relative_zxid_zero(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let (a, p) = (c.p("a"), c.p("p"));
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s2", create(&p, b"", PERSISTENT)).await?;
    c.call("s2", create(&c.p("p/c"), b"", PERSISTENT)).await?;
    c.set_watches("s1", set_watches(0, &[&a], &[], &[&p]))
        .await?;
    c.quiet("s1", 150).await?;
    let now = c.last_zxid("s2");
    c.set_watches("s1", set_watches(now, &[&a, &p], &[&a], &[&p, &a]))
        .await?;
    c.quiet("s1", 150).await?;
    c.call("s2", set_data(&a, b"x", -1)).await?;
    c.call("s2", delete(&c.p("p/c"), -1)).await?;
    c.events("s1", 2).await?;
    c.quiet("s1", 100).await?;
    Ok(())
}

/// Watches belong to the connection: after a resume without SetWatches, nothing fires.
async fn watches_lost_without_set_watches(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.open("s2").await?;
    let a = c.p("a");
    c.call("s2", create(&a, b"", PERSISTENT)).await?;
    c.call("s1", get_data(&a, true)).await?;
    c.call("s1", get_children(&a, true)).await?;
    c.drop_conn("s1").await?;
    c.reconnect("s1", None).await?;
    c.call("s2", set_data(&a, b"1", -1)).await?;
    c.call("s2", create(&c.p("a/c"), b"", PERSISTENT)).await?;
    c.quiet("s1", 250).await?;
    Ok(())
}
