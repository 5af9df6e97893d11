//! An in-process, deterministic harness for the Raft layer, and the tests that run on it.
//!
//! Members are real [`Consensus`] drivers over real RocksDB stores (in temporary
//! directories) with their real log writer thread, wired by an in-memory network instead
//! of TCP, with a manual clock instead of the system's, and with a recording
//! [`Connections`] instead of client connections. The harness runs the members in rounds:
//! every member takes one turn of its loop, waits for its log writer to finish what the
//! turn gave it, runs its snapshot jobs inline, and then the network delivers what was
//! sent. Messages can be cut between members (and healed), dropped for a while, or delayed
//! by a number of rounds, as in raft-rs's own `harness` (`Network::cut`).
//!
//! Time only moves when a test says so, so a test can place an event on an exact turn
//! (e.g. a member winning an election in the same turn its session timers run).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use parking_lot::Mutex;
use raft::eraftpb::{Message, MessageType};

use super::clock::Clock;
use super::connections::{ApplyRound, Connections};
use super::driver::{Consensus, Parts, Workers};
use super::input::{Input, SyncWaiter};
use super::log_writer::{self, LogWrite};
use super::replica::Replica;
use super::snapshot_worker::{self, SnapshotJob};
use super::status::Role;
use super::storage::RaftStorage;
use super::transport::Peers;
use crate::config::{Config, Member as MemberLine};
use crate::state::command::{ClientWrite, CloseReason, Command, ConnId, Origin};
use crate::state::snapshot::tree_digest;
use crate::state::tree::{TreeOptions, Trigger};
use crate::state::{ApplyObserver, SessionInfo, StateMachine, WriteResult};

/// One Raft tick in the harness.
const TICK: Duration = Duration::from_millis(10);

/// A clock that moves only when told.
struct ManualClock {
    start: Instant,
    wall_start: i64,
    elapsed: Mutex<Duration>,
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + *self.elapsed.lock()
    }

    fn wall_ms(&self) -> i64 {
        self.wall_start + self.elapsed.lock().as_millis() as i64
    }
}

/// What travels between members.
enum Payload {
    Raft(Box<Message>),
    Forward(Vec<Command>),
    Touch(Vec<i64>),
}

struct Envelope {
    from: u64,
    to: u64,
    /// Delivered in this round or later.
    due: u64,
    payload: Payload,
}

/// The in-memory network between members.
#[derive(Default)]
struct Wire {
    in_flight: Mutex<VecDeque<Envelope>>,
    /// Pairs of members that cannot reach each other (both directions).
    cut: Mutex<HashSet<(u64, u64)>>,
    /// Extra rounds a message from one member to another waits before delivery.
    delays: Mutex<BTreeMap<(u64, u64), u64>>,
    round: Mutex<u64>,
    dropped: Mutex<u64>,
}

impl Wire {
    fn post(&self, from: u64, to: u64, payload: Payload) {
        let delay = self.delays.lock().get(&(from, to)).copied().unwrap_or(0);
        let due = *self.round.lock() + delay;
        self.in_flight.lock().push_back(Envelope {
            from,
            to,
            due,
            payload,
        });
    }

    fn is_cut(&self, a: u64, b: u64) -> bool {
        self.cut.lock().contains(&(a.min(b), a.max(b)))
    }
}

/// A member's [`Peers`]: posts to the wire.
struct WirePeers {
    me: u64,
    wire: Arc<Wire>,
}

impl Peers for WirePeers {
    fn send_raft(&self, msg: &Message) {
        self.wire
            .post(self.me, msg.to, Payload::Raft(Box::new(msg.clone())));
    }

    fn forward(&self, to: u64, commands: &[Command]) -> bool {
        self.wire
            .post(self.me, to, Payload::Forward(commands.to_vec()));
        true
    }

    fn touch(&self, to: u64, sessions: &[i64]) {
        self.wire
            .post(self.me, to, Payload::Touch(sessions.to_vec()));
    }
}

/// What a member's connections were told, for the tests to look at.
#[derive(Default)]
struct Record {
    /// (connection, zxid, result) of writes that came through this member.
    writes: Vec<(ConnId, i64, WriteResult)>,
    grants: Vec<(i64, bool)>,
    /// (session, zxid, expired) of every session close applied here.
    closes: Vec<(i64, i64, bool)>,
    syncs: Vec<(ConnId, u64)>,
    leader_changes: u64,
    stops: u64,
}

