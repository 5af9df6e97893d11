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
use super::input::{Input, PeerIdentity, SyncWaiter, Transfer};
use super::log_writer::{self, LogWrite};
use super::replica::Replica;
use super::snapshot_worker::{self, SnapshotJob};
use super::status::Role;
use super::storage::RaftStorage;
use super::timing::election_timeout;
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
    /// What a member says of its store (a TCP hello or status frame).
    Identity(PeerIdentity),
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
    members: Vec<u64>,
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

    fn announce(&self, me: PeerIdentity, tell_now: bool) {
        if tell_now {
            for to in self.members.iter().filter(|id| **id != self.me) {
                self.wire.post(self.me, *to, Payload::Identity(me));
            }
        }
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
    dir: tempfile::TempDir,
}

/// How [`Group::up`] brings a member back.
enum Restart {
    Same,
    Wiped,
    From(tempfile::TempDir),
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create a directory");
    for entry in std::fs::read_dir(from).expect("read a directory") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// Settings of a harness group.
struct Settings {
    members: u64,
    /// Observers after the voting members (ids `members + 1` on).
    observers: u64,
    snapshot_entries: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            members: 3,
            observers: 0,
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

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

impl Group {
    fn new(settings: Settings) -> Group {
        let wire = Arc::new(Wire::default());
        let clock = Arc::new(ManualClock {
            start: Instant::now(),
            wall_start: 1_700_000_000_000,
            elapsed: Mutex::new(Duration::ZERO),
        });
        let all = settings.members + settings.observers;
        let lines: BTreeMap<u64, MemberLine> = (1..=all)
            .map(|id| {
                let line = MemberLine {
                    id,
                    host: "127.0.0.1".into(),
                    peer_port: 1,
                    election_port: None,
                    client_port: None,
                    observer: id > settings.members,
                };
                (id, line)
            })
            .collect();
        let nodes = (1..=all)
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
                Node::start(config, temp_dir(), &wire, &clock)
            })
            .collect();
        let g = Group { nodes, wire, clock };
        for n in &g.nodes {
            g.hellos(n.id);
        }
        g
    }

    /// Member `id` and every other say what their stores are to each other, as the
    /// hellos of their TCP connections would.
    fn hellos(&self, id: u64) {
        for n in self.nodes.iter().filter(|n| n.id != id) {
            self.wire
                .post(id, n.id, Payload::Identity(self.node(id).said()));
            self.wire.post(n.id, id, Payload::Identity(n.said()));
        }
    }

    /// Member `id` goes down: it takes no turns and nothing reaches it or comes from it.
    fn down(&mut self, id: u64) {
        self.isolate(id);
        self.nodes[id as usize - 1].paused = true;
    }

    /// Member `id` comes back up as a new process: on its data directory as it was, on an
    /// empty one (`Restart::Wiped`), or on a copy taken earlier (`Restart::From`).
    fn up(&mut self, id: u64, how: Restart) {
        let i = id as usize - 1;
        let old = self.nodes.remove(i);
        let config = (*old.replica.config()).clone();
        let dir = old.stop();
        let dir = match how {
            Restart::Same => dir,
            Restart::Wiped => temp_dir(),
            Restart::From(copy) => copy,
        };
        let node = Node::start(config, dir, &self.wire, &self.clock);
        self.nodes.insert(i, node);
        self.wire.cut.lock().retain(|(a, b)| *a != id && *b != id);
        self.hellos(id);
    }

