//! Requests answered from this member's tree without going through the log: reads, watch
//! management, auth, whoAmI and pings.
//!
//! Each handler follows ZooKeeper's `FinalRequestProcessor`: the same order of checks
//! (node exists → ACL → register the watch → answer), the same special cases (`exists` on a
//! missing node still sets its watch; `getData` on a missing node sets none), and the same
//! reply shapes. A watch is registered under the tree's read lock, so no change can slip
//! between the read and the watch. Replies are encoded straight into the connection's
//! outbox.

use bytes::{BufMut, BytesMut};
use jute::{
    perms, AddWatchMode, ClientInfo, ErrorCode, EventType, Id, MultiOp, MultiResult, Record,
    Request, WatcherType, WriteExt,
};

use super::outbox::Outbox;
use super::reply;
use super::watch::{Tables, WatchManager, WatchSlot};
use crate::state::acl;
use crate::state::command::ConnId;
use crate::state::tree::Node;
use crate::state::StateMachine;

/// Who is asking.
pub struct Caller<'a> {
    pub conn: ConnId,
    pub session: i64,
    pub auth: &'a [Id],
}

fn readable<'t>(state: &'t StateMachine, path: &str, auth: &[Id]) -> Result<Node<'t>, ErrorCode> {
    let node = state.tree.get(path).ok_or(ErrorCode::NoNode)?;
    acl::check(node.acl(), perms::READ, auth)?;
    Ok(node)
}

fn put_children(b: &mut BytesMut, node: &Node) {
    b.put_i32(node.num_children() as i32);
    for c in node.children() {
        b.put_ustring(c);
    }
}