/// A recording [`Connections`]. Sessions in `active` show traffic at every collection, as
/// a connected client's pings would.
#[derive(Default)]
struct Recorder {
    me: u64,
    record: Mutex<Record>,
    active: Mutex<Vec<i64>>,
}

struct RecordingRound<'a> {
    me: u64,
    record: &'a Mutex<Record>,
}

impl ApplyObserver for RecordingRound<'_> {
    fn triggers(&mut self, _zxid: i64, _triggers: &[Trigger]) {}

    fn write_done(&mut self, write: &ClientWrite, zxid: i64, result: WriteResult) {
        if write.origin.member == self.me {
            self.record
                .lock()
                .writes
                .push((write.origin.conn, zxid, result));
        }
    }

    fn session_created(&mut self, session: i64, _: &SessionInfo, o: Origin, _: i64, ok: bool) {
        if o.member == self.me {
            self.record.lock().grants.push((session, ok));
        }
    }

    fn session_closed(&mut self, session: i64, zxid: i64, reason: CloseReason) {
        let expired = reason == CloseReason::Expired;
        self.record.lock().closes.push((session, zxid, expired));
    }
}

impl ApplyRound for RecordingRound<'_> {
    fn settle(&mut self, _state: &StateMachine) {}
    fn finish(self: Box<Self>) {}
}

impl Connections for Recorder {
    fn apply_round(&self) -> Box<dyn ApplyRound + '_> {
        Box::new(RecordingRound {
            me: self.me,
            record: &self.record,
        })
    }

    fn sync_done(&self, _state: &StateMachine, conn: ConnId, token: u64) {
        self.record.lock().syncs.push((conn, token));
    }

    fn leader_changed(&self) {
        self.record.lock().leader_changes += 1;
    }

    fn stop_serving(&self) {
        self.record.lock().stops += 1;
    }

    fn take_touched(&self) -> Vec<i64> {
        self.active.lock().clone()
    }
}

/// One member under test.
struct Node {
    id: u64,
    consensus: Consensus,
    replica: Arc<Replica>,
    recorder: Arc<Recorder>,
    inbox: Sender<Input>,
    log_writer: Sender<LogWrite>,
    snapshot_jobs: Receiver<SnapshotJob>,
    storage: RaftStorage,
    /// Paused members take no turns (a SIGSTOP).
    paused: bool,
    _dir: tempfile::TempDir,
}

/// Settings of a harness group.
struct Settings {
    members: u64,
    snapshot_entries: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            members: 3,
            snapshot_entries: 100_000,
        }
    }
}

/// A group of members on the harness network.
struct Group {
    nodes: Vec<Node>,
    wire: Arc<Wire>,
    clock: Arc<ManualClock>,
}

impl Group {
    fn new(settings: Settings) -> Group {
        let wire = Arc::new(Wire::default());
        let clock = Arc::new(ManualClock {
            start: Instant::now(),
            wall_start: 1_700_000_000_000,
            elapsed: Mutex::new(Duration::ZERO),
        });
        let lines: BTreeMap<u64, MemberLine> = (1..=settings.members)
            .map(|id| {
                let line = MemberLine {
                    id,
                    host: "127.0.0.1".into(),
                    peer_port: 1,
                    client_port: None,
                    observer: false,
                };
                (id, line)
            })
            .collect();
        let nodes = (1..=settings.members)
            .map(|id| {
                let config = Config {
                    my_id: id,
                    members: lines.clone(),
                    raft_tick: TICK,
                    // Session activity is collected every tick.
                    tick_time_ms: 20,
                    min_session_timeout_ms: 40,
                    max_session_timeout_ms: 400,
                    snapshot_entries: settings.snapshot_entries,
                    snapshot_retain_entries: 0,
                    container_check_interval: Duration::from_secs(3600),
                    ..Config::default()
                };
                Node::start(config, &wire, &clock)
            })
            .collect();
        Group { nodes, wire, clock }
    }

