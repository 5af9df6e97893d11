//! The replicated state machine: the data tree, the session table and the last zxid, and
//! the one function that changes them, [`StateMachine::apply_one`] (the Raft layer calls it
//! for each command of a committed batch, in log order, looking at the state in between
//! to answer the reads that waited on exactly that command).
//!
//! This layer depends on `jute` and nothing else of the server: `tree/` (znodes, `Stat`,
//! every write in ZooKeeper's order of checks), `command.rs` (what a Raft entry carries),
//! `acl.rs`, `path.rs`, `opcodes.rs` (the opcode table) and `snapshot.rs` (its encoding,
//! streamed by `snapshot_io.rs`).
//!
//! Every member applies the same committed batches in log order and so reaches the same
//! state. Every command consumes one zxid, failed ones included (ZooKeeper logs failed
//! writes as error transactions too), and a zxid is `epoch << 32 | counter` with the Raft
//! term as epoch, so zxids strictly increase across leader changes and restarts and are the
//! same on every member.
//!
//! What happened is reported to an [`ApplyObserver`] (watch triggers, write results,
//! session changes); the state machine itself never talks to connections.

use std::collections::BTreeMap;

use bytes::Bytes;
use jute::{
    CheckVersionRequest, CreateRequest, CreateTtlRequest, DecodeError, DeleteRequest, ErrorCode,
    MultiOp, MultiResult, OpCode, Reader, Record, Request, SetAclRequest, SetDataRequest, Stat,
};

pub mod acl;
pub mod command;
pub mod opcodes;
pub mod path;
pub mod reconfig;
mod restore;
pub mod snapshot;
pub mod snapshot_io;
pub mod tree;

#[cfg(test)]
use command::Batch;
use command::{ClientWrite, CloseReason, Command, Origin};
use tree::{CreateOp, CreateRecord, DataTree, TreeOptions, Trigger, TxnContext, Undo};

/// A session as every member knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub timeout: i32,
    pub passwd: [u8; 16],
}

/// The outcome of a client write, to be encoded as its reply.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteResult {
    Error(ErrorCode),
    /// create (1): the path only.
    Create(String),
    /// create2, createContainer, createTTL: path and Stat.
    Create2(String, Stat),
    Delete,
    /// setData and setACL both answer with a Stat.
    Stat(Stat),
    /// check (13) outside a multi: ZooKeeper answers with a SetDataResponse layout.
    Check(Stat),

    Multi(Vec<MultiResult>),
    /// A multi failed as a whole: the header carries the error, the body an empty list of
    /// results (ZooKeeper's answer to a null path in one of its ops).
    MultiAborted(ErrorCode),
    /// reconfig (16): the new `/zookeeper/config` data and its Stat (a getData reply).
    Config(Bytes, Stat),
}

/// Receives what applying a batch did.
pub trait ApplyObserver {
    /// Watch triggers of one command, in order, with its zxid.
    fn triggers(&mut self, zxid: i64, triggers: &[Trigger]);
    /// A client write finished (successfully or not).
    fn write_done(&mut self, write: &ClientWrite, zxid: i64, result: WriteResult);
    /// A session was created (`ok`) or its id was already taken (`!ok`).
    fn session_created(
        &mut self,
        session: i64,
        info: &SessionInfo,
        origin: Origin,
        zxid: i64,
        ok: bool,
    );
    /// A session was closed or expired; its ephemerals are gone.
    fn session_closed(&mut self, session: i64, zxid: i64, reason: CloseReason);
    /// Just before [`ApplyObserver::session_closed`]: what closing the session deleted
    /// (its ephemerals' `Deleted` triggers, with their parents' `ChildrenChanged`).
    fn ephemerals_deleted(&mut self, session: i64, zxid: i64, triggers: &[Trigger]) {
        let _ = (session, zxid, triggers);
    }
    /// A restore replaced the tree and the sessions (now `sessions`), at `zxid`; the
    /// sessions open before were reported closed first.
    fn restored(&mut self, nonce: u64, zxid: i64, sessions: &BTreeMap<i64, SessionInfo>) {
        let _ = (nonce, zxid, sessions);
    }
}