/// Executes one read-class request against `state` (locked by the caller) and writes its
/// reply. The caller has made sure every earlier request of this connection was answered.
pub fn execute(
    state: &StateMachine,
    watches: &mut WatchSlot,
    caller: &Caller,
    xid: i32,
    request: &Request,
    out: &Outbox,
) {
    let zxid = state.last_zxid;
    match request {
        Request::Ping => reply::push(out, jute::xid::PING, zxid, ErrorCode::Ok, |_| {}),
        Request::Exists(r) => {
            if r.path.contains('\0') {
                return reply::push_error(out, xid, zxid, ErrorCode::BadArguments);
            }
            // statNode registers the watch before looking the node up.
            if r.watch {
                watches.with(|w| w.watch_data(&r.path, caller.conn));
            }
            match state.tree.get(&r.path) {
                Some(n) => reply::push(out, xid, zxid, ErrorCode::Ok, |b| n.stat().encode(b)),
                None => reply::push_error(out, xid, zxid, ErrorCode::NoNode),
            }
        }
        Request::GetData(r) => match readable(state, &r.path, caller.auth) {
            Ok(n) => {
                if r.watch {
                    watches.with(|w| w.watch_data(&r.path, caller.conn));
                }
                reply::push(out, xid, zxid, ErrorCode::Ok, |b| {
                    b.put_buffer(n.data());
                    n.stat().encode(b);
                })
            }
            Err(e) => reply::push_error(out, xid, zxid, e),
        },
        Request::GetChildren(r) | Request::GetChildren2(r) => {
            match readable(state, &r.path, caller.auth) {
                Ok(n) => {
                    if r.watch {
                        watches.with(|w| w.watch_children(&r.path, caller.conn));
                    }
                    let with_stat = matches!(request, Request::GetChildren2(_));
                    reply::push(out, xid, zxid, ErrorCode::Ok, |b| {
                        put_children(b, &n);
                        if with_stat {
                            n.stat().encode(b);
                        }
                    })
                }
                Err(e) => reply::push_error(out, xid, zxid, e),
            }
        }
        Request::GetAcl(r) => {
            let Some(n) = state.tree.get(&r.path) else {
                return reply::push_error(out, xid, zxid, ErrorCode::NoNode);
            };
            if let Err(e) = acl::check(n.acl(), perms::READ | perms::ADMIN, caller.auth) {
                return reply::push_error(out, xid, zxid, e);
            }
            let full = acl::check(n.acl(), perms::ADMIN, caller.auth).is_ok();
            let list = if full {
                n.acl().to_vec()
            } else {
                acl::mask_digests(n.acl())
            };
            reply::push(out, xid, zxid, ErrorCode::Ok, |b| {
                b.put_i32(list.len() as i32);
                for a in &list {
                    a.encode(b);
                }
                n.stat().encode(b);
            })
        }
        Request::GetAllChildrenNumber(r) => match readable(state, &r.path, caller.auth) {
            Ok(_) => {
                let n = state.tree.all_children_number(&r.path) as i32;
                reply::push(out, xid, zxid, ErrorCode::Ok, |b| b.put_i32(n))
            }
            Err(e) => reply::push_error(out, xid, zxid, e),
        },
        Request::GetEphemerals(r) => {
            // A null, empty or "/" prefix means all of the session's ephemerals.
            let prefix = r.prefix_path.as_deref().unwrap_or_default();
            let all = prefix.trim().is_empty() || prefix.trim() == "/";
            let list: Vec<&String> = state
                .tree
                .ephemerals_of(caller.session)
                .filter(|p| all || p.starts_with(prefix))
                .collect();
            reply::push(out, xid, zxid, ErrorCode::Ok, |b| {
                b.put_i32(list.len() as i32);
                for p in list {
                    b.put_ustring(p);
                }
            })
        }
        Request::MultiRead(ops) => {
            if ops.iter().any(|o| !o.is_read()) {
                return reply::push_error(out, xid, zxid, ErrorCode::MarshallingError);
            }
            let results: Vec<MultiResult> = ops
                .iter()
                .map(|op| {
                    let r = match op {
                        MultiOp::GetChildren(r) => readable(state, &r.path, caller.auth).map(|n| {
                            MultiResult::GetChildren(n.children().map(str::to_string).collect())
                        }),
                        MultiOp::GetData(r) => readable(state, &r.path, caller.auth)
                            .map(|n| MultiResult::GetData(n.data_bytes(), n.stat())),
                        _ => Err(ErrorCode::MarshallingError),
                    };
                    r.unwrap_or_else(|e| MultiResult::Error(e.code()))
                })
                .collect();
            reply::push(out, xid, zxid, ErrorCode::Ok, |b| {
                for r in &results {
                    r.encode(b);
                }
                jute::MULTI_END.encode(b);
            })
        }
        Request::SetWatches(sw) => {
            let no_persistent: &[String] = &[];
            watches.with(|w| {
                let lists = WatchLists {
                    data: &sw.data_watches,
                    exist: &sw.exist_watches,
                    child: &sw.child_watches,
                    persistent: no_persistent,
                    recursive: no_persistent,
                };
                set_watches(state, w, caller.conn, sw.relative_zxid, &lists)
            });
            reply::push_error(out, xid, zxid, set_watches_result(sw.null_entry))
        }
        Request::SetWatches2(sw) => {
            watches.with(|w| {
                let lists = WatchLists {
                    data: &sw.data_watches,
                    exist: &sw.exist_watches,
                    child: &sw.child_watches,
                    persistent: &sw.persistent_watches,
                    recursive: &sw.persistent_recursive_watches,
                };
                set_watches(state, w, caller.conn, sw.relative_zxid, &lists)
            });
            reply::push_error(out, xid, zxid, set_watches_result(sw.null_entry))
        }
        Request::AddWatch(r) => match AddWatchMode::from_code(r.mode) {
            Some(mode) => {
                watches.with(|w| {
                    w.add_persistent(
                        &r.path,
                        caller.conn,
                        mode == AddWatchMode::PersistentRecursive,
                    )
                });
                // ZooKeeper answers addWatch with an ErrorResponse body of 0.
                reply::push(out, xid, zxid, ErrorCode::Ok, |b| b.put_i32(0))
            }
            None => reply::push_error(out, xid, zxid, ErrorCode::MarshallingError),
        },
        Request::CheckWatches(r) => {
            let found = watcher_tables(r.watcher_type)
                .map(|t| watches.with(|w| w.contains(&r.path, caller.conn, t)));
            answer_watch_query(out, xid, zxid, found)
        }
        Request::RemoveWatches(r) => {
            let removed = watcher_tables(r.watcher_type)
                .map(|t| watches.with(|w| w.remove(&r.path, caller.conn, t)));
            answer_watch_query(out, xid, zxid, removed)
        }
        Request::WhoAmI => {
            let infos: Vec<ClientInfo> = caller
                .auth
                .iter()
                .map(|id| ClientInfo {
                    auth_scheme: id.scheme.clone(),
                    user: acl::user_name(id),
                })
                .collect();
            reply::push(out, xid, zxid, ErrorCode::Ok, |b| {
                b.put_i32(infos.len() as i32);
                for i in &infos {
                    i.encode(b);
                }
            })
        }
        _ => reply::push_error(out, xid, zxid, ErrorCode::Unimplemented),
    }
}