    fn node(&self, id: u64) -> &Node {
        &self.nodes[id as usize - 1]
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    /// One round: every running member takes a turn, then the network delivers.
    fn round(&mut self) {
        for node in self.nodes.iter_mut().filter(|n| !n.paused) {
            node.turn();
        }
        self.deliver();
    }

    fn deliver(&mut self) {
        let round = {
            let mut r = self.wire.round.lock();
            *r += 1;
            *r
        };
        let due: Vec<Envelope> = {
            let mut q = self.wire.in_flight.lock();
            let (now, later): (VecDeque<_>, VecDeque<_>) = q.drain(..).partition(|e| e.due < round);
            *q = later;
            now.into_iter().collect()
        };
        for e in due {
            let snapshot_to = match &e.payload {
                Payload::Raft(m) if m.get_msg_type() == MessageType::MsgSnapshot => Some(e.to),
                _ => None,
            };
            let from = &self.nodes[e.from as usize - 1];
            let to = &self.nodes[e.to as usize - 1];
            if self.wire.is_cut(e.from, e.to) {
                *self.wire.dropped.lock() += 1;
                if let Some(to) = snapshot_to {
                    let _ = from.inbox.send(Input::SnapshotStatus { to, ok: false });
                }
                continue;
            }
            let input = match e.payload {
                Payload::Raft(m) => Input::Raft(m),
                Payload::Forward(cs) => Input::Forwarded(cs),
                Payload::Touch(ss) => Input::Touch(ss),
            };
            let _ = to.inbox.send(input);
            if let Some(to) = snapshot_to {
                let _ = from.inbox.send(Input::SnapshotStatus { to, ok: true });
            }
        }
    }

    /// Moves the clock one tick and runs a round.
    fn tick(&mut self) {
        *self.clock.elapsed.lock() += TICK;
        self.round();
    }

    /// Ticks for `d`.
    fn run_for(&mut self, d: Duration) {
        let end = self.now() + d;
        while self.now() < end {
            self.tick();
        }
    }

    /// Rounds without moving the clock, enough for a write to be proposed, replicated,
    /// committed, applied everywhere and answered (inputs that a turn produces for a member
    /// itself, like the log writer's `Persisted`, are only handled in its next turn).
    fn settle(&mut self) {
        for _ in 0..12 {
            self.round();
        }
    }

    /// Ticks until exactly one running member leads and the others follow it; its id.
    fn elect(&mut self) -> u64 {
        for _ in 0..2_000 {
            self.tick();
            if let Some(leader) = self.agreed_leader() {
                self.settle();
                return leader;
            }
        }
        panic!("no leader after 2,000 ticks");
    }

    /// The leader every member that is not cut off or paused serves under.
    fn agreed_leader(&self) -> Option<u64> {
        let leaders: Vec<u64> = self
            .nodes
            .iter()
            .filter(|n| !n.paused && n.role() == Role::Leader && n.replica.is_serving())
            .map(|n| n.id)
            .collect();
        let [leader] = leaders[..] else { return None };
        let followers_agree = self
            .nodes
            .iter()
            .filter(|n| n.id != leader && !n.paused && !self.wire.is_cut(n.id, leader))
            .all(|n| n.role() == Role::Follower && n.leader() == leader && n.replica.is_serving());
        followers_agree.then_some(leader)
    }

    fn cut(&self, a: u64, b: u64) {
        self.wire.cut.lock().insert((a.min(b), a.max(b)));
    }

    /// Cuts `id` from every other member.
    fn isolate(&self, id: u64) {
        for n in &self.nodes {
            if n.id != id {
                self.cut(id, n.id);
            }
        }
    }

    fn heal(&self) {
        self.wire.cut.lock().clear();
        self.wire.delays.lock().clear();
    }

    fn delay(&self, from: u64, to: u64, rounds: u64) {
        self.wire.delays.lock().insert((from, to), rounds);
    }

    /// Creates a session through member `via` and waits until every running member that
    /// can reach the leader has applied it.
    fn create_session(&mut self, via: u64, session: i64, timeout_ms: i32) {
        self.node(via).submit(Command::CreateSession {
            session,
            timeout: timeout_ms,
            passwd: [7; 16],
            origin: Origin {
                member: via,
                conn: 1,
            },
        });
        self.settle();
        assert!(
            self.node(via)
                .recorder
                .record
                .lock()
                .grants
                .contains(&(session, true)),
            "session 0x{session:x} was not granted through member {via}"
        );
    }

    /// A client's create of `path` through member `via` on connection `conn`.
    fn create(&mut self, via: u64, session: i64, conn: ConnId, path: &str) {
        let mut body = BytesMut::new();
        jute::Record::encode(
            &jute::CreateRequest {
                path: path.into(),
                data: Some(bytes::Bytes::from_static(b"x")),
                acl: vec![jute::Acl {
                    perms: jute::perms::ALL,
                    id: jute::Id {
                        scheme: "world".into(),
                        id: "anyone".into(),
                    },
                }],
                flags: 0,
            },
            &mut body,
        );
        self.node(via).submit(Command::Write(ClientWrite {
            session,
            xid: 1,
            op: jute::OpCode::Create.code(),
            origin: Origin { member: via, conn },
            auth: Vec::new().into(),
            body: body.freeze(),
        }));
    }
}

impl Node {
    fn start(config: Config, wire: &Arc<Wire>, clock: &Arc<ManualClock>) -> Node {
        let id = config.my_id;
        let dir = tempfile::tempdir().expect("temporary directory");
        let storage = RaftStorage::open(dir.path(), super::initial_membership(&config))
            .expect("open a fresh store");
        let state = StateMachine::new(TreeOptions::default());
        let (inbox, inbox_rx) = std::sync::mpsc::channel();
        let replica = Arc::new(Replica::new(config, state, inbox.clone()));
        let recorder = Arc::new(Recorder {
            me: id,
            ..Recorder::default()
        });
        let peers: Arc<dyn Peers> = Arc::new(WirePeers {
            me: id,
            wire: wire.clone(),
        });
        let (log_writer, log_jobs) = std::sync::mpsc::channel();
        let writer = {
            let (storage, peers, replica) = (storage.clone(), peers.clone(), replica.clone());
            std::thread::spawn(move || log_writer::run(log_jobs, storage, Some(peers), replica))
        };
        let (snapshots, snapshot_jobs) = std::sync::mpsc::channel();
        let consensus = Consensus::new(Parts {
            replica: replica.clone(),
            connections: recorder.clone(),
            storage: storage.clone(),
            inbox: inbox_rx,
            peers: Some(peers),
            clock: clock.clone(),
            workers: Workers {
                log_writer: log_writer.clone(),
                snapshots,
                threads: vec![writer],
            },
        })
        .expect("a driver over a fresh store");
        Node {
            id,
            consensus,
            replica,
            recorder,
            inbox,
            log_writer,
            snapshot_jobs,
            storage,
            paused: false,
            _dir: dir,
        }
    }