/// Tree, sessions and counters: everything a snapshot must hold.
#[derive(Debug, Clone)]
pub struct StateMachine {
    pub tree: DataTree,
    pub sessions: BTreeMap<i64, SessionInfo>,
    pub last_zxid: i64,
}

impl StateMachine {
    pub fn new(options: TreeOptions) -> StateMachine {
        StateMachine {
            tree: DataTree::new(options),
            sessions: BTreeMap::new(),
            last_zxid: 0,
        }
    }

    /// The zxid of the next command applied in `term`.
    fn next_zxid(&mut self, term: u64) -> i64 {
        let epoch_start = ((term.min(i32::MAX as u64) as i64) << 32) | 1;
        self.last_zxid = (self.last_zxid + 1).max(epoch_start);
        self.last_zxid
    }

    /// Applies every command of a committed batch written in `term` (the tests' shorthand
    /// for what the Raft layer does command by command).
    #[cfg(test)]
    pub fn apply_batch(&mut self, batch: &Batch, term: u64, obs: &mut impl ApplyObserver) {
        for command in &batch.commands {
            self.apply_one(command, term, batch.time, obs);
        }
    }

    /// Applies one command of a batch (with the batch's term and time). The caller may look
    /// at the state between commands, which the apply loop does to answer reads that were
    /// waiting on exactly this command.
    pub fn apply_one(
        &mut self,
        command: &Command,
        term: u64,
        time: i64,
        obs: &mut impl ApplyObserver,
    ) {
        let zxid = self.next_zxid(term);
        self.apply_command(command, zxid, time, obs);
    }

    /// A client's write: applied by `f` if its session is alive (else SESSIONEXPIRED), its
    /// watch triggers and answer handed to the observer.
    fn client_write(
        &mut self,
        w: &ClientWrite,
        zxid: i64,
        time: i64,
        obs: &mut impl ApplyObserver,
        f: impl FnOnce(&mut DataTree, &TxnContext, &mut Vec<Trigger>) -> WriteResult,
    ) {
        let mut triggers = Vec::new();
        let result = if self.sessions.contains_key(&w.session) {
            let ctx = TxnContext {
                zxid,
                time,
                session: w.session,
                auth: &w.auth,
            };
            f(&mut self.tree, &ctx, &mut triggers)
        } else {
            WriteResult::Error(ErrorCode::SessionExpired)
        };
        if !triggers.is_empty() {
            obs.triggers(zxid, &triggers);
        }
        obs.write_done(w, zxid, result);
    }

    fn apply_command(
        &mut self,
        command: &Command,
        zxid: i64,
        time: i64,
        obs: &mut impl ApplyObserver,
    ) {
        match command {
            Command::Write(w) => self.client_write(w, zxid, time, obs, |tree, ctx, tr| {
                apply_write(tree, ctx, w.op, &w.body, tr)
            }),
            Command::CreateSession {
                session,
                timeout,
                passwd,
                origin,
            } => {
                let info = SessionInfo {
                    timeout: *timeout,
                    passwd: *passwd,
                };
                let ok = !self.sessions.contains_key(session);
                if ok {
                    self.sessions.insert(*session, info.clone());
                }
                obs.session_created(*session, &info, *origin, zxid, ok);
            }
            Command::CloseSession { session, reason } => {
                let mut triggers = Vec::new();
                if self.sessions.remove(session).is_some() {
                    self.tree.kill_session(zxid, *session, &mut triggers);
                }
                if !triggers.is_empty() {
                    obs.triggers(zxid, &triggers);
                    obs.ephemerals_deleted(*session, zxid, &triggers);
                }
                obs.session_closed(*session, zxid, *reason);
            }
            Command::Reconfig { write, stamp } => {
                self.client_write(write, zxid, time, obs, |tree, ctx, tr| {
                    reconfig::apply(tree, ctx, &write.body, stamp, tr)
                })
            }
            Command::SetConfig { text } => {
                let mut triggers = Vec::new();
                reconfig::state_first(&mut self.tree, time, text, &mut triggers);
                obs.triggers(zxid, &triggers);
            }
            Command::Restore { nonce, state } => restore::apply(self, *nonce, state, zxid, obs),
            Command::DeleteNode { path } => {
                let mut triggers = Vec::new();
                // A node that gained a child or was touched since the leader chose it stays.
                let _ = self
                    .tree
                    .delete_container_or_ttl(zxid, time, path, &mut triggers);
                if !triggers.is_empty() {
                    obs.triggers(zxid, &triggers);
                }
            }
        }
    }
}