    /// A copy of member `id`'s data directory as it is now (the member must be down).
    fn copy_dir(&self, id: u64) -> tempfile::TempDir {
        assert!(self.node(id).paused, "copying a running member's directory");
        let to = temp_dir();
        copy_tree(self.node(id).dir.path(), to.path());
        to
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
                Payload::Identity(said) => Input::PeerIdentity(e.from, said),
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
        let states: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                let r = &n.consensus.group.node.raft;
                format!(
                    "{}: {:?} serving {} leader {} {:?} term {} vote {} last {} trusted {:?} paused {} held {:?}",
                    n.id,
                    n.role(),
                    n.replica.is_serving(),
                    n.leader(),
                    r.state,
                    r.term,
                    r.vote,
                    r.raft_log.last_index(),
                    n.storage.identity(),
                    n.paused,
                    n.replica.status.held_back.lock()
                )
            })
            .collect();
        panic!("no leader after 2,000 ticks: {states:#?}");
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
            .all(|n| {
                matches!(n.role(), Role::Follower | Role::Observer)
                    && n.leader() == leader
                    && n.replica.is_serving()
            });
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
    fn start(
        config: Config,
        dir: tempfile::TempDir,
        wire: &Arc<Wire>,
        clock: &Arc<ManualClock>,
    ) -> Node {
        let id = config.my_id;
        let members: Vec<u64> = config.members.keys().copied().collect();
        let (storage, loaded) = RaftStorage::open_loading(
            dir.path(),
            super::initial_membership(&config),
            Some(|src| crate::state::snapshot::decode_from(src, TreeOptions::default())),
        )
        .expect("open the store");
        let state = match loaded {
            Some(decoded) => decoded.expect("decode the stored snapshot"),
            None => StateMachine::new(TreeOptions::default()),
        };
        let (inbox, inbox_rx) = std::sync::mpsc::channel();
        let replica = Arc::new(Replica::new(config, state, inbox.clone()));
        let recorder = Arc::new(Recorder {
            me: id,
            ..Recorder::default()
        });
        let peers: Arc<dyn Peers> = Arc::new(WirePeers {
            me: id,
            members,
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
                scrub: std::sync::mpsc::channel().0,
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
            dir,
        }
    }

    /// Stops the member as a clean shutdown would; its data directory.
    fn stop(self) -> tempfile::TempDir {
        let Node {
            consensus,
            log_writer,
            storage,
            dir,
            ..
        } = self;
        // The driver lets its workers finish and joins them; the store closes once the
        // last handle on it (this node's own) is gone.
        drop(log_writer);
        consensus.shutdown();
        drop(storage);
        dir
    }

    /// What this member says of its store.
    fn said(&self) -> PeerIdentity {
        let identity = self.storage.identity();
        PeerIdentity {
            incarnation: identity.incarnation,
            trusted: identity.trusted,
            seed: identity.seed,
            last_index: raft::Storage::last_index(&self.storage).unwrap_or(0),
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

/// raft-rs forgets which followers answered at every quorum check; a yield asked in the
/// moment after one (nobody looks active) still hands over, once a follower answers.
#[test]
fn a_yield_right_after_a_quorum_check_still_hands_over() {
    let mut g = Group::new(Settings::default());
    let leader = g.elect();
    let nobody_active = |g: &Group| {
        let raft = &g.node(leader).consensus.group.node.raft;
        raft.prs()
            .iter()
            .all(|(id, pr)| *id == leader || !pr.recent_active)
    };
    // Turn by turn, without delivering, until the leader's check has just run.
    let mut turns = 0;
    while !nobody_active(&g) {
        *g.clock.elapsed.lock() += TICK;
        g.nodes[leader as usize - 1].turn();
        turns += 1;
        assert!(turns < 1_000, "no quorum check in {turns} ticks");
    }
    let _ = g
        .node(leader)
        .inbox
        .send(Input::TransferLeader(Transfer::Yield));
    g.nodes[leader as usize - 1].turn();
    g.run_for(election_timeout(TICK));
    let next = g.agreed_leader();
    assert!(
        next.is_some_and(|l| l != leader),
        "still {next:?}, was {leader}"
    );
}

/// A transfer to a named voter, asked of a follower that is not that voter (the console's
/// "make leader"): the follower passes it to the leader, and the named voter leads.
#[test]
fn a_transfer_to_a_named_voter_asked_of_another_follower() {
    let mut g = Group::new(Settings::default());
    let leader = g.elect();
    let (asked, named) = others(leader);
    g.settle();
    let _ = g
        .node(asked)
        .inbox
        .send(Input::TransferLeader(Transfer::To(named)));
    g.run_for(election_timeout(TICK));
    assert_eq!(g.agreed_leader(), Some(named), "was {leader}");
    // Naming the leader itself, or a stranger, changes nothing.
    for target in [named, 9] {
        let _ = g
            .node(asked)
            .inbox
            .send(Input::TransferLeader(Transfer::To(target)));
        g.run_for(election_timeout(TICK));
        assert_eq!(g.agreed_leader(), Some(named), "after asking for {target}");
    }
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
        snapshot_entries: 5,
        ..Settings::default()
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

/// Every path in the group's acknowledged writes that member `id` lacks.
fn missing(g: &Group, id: u64, paths: &[String]) -> Vec<String> {
    let state = g.node(id).replica.state.read();
    paths
        .iter()
        .filter(|p| state.tree.get(p).is_none())
        .cloned()
        .collect()
}

/// Creates `count` nodes through `via`, each acknowledged before the next; their paths.
fn acknowledged_creates(
    g: &mut Group,
    via: u64,
    session: i64,
    prefix: &str,
    count: usize,
) -> Vec<String> {
    let before = g.node(via).recorder.record.lock().writes.len();
    let paths: Vec<String> = (0..count).map(|i| format!("/{prefix}{i}")).collect();
    for p in &paths {
        g.create(via, session, 7, p);
        g.settle();
    }
    let record = g.node(via).recorder.record.lock();
    let answered = &record.writes[before..];
    assert_eq!(answered.len(), count, "every create was answered");
    assert!(answered
        .iter()
        .all(|(_, _, r)| matches!(r, WriteResult::Create(_))));
    paths.clone()
}

fn trusted(g: &Group, id: u64) -> bool {
    g.node(id).storage.identity().trusted
}

fn is_voter(g: &Group, id: u64) -> bool {
    g.node(id).storage.conf_state().voters.contains(&id)
}

/// The scenario: a follower (the stale one) is down while writes are acknowledged
/// by the other two; both of those go down; one of them comes back wiped, then the stale
/// one. Either of the two may be the wiped one, over eight runs. The wiped member must not
/// vote the stale one in: no leader until the third member returns, then nothing lost.
#[test]
fn a_wiped_member_never_helps_a_stale_member_lead_and_no_acknowledged_write_is_lost() {
    // Each run elects with other random timeouts, so the roles fall on other members.
    let runs = (0..8).map(|run| run % 2 == 1);
    for wipe_leader in runs {
        let mut g = Group::new(Settings::default());
        let leader = g.elect();
        let (stale, other) = others(leader);
        g.create_session(leader, 0x900, 4000);
        g.down(stale);
        let paths = acknowledged_creates(&mut g, leader, 0x900, "n", 20);
        g.down(leader);
        g.down(other);
        let (wiped, keeper) = if wipe_leader {
            (leader, other)
        } else {
            (other, leader)
        };
        g.up(wiped, Restart::Wiped);
        g.up(stale, Restart::Same);
        g.run_for(TICK * 600);
        for id in [wiped, stale] {
            assert_ne!(g.node(id).role(), Role::Leader, "member {id} leads");
            assert!(!g.node(id).replica.is_serving(), "member {id} serves");
        }
        assert!(!trusted(&g, wiped));
        let why = g.node(stale).replica.status.held_back.lock().clone();
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains(&format!("[{wiped}]"))),
            "the stale member says why it is held back: {why:?}"
        );
        assert!(g.node(wiped).replica.status.held_back.lock().is_some());
        // The third member returns: it leads (it has the writes), the wiped member is
        // caught up and promoted, and every acknowledged write is on every member.
        g.up(keeper, Restart::Same);
        let new_leader = g.elect();
        g.run_for(TICK * 300);
        g.settle();
        assert_eq!(
            new_leader, keeper,
            "only the member with every write can lead"
        );
        for id in 1..=3 {
            assert_eq!(missing(&g, id, &paths), Vec::<String>::new(), "member {id}");
        }
        assert!(trusted(&g, wiped), "the wiped member was promoted");
        assert!(is_voter(&g, wiped), "and is a voter again");
        assert!(g.node(wiped).replica.is_serving());
        assert_eq!(g.node(wiped).digest(), g.node(keeper).digest());
    }
}

#[test]
fn a_wiped_member_catches_up_and_serves_while_the_leader_is_up() {
    let mut g = Group::new(Settings::default());
    let leader = g.elect();
    let (f, _) = others(leader);
    g.create_session(leader, 0xa00, 4000);
    let paths = acknowledged_creates(&mut g, leader, 0xa00, "w", 10);
    g.down(f);
    g.up(f, Restart::Wiped);
    assert!(!trusted(&g, f));
    g.run_for(TICK * 300);
    g.settle();
    assert!(
        trusted(&g, f),
        "caught up and promoted with no operator step"
    );
    assert!(is_voter(&g, f));
    assert!(g.node(f).replica.is_serving());
    assert_eq!(missing(&g, f, &paths), Vec::<String>::new());
    // It counts again: with the third member down, the two still commit.
    let third = (1..=3).find(|id| *id != leader && *id != f).unwrap_or(0);
    g.down(third);
    let more = acknowledged_creates(&mut g, leader, 0xa00, "x", 3);
    assert_eq!(missing(&g, f, &more), Vec::<String>::new());
}

/// A member promoted back cannot campaign until its quarantine is over, so it drops a
/// `MsgTimeoutNow`: a yield right after its promotion goes to another follower.
#[test]
fn a_yield_skips_a_member_still_in_quarantine() {
    let mut g = Group::new(Settings::default());
    let leader = g.elect();
    // The lower id wins a tie of logs, so without the rule the wiped one would be picked.
    let (f, other) = others(leader);
    g.down(f);
    g.up(f, Restart::Wiped);
    let mut ticks = 0;
    while !trusted(&g, f) {
        g.tick();
        ticks += 1;
        assert!(ticks < 1_000, "not promoted in {ticks} ticks");
    }
    g.settle();
    let _ = g
        .node(leader)
        .inbox
        .send(Input::TransferLeader(Transfer::Yield));
    // The hand-over may wait for `other` to answer after a quorum check (see above).
    let end = g.now() + election_timeout(TICK) * 3;
    let mut next = None;
    while g.now() < end && next.is_none() {
        g.tick();
        next = g.agreed_leader().filter(|l| *l != leader);
    }
    let states: Vec<_> = g
        .nodes
        .iter()
        .map(|n| (n.id, n.role(), n.leader()))
        .collect();
    assert_eq!(next, Some(other), "the yield went to {other}: {states:?}");
}

/// A member restored from an older copy of its directory (trusted by what it holds) is
/// caught by the leader's commit index and recovers as a wiped one does.
#[test]
fn a_member_restored_from_an_older_copy_takes_a_new_incarnation_and_catches_up() {
    let mut g = Group::new(Settings::default());
    let leader = g.elect();
    let (f, _) = others(leader);
    g.create_session(leader, 0xb00, 4000);
    acknowledged_creates(&mut g, leader, 0xb00, "a", 5);
    g.down(f);
    let old_copy = g.copy_dir(f);
    g.up(f, Restart::Same);
    g.run_for(TICK * 50);
    let paths = acknowledged_creates(&mut g, leader, 0xb00, "b", 10);
    let before = g.node(f).storage.identity();
    assert!(before.trusted);
    g.down(f);
    g.up(f, Restart::From(old_copy));
    g.run_for(TICK * 300);
    g.settle();
    let after = g.node(f).storage.identity();
    assert_ne!(after.incarnation, before.incarnation, "a new incarnation");
    assert!(after.trusted, "promoted again");
    assert!(g.node(f).replica.is_serving());
    assert_eq!(missing(&g, f, &paths), Vec::<String>::new());
}

/// A member that starts after the others formed the ensemble (empty, like a wiped one)
/// joins through the same catch-up; all three founding together are trusted at once.
#[test]
fn members_of_a_new_ensemble_are_trusted_and_a_late_one_is_caught_up() {
    let mut g = Group::new(Settings::default());
    g.elect();
    g.run_for(TICK * 20);
    assert!((1..=3).all(|id| trusted(&g, id)), "founding members");
    let mut g = Group::new(Settings::default());
    g.down(3);
    let leader = g.elect();
    g.create_session(leader, 0xc00, 4000);
    let paths = acknowledged_creates(&mut g, leader, 0xc00, "c", 5);
    g.up(3, Restart::Wiped);
    g.run_for(TICK * 300);
    g.settle();
    assert!(trusted(&g, 3));
    assert!(is_voter(&g, 3));
    assert_eq!(missing(&g, 3, &paths), Vec::<String>::new());
}

/// After `zooraft import` (or `restore`) on one member, the empty others vote that one in
/// (its store is the seed) and not one of themselves.
#[test]
fn empty_members_vote_the_imported_seed_in() {
    let mut g = Group::new(Settings::default());
    // Member 1's store as an import writes it: a snapshot at index 1 holding a node.
    g.down(1);
    let seeded = temp_dir();
    {
        let config = g.node(1).replica.config().clone();
        let storage = RaftStorage::open(seeded.path(), super::initial_membership(&config))
            .expect("a new store");
        let state = StateMachine::new(TreeOptions::default());
        let mut meta = raft::eraftpb::SnapshotMetadata {
            index: 1,
            term: 1,
            ..Default::default()
        };
        meta.set_conf_state(super::initial_membership(&config));
        let mut snap = raft::eraftpb::Snapshot {
            data: crate::state::snapshot::encode(&crate::state::snapshot::SnapshotView::of(&state)),
            ..Default::default()
        };
        snap.set_metadata(meta);
        storage.install_snapshot(&snap);
        storage
            .set_identity(super::Identity::seed())
            .expect("seed identity");
    }
    // The two empty members alone elect nobody (they heard from the seed, which is down).
    g.down(2);
    g.down(3);
    g.up(2, Restart::Wiped);
    g.up(3, Restart::Wiped);
    g.up(1, Restart::From(seeded));
    let leader = g.elect();
    assert_eq!(leader, 1, "only the seed can be voted in");
    g.run_for(TICK * 100);
    g.settle();
    for id in 1..=3 {
        assert!(trusted(&g, id), "member {id}");
        assert_eq!(g.node(id).digest(), g.node(1).digest(), "member {id}");
    }
    assert!(!g.node(1).storage.identity().seed, "a seed no more");
}

/// A wiped observer serves nobody until it has caught up and been trusted again: it could
/// show a client a tree older than one the client saw.
#[test]
fn a_wiped_observer_serves_only_once_caught_up_and_trusted() {
    let mut g = Group::new(Settings {
        observers: 1,
        ..Settings::default()
    });
    let leader = g.elect();
    g.create_session(leader, 0xd00, 4000);
    let paths = acknowledged_creates(&mut g, leader, 0xd00, "o", 10);
    g.run_for(TICK * 20);
    assert!(g.node(4).replica.is_serving());
    g.down(4);
    g.up(4, Restart::Wiped);
    assert!(!trusted(&g, 4));
    // Until it is trusted, whatever it holds, it serves nobody.
    for _ in 0..300 {
        g.tick();
        if trusted(&g, 4) {
            break;
        }
        assert!(
            !g.node(4).replica.is_serving(),
            "an untrusted observer serves"
        );
    }
    assert!(trusted(&g, 4), "caught up and trusted again");
    g.run_for(TICK * 20);
    assert!(g.node(4).replica.is_serving());
    assert_eq!(g.node(4).role(), Role::Observer);
    assert_eq!(missing(&g, 4, &paths), Vec::<String>::new());
    let cs = g.node(leader).storage.conf_state();
    assert!(
        cs.learners.contains(&4) && !cs.voters.contains(&4),
        "still an observer"
    );
}