    /// One turn of the driver, then everything its workers were given.
    fn turn(&mut self) {
        assert!(self.consensus.turn(None), "member {} stopped", self.id);
        // Whatever the turn staged is durable, its messages sent and `Persisted` queued.
        let (tx, rx) = std::sync::mpsc::channel();
        if self.log_writer.send(LogWrite::Barrier(tx)).is_ok() {
            let _ = rx.recv();
        }
        while let Ok(job) = self.snapshot_jobs.try_recv() {
            let written = snapshot_worker::write_snapshot(&self.storage, job, &|_| true);
            let _ = self.inbox.send(Input::SnapshotWritten(written));
        }
    }

    fn submit(&self, command: Command) {
        let _ = self.inbox.send(Input::Command(command));
    }

    fn role(&self) -> Role {
        self.replica.status.role()
    }

    fn leader(&self) -> u64 {
        self.replica.status.leader.load(Ordering::Relaxed)
    }

    fn has_session(&self, session: i64) -> bool {
        self.replica.state.read().sessions.contains_key(&session)
    }

    fn digest(&self) -> (i64, u64) {
        let state = self.replica.state.read();
        (state.last_zxid, tree_digest(&state.tree))
    }

    /// Pretends a client of `session` is connected here and active.
    fn client_active(&self, sessions: &[i64]) {
        *self.recorder.active.lock() = sessions.to_vec();
    }
}

fn others(leader: u64) -> (u64, u64) {
    match leader {
        1 => (2, 3),
        2 => (1, 3),
        _ => (1, 2),
    }
}

#[test]
fn one_leader_is_elected_and_every_member_applies_the_same_writes() {
    let mut g = Group::new(Settings::default());
    let leader = g.elect();
    g.create_session(leader, 0x100, 400);
    for i in 0..20 {
        g.create(leader, 0x100, 5, &format!("/n{i}"));
    }
    g.settle();
    let digests: Vec<_> = g.nodes.iter().map(Node::digest).collect();
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
    let record = g.node(leader).recorder.record.lock();
    assert_eq!(record.writes.len(), 20);
    assert!(record
        .writes
        .iter()
        .all(|(conn, _, r)| *conn == 5 && matches!(r, WriteResult::Create(_))));
    // Zxids of one leader's writes rise strictly, in submission order.
    let zxids: Vec<i64> = record.writes.iter().map(|w| w.1).collect();
    assert!(zxids.windows(2).all(|w| w[0] < w[1]), "{zxids:?}");
}

#[test]
fn a_follower_forwards_writes_and_only_it_answers_them() {
    let mut g = Group::new(Settings::default());
    let leader = g.elect();
    let (f, _) = others(leader);
    g.create_session(f, 0x200, 400);
    g.create(f, 0x200, 9, "/via-follower");
    g.settle();
    for n in &g.nodes {
        assert!(
            n.replica.state.read().tree.get("/via-follower").is_some(),
            "member {} lacks the node",
            n.id
        );
    }
    let answered = g.node(f).recorder.record.lock().writes.clone();
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].0, 9);
    assert!(g.node(leader).recorder.record.lock().writes.is_empty());
}

