//! A ZooKeeper ensemble's committed transactions, applied to zooraft's state machine as a
//! ZooKeeper observer applies them (`DataTree.processTxn`, `commitSession`,
//! `killSession`), with what they did reported to the apply observer: watch triggers,
//! sessions created and closed, and the answer to this member's own client write when the
//! transaction is one it forwarded.
//!
//! Failed writes are transactions too (type -1, `ErrorTxn`); they consume their zxid and
//! change nothing. A transaction that does not fit the tree (possible only over a fuzzy
//! snapshot, where ZooKeeper too ignores it) is counted and logged, never fatal.

use jute::{ErrorCode, MultiResult, OpCode};
use zkdata::txn::{op, LoggedTxn, Txn, TxnHeader};

use crate::state::command::{ClientWrite, CloseReason, Command, Origin};
use crate::state::tree::{DecidedCreate, NodeKind, Trigger};
use crate::state::{ApplyObserver, SessionInfo, StateMachine, WriteResult};

/// Applies without anyone to tell (a restart replaying its journal).
pub struct Quiet;

impl ApplyObserver for Quiet {
    fn triggers(&mut self, _: i64, _: &[Trigger]) {}
    fn write_done(&mut self, _: &ClientWrite, _: i64, _: WriteResult) {}
    fn session_created(&mut self, _: i64, _: &SessionInfo, _: Origin, _: i64, _: bool) {}
    fn session_closed(&mut self, _: i64, _: i64, _: CloseReason) {}
}

/// Where no connection of this member waits (a transaction another server forwarded).
const NOBODY: Origin = Origin { member: 0, conn: 0 };

/// Applies `t`; `local` is this member's own command the transaction answers (matched by
/// session and xid). Returns the replay error, if the transaction did not fit the tree.
pub fn apply_txn(
    state: &mut StateMachine,
    t: &LoggedTxn,
    local: Option<&Command>,
    obs: &mut (impl ApplyObserver + ?Sized),
) -> Option<ErrorCode> {
    let h = &t.header;
    if h.zxid > state.last_zxid {
        state.last_zxid = h.zxid;
    }
    let mut triggers = Vec::new();
    let mut error = None;
    match &t.txn {
        Txn::CreateSession { timeout } => {
            let info = SessionInfo {
                timeout: *timeout,
                passwd: zkdata::zookeeper_session_password(h.client_id),
            };
            state.sessions.insert(h.client_id, info.clone());
            let origin = match local {
                Some(Command::CreateSession { origin, .. }) => *origin,
                _ => NOBODY,
            };
            obs.session_created(h.client_id, &info, origin, h.zxid, true);
        }
        Txn::CloseSession { paths } => {
            state.sessions.remove(&h.client_id);
            let named = paths.as_deref().unwrap_or_default();
            state
                .tree
                .replay_kill_session(h.zxid, h.client_id, named, &mut triggers);
            if !triggers.is_empty() {
                obs.triggers(h.zxid, &triggers);
            }
            let reason = match local {
                Some(Command::CloseSession { reason, .. }) => *reason,
                _ => CloseReason::Expired,
            };
            obs.session_closed(h.client_id, h.zxid, reason);
        }
        txn => {
            let write = match local {
                Some(Command::Write(w)) => Some(w),
                Some(Command::Reconfig { write, .. }) => Some(write),
                _ => None,
            };
            let result = apply_change(state, h, txn, write, &mut triggers, &mut error);
            if !triggers.is_empty() {
                obs.triggers(h.zxid, &triggers);
            }
            if let Some(w) = write {
                obs.write_done(w, h.zxid, result);
            }
        }
    }
    error
}

/// A write transaction (single or multi) applied, and the answer its client gets.
fn apply_change(
    state: &mut StateMachine,
    h: &TxnHeader,
    txn: &Txn,
    write: Option<&ClientWrite>,
    triggers: &mut Vec<Trigger>,
    error: &mut Option<ErrorCode>,
) -> WriteResult {
    let client_op = write.map_or(h.kind, |w| w.op);
    match txn {
        Txn::Multi(subs) => {
            let failed = subs.iter().any(|(k, _)| *k == op::ERROR);
            let mut results = Vec::with_capacity(subs.len());
            for (kind, sub) in subs {
                if failed {
                    let err = match sub {
                        Txn::Error { err } => *err,
                        _ => 0,
                    };
                    results.push(MultiResult::Error(err));
                    continue;
                }
                let sub_header = TxnHeader { kind: *kind, ..*h };
                match apply_one(state, &sub_header, sub, triggers) {
                    Ok(r) => results.push(multi_result(*kind, r)),
                    Err(e) => {
                        error.get_or_insert(e);
                        results.push(MultiResult::Error(e.code()));
                    }
                }
            }
            WriteResult::Multi(results)
        }
        Txn::Error { err } => {
            WriteResult::Error(ErrorCode::from_code(*err).unwrap_or(ErrorCode::SystemError))
        }
        single => match apply_one(state, h, single, triggers) {
            Ok(r) => single_result(client_op, r),
            Err(e) => {
                *error = Some(e);
                // The tree did not take it (a fuzzy snapshot's overlap): the client is told
                // what ZooKeeper's own replay would have met.
                WriteResult::Error(e)
            }
        },
    }
}