fn apply_write(
    tree: &mut DataTree,
    ctx: &TxnContext,
    op: i32,
    body: &Bytes,
    triggers: &mut Vec<Trigger>,
) -> WriteResult {
    match apply_write_inner(tree, ctx, op, body, triggers) {
        Ok(r) => r,
        Err(WriteError::Keeper(e)) => WriteResult::Error(e),
        // A body that does not decode is answered as ZooKeeper does: MARSHALLINGERROR.
        Err(WriteError::Decode(e)) => {
            tracing::debug!(op, error = %e, "undecodable write request");
            WriteResult::Error(ErrorCode::MarshallingError)
        }
    }
}

enum WriteError {
    Keeper(ErrorCode),
    Decode(DecodeError),
}

impl From<ErrorCode> for WriteError {
    fn from(e: ErrorCode) -> Self {
        WriteError::Keeper(e)
    }
}

impl From<DecodeError> for WriteError {
    fn from(e: DecodeError) -> Self {
        WriteError::Decode(e)
    }
}

fn create_op<'a>(req: &'a CreateRequest, record: CreateRecord) -> CreateOp<'a> {
    CreateOp {
        path: &req.path,
        data: req.data.clone(),
        acl: &req.acl,
        flags: req.flags,
        record,
    }
}

fn apply_write_inner(
    tree: &mut DataTree,
    ctx: &TxnContext,
    op: i32,
    body: &Bytes,
    triggers: &mut Vec<Trigger>,
) -> Result<WriteResult, WriteError> {
    let mut r = Reader::new(body.clone());
    let code = OpCode::from_code(op).ok_or(ErrorCode::Unimplemented)?;
    Ok(match code {
        OpCode::Create => {
            let req = CreateRequest::decode(&mut r)?;
            let (path, _) =
                tree.create(ctx, &create_op(&req, CreateRecord::Plain), triggers, None)?;
            WriteResult::Create(path)
        }
        OpCode::Create2 | OpCode::CreateContainer => {
            let req = CreateRequest::decode(&mut r)?;
            let record = if code == OpCode::CreateContainer {
                CreateRecord::Container
            } else {
                CreateRecord::Plain
            };
            let (path, stat) = tree.create(ctx, &create_op(&req, record), triggers, None)?;
            WriteResult::Create2(path, stat)
        }
        OpCode::CreateTtl => {
            let req = CreateTtlRequest::decode(&mut r)?;
            let op = CreateOp {
                path: &req.path,
                data: req.data.clone(),
                acl: &req.acl,
                flags: req.flags,
                record: CreateRecord::Ttl(req.ttl),
            };
            let (path, stat) = tree.create(ctx, &op, triggers, None)?;
            WriteResult::Create2(path, stat)
        }
        OpCode::Delete => {
            let req = DeleteRequest::decode(&mut r)?;
            tree.delete(ctx, &req.path, req.version, triggers, None)?;
            WriteResult::Delete
        }
        OpCode::SetData => {
            let req = SetDataRequest::decode(&mut r)?;
            WriteResult::Stat(tree.set_data(
                ctx,
                &req.path,
                req.data,
                req.version,
                triggers,
                None,
            )?)
        }
        OpCode::SetAcl => {
            let req = SetAclRequest::decode(&mut r)?;
            WriteResult::Stat(tree.set_acl(ctx, &req.path, &req.acl, req.version, None)?)
        }
        OpCode::Check => {
            let req = CheckVersionRequest::decode(&mut r)?;
            tree.check(ctx, &req.path, req.version)?;
            let stat = tree.get(&req.path).map(|n| n.stat()).unwrap_or_default();
            WriteResult::Check(stat)
        }
        OpCode::Multi => {
            let ops = match Request::decode(op, &mut r) {
                Ok(Request::Multi(ops)) => ops,
                // ZooKeeper fails the whole multi, with an empty list of results.
                Err(DecodeError::NullPathInMulti) => {
                    return Ok(WriteResult::MultiAborted(ErrorCode::MarshallingError))
                }
                Ok(_) => return Err(ErrorCode::MarshallingError.into()),
                Err(e) => return Err(e.into()),
            };
            // ZooKeeper refuses to mix reads into a transaction ("Mixing different kind of ops").
            if ops.iter().any(MultiOp::is_read) {
                return Err(ErrorCode::MarshallingError.into());
            }
            WriteResult::Multi(apply_multi(tree, ctx, &ops, triggers))
        }

        // A createSession sent as a request has no ConnectRequest body to read.
        OpCode::CreateSession => return Err(ErrorCode::MarshallingError.into()),
        // ZooKeeper reads the whole body as the path (no length prefix) and checks no ACL.
        OpCode::DeleteContainer => {
            let path = String::from_utf8_lossy(body).into_owned();
            tree.delete_container_request(ctx.zxid, &path, triggers)?;
            WriteResult::Delete
        }
        // A reconfig reaches the log as `Command::Reconfig`, stamped by the leader; one
        // that was not is refused as a default ZooKeeper refuses them all.
        OpCode::Reconfig => return Err(ErrorCode::ReconfigDisabled.into()),
        _ => return Err(ErrorCode::Unimplemented.into()),
    })
}