#[test]
fn a_sync_waits_for_the_quorum_and_an_isolated_leader_cannot_answer_one() {
    let mut g = Group::new(Settings::default());
    let leader = g.elect();
    let (f, _) = others(leader);
    // A follower's sync is answered once it has applied the leader's commit index.
    g.create_session(leader, 0x300, 400);
    let _ = g
        .node(f)
        .inbox
        .send(Input::ReadIndex(SyncWaiter::Pipeline { conn: 3, token: 1 }));
    g.settle();
    assert_eq!(g.node(f).recorder.record.lock().syncs, vec![(3, 1)]);
    // A leader cut off from both followers cannot confirm its leadership: its sync stays
    // unanswered (a stale read would otherwise be possible).
    g.isolate(leader);
    let _ = g
        .node(leader)
        .inbox
        .send(Input::ReadIndex(SyncWaiter::Pipeline { conn: 4, token: 2 }));
    g.run_for(TICK * 8);
    assert!(g.node(leader).recorder.record.lock().syncs.is_empty());
    // Messages delayed (not lost) still get a sync through once they arrive.
    g.heal();
    let new_leader = g.elect();
    let (f, _) = others(new_leader);
    g.delay(f, new_leader, 3);
    g.delay(new_leader, f, 3);
    let _ = g
        .node(f)
        .inbox
        .send(Input::ReadIndex(SyncWaiter::Pipeline { conn: 5, token: 3 }));
    g.round();
    g.round();
    assert!(!g.node(f).recorder.record.lock().syncs.contains(&(5, 3)));
    g.run_for(TICK * 10);
    assert!(g.node(f).recorder.record.lock().syncs.contains(&(5, 3)));
}

#[test]
fn a_member_that_fell_behind_the_compacted_log_catches_up_by_snapshot() {
    let mut g = Group::new(Settings {
        members: 3,
        snapshot_entries: 5,
    });
    let leader = g.elect();
    let (f, lagging) = others(leader);
    g.create_session(leader, 0x400, 400);
    g.isolate(lagging);
    for i in 0..40 {
        g.create(leader, 0x400, 2, &format!("/s{i}"));
        g.settle();
    }
    let first = g.node(leader).storage.snapshot_metadata().index;
    assert!(first > 0, "the leader took no snapshot");
    // What the lagging member lacks is no longer in the leader's log: only a snapshot can
    // bring it up to date.
    let leader_first = raft::Storage::first_index(&g.node(leader).storage).expect("first index");
    let lagging_last = raft::Storage::last_index(&g.node(lagging).storage).expect("last index");
    assert!(
        leader_first > lagging_last + 1,
        "the leader's log still starts at {leader_first}, the lagging member has up to {lagging_last}"
    );
    g.heal();
    g.run_for(TICK * 50);
    g.settle();
    assert_eq!(g.node(lagging).digest(), g.node(leader).digest());
    assert_eq!(g.node(f).digest(), g.node(leader).digest());
    assert!(g.node(lagging).storage.snapshot_metadata().index >= first);
}