/// What one change did, before it becomes a client's answer.
enum Done {
    Created(String, jute::Stat),
    Deleted,
    Stat(jute::Stat),
    Config(bytes::Bytes, jute::Stat),
    Checked(Option<jute::Stat>),
}

fn apply_one(
    state: &mut StateMachine,
    h: &TxnHeader,
    txn: &Txn,
    triggers: &mut Vec<Trigger>,
) -> Result<Done, ErrorCode> {
    let tree = &mut state.tree;
    let create = |path: &str, data, acl, kind, parent_cversion| {
        (path.to_string(), data, acl, kind, parent_cversion)
    };
    let (path, data, acl, kind, parent_cversion) = match txn {
        Txn::Create {
            path,
            data,
            acl,
            ephemeral,
            parent_cversion,
        } => {
            let kind = if *ephemeral {
                NodeKind::Ephemeral(h.client_id)
            } else {
                NodeKind::Persistent
            };
            create(path, data, acl, kind, *parent_cversion)
        }
        Txn::CreateContainer {
            path,
            data,
            acl,
            parent_cversion,
        } => create(path, data, acl, NodeKind::Container, *parent_cversion),
        Txn::CreateTtl {
            path,
            data,
            acl,
            parent_cversion,
            ttl,
        } => create(path, data, acl, NodeKind::Ttl(*ttl), *parent_cversion),
        Txn::Delete { path } => {
            tree.replay_delete(h.zxid, path, triggers)?;
            return Ok(Done::Deleted);
        }
        Txn::SetData {
            path,
            data,
            version,
        } => {
            let stat =
                tree.replay_set_data(h.zxid, h.time, path, data.clone(), *version, triggers)?;
            return Ok(if h.kind == op::RECONFIG {
                Done::Config(data.clone().unwrap_or_default(), stat)
            } else {
                Done::Stat(stat)
            });
        }
        Txn::SetAcl { path, acl, version } => {
            return Ok(Done::Stat(tree.replay_set_acl(path, acl, *version)?));
        }
        Txn::Check { path, .. } => return Ok(Done::Checked(tree.get(path).map(|n| n.stat()))),
        Txn::Error { err } => {
            return Err(ErrorCode::from_code(*err).unwrap_or(ErrorCode::SystemError))
        }
        // Never inside a multi (the decoder refuses them there); handled by `apply_txn`.
        Txn::CreateSession { .. } | Txn::CloseSession { .. } | Txn::Multi(_) => {
            return Err(ErrorCode::BadArguments)
        }
    };
    let decided = DecidedCreate {
        path: &path,
        data: data.as_deref(),
        acl,
        kind,
        parent_cversion,
        zxid: h.zxid,
        time: h.time,
    };
    match tree.replay_create(&decided, triggers) {
        Ok(stat) => Ok(Done::Created(path.clone(), stat)),
        Err(ErrorCode::NodeExists) if matches!(h.kind, op::CREATE | op::CREATE2) => {
            // Re-created after a fuzzy snapshot took its parent: the parent still gets this
            // create's cversion and pzxid, as in ZooKeeper.
            tree.replay_parent_of_existing(&decided);
            Err(ErrorCode::NodeExists)
        }
        Err(e) => Err(e),
    }
}

fn single_result(client_op: i32, done: Done) -> WriteResult {
    match done {
        Done::Created(path, _) if client_op == OpCode::Create.code() => WriteResult::Create(path),
        Done::Created(path, stat) => WriteResult::Create2(path, stat),
        Done::Deleted => WriteResult::Delete,
        Done::Stat(stat) => WriteResult::Stat(stat),
        Done::Config(data, stat) => WriteResult::Config(data, stat),
        Done::Checked(Some(stat)) => WriteResult::Check(stat),
        Done::Checked(None) => WriteResult::Error(ErrorCode::NoNode),
    }
}

fn multi_result(kind: i32, done: Done) -> MultiResult {
    match done {
        Done::Created(path, _) if kind == op::CREATE => MultiResult::Create(path),
        Done::Created(path, stat) => MultiResult::Create2(path, stat),
        Done::Deleted => MultiResult::Delete,
        Done::Stat(stat) | Done::Config(_, stat) => MultiResult::SetData(stat),
        Done::Checked(_) => MultiResult::Check,
    }
}