/// A multi: every op or none. On failure the ops before the failing one report OK (0), the
/// failing one its error, the ones after RUNTIMEINCONSISTENCY, and no watch fires.
fn apply_multi(
    tree: &mut DataTree,
    ctx: &TxnContext,
    ops: &[MultiOp],
    triggers: &mut Vec<Trigger>,
) -> Vec<MultiResult> {
    let mut undo: Vec<Undo> = Vec::new();
    let mut op_triggers = Vec::new();
    let mut results = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        match apply_multi_op(tree, ctx, op, &mut op_triggers, &mut undo) {
            Ok(r) => results.push(r),
            Err(e) => {
                tree.rollback(undo);
                return (0..ops.len())
                    .map(|j| {
                        MultiResult::Error(match j.cmp(&i) {
                            std::cmp::Ordering::Less => ErrorCode::Ok.code(),
                            std::cmp::Ordering::Equal => e.code(),
                            std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency.code(),
                        })
                    })
                    .collect();
            }
        }
    }
    triggers.append(&mut op_triggers);
    results
}

fn apply_multi_op(
    tree: &mut DataTree,
    ctx: &TxnContext,
    op: &MultiOp,
    triggers: &mut Vec<Trigger>,
    undo: &mut Vec<Undo>,
) -> Result<MultiResult, ErrorCode> {
    Ok(match op {
        // Inside a multi ZooKeeper rebuilds every create from its flags (`Op.create`):
        // a container flag makes a createContainer, and a create2 becomes a plain create.
        MultiOp::Create(req) | MultiOp::Create2(req) | MultiOp::CreateContainer(req) => {
            let container =
                jute::CreateMode::from_flags(req.flags).is_some_and(|m| m.is_container());
            let record = if container {
                CreateRecord::Container
            } else {
                CreateRecord::Plain
            };
            let (path, stat) = tree.create(ctx, &create_op(req, record), triggers, Some(undo))?;
            if container {
                MultiResult::Create2(path, stat)
            } else {
                MultiResult::Create(path)
            }
        }
        MultiOp::CreateTtl(req) => {
            let op = CreateOp {
                path: &req.path,
                data: req.data.clone(),
                acl: &req.acl,
                flags: req.flags,
                record: CreateRecord::Ttl(req.ttl),
            };
            let (path, stat) = tree.create(ctx, &op, triggers, Some(undo))?;
            MultiResult::Create2(path, stat)
        }
        MultiOp::Delete(req) => {
            tree.delete(ctx, &req.path, req.version, triggers, Some(undo))?;
            MultiResult::Delete
        }
        MultiOp::SetData(req) => MultiResult::SetData(tree.set_data(
            ctx,
            &req.path,
            req.data.clone(),
            req.version,
            triggers,
            Some(undo),
        )?),
        MultiOp::Check(req) => {
            tree.check(ctx, &req.path, req.version)?;
            MultiResult::Check
        }
        MultiOp::GetChildren(_) | MultiOp::GetData(_) => return Err(ErrorCode::MarshallingError),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use jute::{Acl, CreateRequest};

    #[derive(Default)]
    struct Recorder {
        results: Vec<(i32, i64, WriteResult)>,
        triggers: Vec<(i64, Trigger)>,
        created: Vec<(i64, bool)>,
        closed: Vec<i64>,
        restored: Vec<(u64, i64, Vec<i64>)>,
    }

    impl ApplyObserver for Recorder {
        fn triggers(&mut self, zxid: i64, triggers: &[Trigger]) {
            self.triggers
                .extend(triggers.iter().map(|t| (zxid, t.clone())));
        }
        fn write_done(&mut self, write: &ClientWrite, zxid: i64, result: WriteResult) {
            self.results.push((write.xid, zxid, result));
        }
        fn session_created(&mut self, session: i64, _: &SessionInfo, _: Origin, _: i64, ok: bool) {
            self.created.push((session, ok));
        }
        fn session_closed(&mut self, session: i64, _: i64, _: CloseReason) {
            self.closed.push(session);
        }
        fn restored(&mut self, nonce: u64, zxid: i64, sessions: &BTreeMap<i64, SessionInfo>) {
            self.restored
                .push((nonce, zxid, sessions.keys().copied().collect()));
        }
    }

    /// Applies `commands` as one batch of term 1.
    fn run(sm: &mut StateMachine, rec: &mut Recorder, commands: Vec<Command>) {
        let batch = Batch { time: 5, commands };
        sm.apply_batch(&batch, 1, rec);
    }

    /// A restore: the snapshot's tree and sessions, but not the sessions open when it
    /// applies (reported closed, their ephemerals gone) nor the snapshot's membership.
    #[test]
    fn a_restore_takes_the_snapshot_but_expires_open_sessions_and_keeps_the_membership() {
        let mine = "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\nversion=100000000";
        let theirs = "server.9=10.0.0.9:2888:3888:participant;10.0.0.9:2181\nversion=100000000";
        let mut rec = Recorder::default();
        // The backup: sessions 2 and 3, each with an ephemeral, /kept, another membership.
        let mut backup = StateMachine::new(TreeOptions::default());
        run(
            &mut backup,
            &mut rec,
            vec![
                Command::SetConfig {
                    text: theirs.into(),
                },
                session(2),
                session(3),
                write(2, 1, Request::Create(create("/e2", 1))),
                write(3, 1, Request::Create(create("/e3", 1))),
                write(3, 2, Request::Create(create("/kept", 0))),
            ],
        );
        let bytes = snapshot::encode(&snapshot::SnapshotView::of(&backup));
        // Now: sessions 1 and 2 open, /gone, this ensemble's membership.
        let mut sm = StateMachine::new(TreeOptions::default());
        run(
            &mut sm,
            &mut rec,
            vec![
                Command::SetConfig { text: mine.into() },
                session(1),
                session(2),
                write(1, 1, Request::Create(create("/gone", 0))),
            ],
        );
        let before = sm.last_zxid;
        let mut rec = Recorder::default();
        run(
            &mut sm,
            &mut rec,
            vec![Command::Restore {
                nonce: 77,
                state: bytes,
            }],
        );
        assert_eq!(rec.closed, vec![1, 2], "the open sessions expire");
        assert_eq!(rec.restored, vec![(77, before + 1, vec![3])]);
        assert_eq!(sm.last_zxid, before + 1, "zxids keep rising");
        assert_eq!(sm.sessions.keys().copied().collect::<Vec<_>>(), vec![3]);
        assert!(sm.tree.get("/kept").is_some() && sm.tree.get("/e3").is_some());
        assert!(sm.tree.get("/gone").is_none(), "the tree is the snapshot's");
        assert!(
            sm.tree.get("/e2").is_none(),
            "an open session's ephemeral goes with it"
        );
        let config = sm
            .tree
            .get(tree::CONFIG)
            .and_then(|n| n.data().map(<[u8]>::to_vec));
        assert_eq!(config.as_deref(), Some(mine.as_bytes()));
        // Bytes that do not decode leave the state as it was (and report nothing).
        let mut rec = Recorder::default();
        let digest = snapshot::tree_digest(&sm.tree);
        run(
            &mut sm,
            &mut rec,
            vec![Command::Restore {
                nonce: 78,
                state: Bytes::from_static(b"junk"),
            }],
        );
        assert!(rec.restored.is_empty() && rec.closed.is_empty());
        assert_eq!(snapshot::tree_digest(&sm.tree), digest);
    }

    const ORIGIN: Origin = Origin { member: 1, conn: 1 };

    fn write(session: i64, xid: i32, req: Request) -> Command {
        let mut body = BytesMut::new();
        req.encode_body(&mut body);
        Command::Write(ClientWrite {
            session,
            xid,
            op: req.opcode().code(),
            origin: ORIGIN,
            auth: Vec::new().into(),
            body: body.freeze(),
        })
    }

    fn create(path: &str, flags: i32) -> CreateRequest {
        CreateRequest {
            path: path.into(),
            data: None,
            acl: vec![Acl::open_unsafe()],
            flags,
        }
    }

    fn session(id: i64) -> Command {
        Command::CreateSession {
            session: id,
            timeout: 30000,
            passwd: [1; 16],
            origin: ORIGIN,
        }
    }

    #[test]
    fn zxids_rise_per_command_and_jump_with_the_term() {
        let mut sm = StateMachine::new(TreeOptions::default());
        let mut rec = Recorder::default();
        let batch = Batch {
            time: 5,
            commands: vec![
                session(10),
                write(10, 1, Request::Create(create("/a", 0))),
                write(10, 2, Request::Create(create("/a", 0))),
            ],
        };
        sm.apply_batch(&batch, 1, &mut rec);
        let zxids: Vec<i64> = rec.results.iter().map(|r| r.1).collect();
        assert_eq!(zxids, vec![(1 << 32) | 2, (1 << 32) | 3]);
        assert_eq!(rec.results[1].2, WriteResult::Error(ErrorCode::NodeExists));
        sm.apply_batch(
            &Batch {
                time: 6,
                commands: vec![write(
                    10,
                    3,
                    Request::Delete(DeleteRequest {
                        path: "/a".into(),
                        version: -1,
                    }),
                )],
            },
            3,
            &mut rec,
        );
        assert_eq!(rec.results[2].1, (3 << 32) | 1);
        assert_eq!(sm.tree.get("/").unwrap().pzxid(), (3 << 32) | 1);
    }

    #[test]
    fn writes_of_unknown_sessions_fail_and_close_removes_ephemerals() {
        let mut sm = StateMachine::new(TreeOptions::default());
        let mut rec = Recorder::default();
        let batch = Batch {
            time: 5,
            commands: vec![
                write(99, 1, Request::Create(create("/x", 0))),
                session(10),
                write(10, 1, Request::Create(create("/e", 1))),
                Command::CloseSession {
                    session: 10,
                    reason: CloseReason::Expired,
                },
                write(10, 2, Request::Create(create("/y", 0))),
            ],
        };
        sm.apply_batch(&batch, 1, &mut rec);
        assert_eq!(
            rec.results[0].2,
            WriteResult::Error(ErrorCode::SessionExpired)
        );
        assert_eq!(rec.results[1].2, WriteResult::Create("/e".into()));
        assert_eq!(
            rec.results[2].2,
            WriteResult::Error(ErrorCode::SessionExpired)
        );
        assert!(sm.tree.get("/e").is_none());
        assert_eq!(rec.closed, vec![10]);
        assert!(rec
            .triggers
            .iter()
            .any(|(_, t)| *t == Trigger::Deleted("/e".into())));
    }

    #[test]
    fn failed_multi_reports_zookeeper_results_and_fires_nothing() {
        let mut sm = StateMachine::new(TreeOptions::default());
        let mut rec = Recorder::default();
        let ops = vec![
            MultiOp::Create(create("/m", 0)),
            MultiOp::Create(create("/m/s", 2)),
            MultiOp::Check(CheckVersionRequest {
                path: "/m".into(),
                version: 7,
            }),
            MultiOp::Delete(DeleteRequest {
                path: "/m".into(),
                version: -1,
            }),
        ];
        sm.apply_batch(
            &Batch {
                time: 1,
                commands: vec![session(1), write(1, 5, Request::Multi(ops))],
            },
            1,
            &mut rec,
        );
        assert_eq!(
            rec.results[0].2,
            WriteResult::Multi(vec![
                MultiResult::Error(0),
                MultiResult::Error(0),
                MultiResult::Error(-103),
                MultiResult::Error(-2)
            ])
        );
        assert!(rec.triggers.is_empty());
        assert!(sm.tree.get("/m").is_none());
        // The same multi without the bad check succeeds, with one zxid for all its ops.
        let ops = vec![
            MultiOp::Create(create("/m", 0)),
            MultiOp::Create(create("/m/s", 2)),
            MultiOp::Create2(create("/m/c", 4)),
            MultiOp::Check(CheckVersionRequest {
                path: "/m".into(),
                version: 0,
            }),
        ];
        sm.apply_batch(
            &Batch {
                time: 2,
                commands: vec![write(1, 6, Request::Multi(ops))],
            },
            1,
            &mut rec,
        );
        let WriteResult::Multi(results) = &rec.results[1].2 else {
            panic!("not a multi result")
        };
        assert_eq!(results[0], MultiResult::Create("/m".into()));
        assert_eq!(results[1], MultiResult::Create("/m/s0000000000".into()));
        assert!(
            matches!(&results[2], MultiResult::Create2(p, s) if p == "/m/c" && s.czxid == rec.results[1].1)
        );
        assert_eq!(results[3], MultiResult::Check);
        assert_eq!(
            sm.tree.get("/m/s0000000000").unwrap().czxid(),
            rec.results[1].1
        );
    }

    #[test]
    fn malformed_bodies_are_marshalling_errors() {
        let mut sm = StateMachine::new(TreeOptions::default());
        let mut rec = Recorder::default();
        let bad = Command::Write(ClientWrite {
            session: 1,
            xid: 3,
            op: 1,
            origin: ORIGIN,
            auth: Vec::new().into(),
            body: Bytes::from_static(b"\x00\x00"),
        });
        sm.apply_batch(
            &Batch {
                time: 1,
                commands: vec![session(1), bad],
            },
            1,
            &mut rec,
        );
        assert_eq!(
            rec.results[0].2,
            WriteResult::Error(ErrorCode::MarshallingError)
        );
    }
}