/// The race the chaos suite found: a member that wins an election must not decide any
/// expiry on the deadlines it kept as a follower (never touched: touches go to the leader)
/// before its first `Ready` re-arms every session with a full timeout. Two sessions, one
/// client on each of the two followers: whichever follower wins, the session whose client
/// is on the other one has only a stale deadline on the winner in the turn it wins (the
/// other follower's touches reach it only once that follower learns who leads), and that
/// turn runs the session timers long after the stale deadline.
#[test]
fn a_new_leader_does_not_expire_live_sessions_on_stale_follower_deadlines() {
    let mut g = Group::new(Settings::default());
    let old = g.elect();
    let (a, b) = others(old);
    let timeout = Duration::from_millis(200);
    let (sa, sb) = (0x500, 0x501);
    g.create_session(old, sa, timeout.as_millis() as i32);
    g.create_session(old, sb, timeout.as_millis() as i32);
    // Both clients are connected to the leader and active for five session timeouts.
    g.node(old).client_active(&[sa, sb]);
    g.run_for(timeout * 5);
    assert!(g
        .nodes
        .iter()
        .all(|n| n.has_session(sa) && n.has_session(sb)));
    // The leader is cut off; each client moves to one of the others at once.
    g.node(old).client_active(&[]);
    g.isolate(old);
    g.node(a).client_active(&[sa]);
    g.node(b).client_active(&[sb]);
    let new = loop {
        g.tick();
        let leaders: Vec<u64> = [a, b]
            .into_iter()
            .filter(|id| g.node(*id).role() == Role::Leader)
            .collect();
        if let [l] = leaders[..] {
            break l;
        }
        assert!(g.now() < g.clock.start + timeout * 40, "no new leader");
    };
    g.run_for(timeout * 3);
    for id in [a, b] {
        for s in [sa, sb] {
            assert!(
                g.node(id).has_session(s),
                "member {id} lost the live session 0x{s:x}: expired by the new leader {new}"
            );
        }
        let closes = g.node(id).recorder.record.lock().closes.clone();
        assert!(closes.is_empty(), "member {id} applied closes {closes:?}");
    }
    // Once the clients are gone for good, the new leader expires the sessions after their
    // timeout, and every member applies the same closes at the same zxids.
    g.node(a).client_active(&[]);
    g.node(b).client_active(&[]);
    g.heal();
    g.run_for(timeout * 3);
    g.settle();
    let closes: Vec<_> = g
        .nodes
        .iter()
        .map(|n| n.recorder.record.lock().closes.clone())
        .collect();
    assert_eq!(closes[0].len(), 2, "{closes:?}");
    assert!(
        closes[0].iter().all(|c| c.2),
        "closed as expired: {closes:?}"
    );
    assert!(closes.iter().all(|c| *c == closes[0]), "{closes:?}");
    assert!(g
        .nodes
        .iter()
        .all(|n| !n.has_session(sa) && !n.has_session(sb)));
}

/// A leader that was paused (SIGSTOP) past its session's timeout, and deposed meanwhile,
/// must not expire the session when it wakes: the session was alive on the new leader.
#[test]
fn a_leader_woken_from_a_pause_does_not_expire_live_sessions() {
    let mut g = Group::new(Settings::default());
    let old = g.elect();
    let session = 0x600;
    let timeout = Duration::from_millis(200);
    g.create_session(old, session, timeout.as_millis() as i32);
    let (a, b) = others(old);
    // The client sits on a follower, whose touches reach the leader.
    g.node(a).client_active(&[session]);
    g.run_for(timeout * 2);
    g.nodes[old as usize - 1].paused = true;
    g.run_for(timeout * 4);
    let new = g.agreed_leader().expect("the others elected a leader");
    assert_ne!(new, old);
    g.nodes[old as usize - 1].paused = false;
    g.run_for(timeout * 2);
    g.settle();
    for n in &g.nodes {
        assert!(
            n.has_session(session),
            "member {} lost a live session",
            n.id
        );
    }
    assert_eq!(g.node(b).digest(), g.node(old).digest());
}