/// The tables a `WatcherType` addresses; `None` for a value ZooKeeper 3.8 rejects. Its
/// `WatcherType.fromInt` knows only Children (1), Data (2) and Any (3): persistent watches
/// are removed with Any.
fn watcher_tables(code: i32) -> Option<Tables> {
    match WatcherType::from_code(code)? {
        WatcherType::Children => Some(Tables::Child),
        WatcherType::Data => Some(Tables::Data),
        WatcherType::Any => Some(Tables::Both),
        WatcherType::Persistent | WatcherType::PersistentRecursive => None,
    }
}

fn answer_watch_query(out: &Outbox, xid: i32, zxid: i64, found: Option<bool>) {
    match found {
        Some(true) => reply::push(out, xid, zxid, ErrorCode::Ok, |_| {}),
        Some(false) => reply::push_error(out, xid, zxid, ErrorCode::NoWatcher),
        None => reply::push_error(out, xid, zxid, ErrorCode::MarshallingError),
    }
}

/// A setWatches whose lists held a null entry was handled up to it (jute cut the lists
/// there); ZooKeeper then answers MARSHALLINGERROR.
fn set_watches_result(null_entry: bool) -> ErrorCode {
    if null_entry {
        ErrorCode::MarshallingError
    } else {
        ErrorCode::Ok
    }
}

/// The watch lists of a SetWatches (persistent ones empty) or SetWatches2.
struct WatchLists<'a> {
    data: &'a [String],
    exist: &'a [String],
    child: &'a [String],
    persistent: &'a [String],
    recursive: &'a [String],
}

/// SetWatches / SetWatches2 after a reconnect (`DataTree.setWatches`): for each watch the
/// client had, either fire now what it missed (relative to the last zxid it saw) or re-arm.
fn set_watches(
    state: &StateMachine,
    watches: &mut WatchManager,
    conn: ConnId,
    relative_zxid: i64,
    lists: &WatchLists,
) {
    let WatchLists {
        data,
        exist,
        child,
        persistent,
        recursive,
    } = *lists;
    for p in data {
        match state.tree.get(p) {
            None => watches.notify(conn, EventType::NodeDeleted, p),
            Some(n) if n.mzxid() > relative_zxid => {
                watches.notify(conn, EventType::NodeDataChanged, p)
            }
            Some(_) => watches.watch_data(p, conn),
        }
    }
    for p in exist {
        match state.tree.get(p) {
            Some(_) => watches.notify(conn, EventType::NodeCreated, p),
            None => watches.watch_data(p, conn),
        }
    }
    for p in child {
        match state.tree.get(p) {
            None => watches.notify(conn, EventType::NodeDeleted, p),
            Some(n) if n.pzxid() > relative_zxid => {
                watches.notify(conn, EventType::NodeChildrenChanged, p)
            }
            Some(_) => watches.watch_children(p, conn),
        }
    }
    for p in persistent {
        watches.add_persistent(p, conn, false);
    }
    for p in recursive {
        watches.add_persistent(p, conn, true);
    }
}