/// The trigger list's zxid-free checks, for tests elsewhere.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tree::TreeOptions;
    use bytes::Bytes;
    use jute::Acl;

    #[derive(Default)]
    struct Seen {
        triggers: Vec<Trigger>,
        results: Vec<WriteResult>,
        created: Vec<(i64, Origin)>,
        closed: Vec<i64>,
    }

    impl ApplyObserver for Seen {
        fn triggers(&mut self, _: i64, t: &[Trigger]) {
            self.triggers.extend_from_slice(t);
        }
        fn write_done(&mut self, _: &ClientWrite, _: i64, r: WriteResult) {
            self.results.push(r);
        }
        fn session_created(&mut self, s: i64, _: &SessionInfo, o: Origin, _: i64, _: bool) {
            self.created.push((s, o));
        }
        fn session_closed(&mut self, s: i64, _: i64, _: CloseReason) {
            self.closed.push(s);
        }
    }

    fn txn(zxid: i64, client_id: i64, kind: i32, txn: Txn) -> LoggedTxn {
        LoggedTxn {
            header: TxnHeader {
                client_id,
                cxid: 1,
                zxid,
                time: 1000 + zxid,
                kind,
            },
            txn,
            digest: None,
        }
    }

    fn create(path: &str, ephemeral: bool, pcv: i32) -> Txn {
        Txn::Create {
            path: path.into(),
            data: Some(Bytes::from_static(b"v")),
            acl: vec![Acl::open_unsafe()],
            ephemeral,
            parent_cversion: pcv,
        }
    }

    fn write(op: i32) -> Command {
        Command::Write(ClientWrite {
            session: 7,
            xid: 1,
            op,
            origin: Origin { member: 4, conn: 9 },
            auth: std::sync::Arc::from(Vec::new()),
            body: Bytes::new(),
        })
    }

    #[test]
    fn sessions_writes_and_answers_follow_the_ensembles_transactions() {
        let mut s = StateMachine::new(TreeOptions::default());
        let mut seen = Seen::default();
        let mine = Command::CreateSession {
            session: 7,
            timeout: 30_000,
            passwd: [0; 16],
            origin: Origin { member: 4, conn: 9 },
        };
        let t = txn(
            0x1_0000_0001,
            7,
            op::CREATE_SESSION,
            Txn::CreateSession { timeout: 30_000 },
        );
        assert_eq!(apply_txn(&mut s, &t, Some(&mine), &mut seen), None);
        assert_eq!(seen.created, vec![(7, Origin { member: 4, conn: 9 })]);
        // ZooKeeper's password, so a client can move to a ZooKeeper member and back.
        assert_eq!(s.sessions[&7].passwd, zkdata::zookeeper_session_password(7));
        let t = txn(0x1_0000_0002, 7, op::CREATE, create("/e", true, 1));
        apply_txn(&mut s, &t, Some(&write(OpCode::Create.code())), &mut seen);
        assert_eq!(seen.results.pop(), Some(WriteResult::Create("/e".into())));
        assert_eq!(s.tree.get("/e").unwrap().kind(), NodeKind::Ephemeral(7));
        // Another server's failed write: a zxid, no change, nobody answered.
        let t = txn(0x1_0000_0003, 8, op::ERROR, Txn::Error { err: -110 });
        apply_txn(&mut s, &t, None, &mut seen);
        assert!(seen.results.is_empty());
        assert_eq!(s.last_zxid, 0x1_0000_0003);
        // A failed multi answers every op with its code and changes nothing.
        let multi = Txn::Multi(vec![
            (op::ERROR, Txn::Error { err: 0 }),
            (op::ERROR, Txn::Error { err: -101 }),
        ]);
        let t = txn(0x1_0000_0004, 7, op::MULTI, multi);
        apply_txn(&mut s, &t, Some(&write(OpCode::Multi.code())), &mut seen);
        assert_eq!(
            seen.results.pop(),
            Some(WriteResult::Multi(vec![
                MultiResult::Error(0),
                MultiResult::Error(-101)
            ]))
        );
        let multi = Txn::Multi(vec![
            (op::CREATE2, create("/m", false, 2)),
            (
                op::SET_DATA,
                Txn::SetData {
                    path: "/m".into(),
                    data: None,
                    version: 1,
                },
            ),
        ]);
        let t = txn(0x1_0000_0005, 7, op::MULTI, multi);
        apply_txn(&mut s, &t, Some(&write(OpCode::Multi.code())), &mut seen);
        let Some(WriteResult::Multi(r)) = seen.results.pop() else {
            panic!("a multi result")
        };
        assert!(
            matches!(&r[0], MultiResult::Create2(p, st) if p == "/m" && st.czxid == 0x1_0000_0005)
        );
        assert!(matches!(&r[1], MultiResult::SetData(st) if st.version == 1));
        // The session closes (expired on the leader): its ephemeral goes, watches fire.
        seen.triggers.clear();
        let close = Txn::CloseSession {
            paths: Some(vec!["/e".into()]),
        };
        apply_txn(
            &mut s,
            &txn(0x1_0000_0006, 7, op::CLOSE_SESSION, close),
            None,
            &mut seen,
        );
        assert!(s.tree.get("/e").is_none());
        assert!(s.sessions.is_empty());
        assert_eq!(seen.closed, vec![7]);
        assert!(seen.triggers.contains(&Trigger::Deleted("/e".into())));
        // A create over a node a fuzzy snapshot already holds: reported, not fatal.
        let t = txn(0x1_0000_0007, 7, op::CREATE, create("/m", false, 3));
        assert_eq!(
            apply_txn(&mut s, &t, None, &mut seen),
            Some(ErrorCode::NodeExists)
        );
    }
}
