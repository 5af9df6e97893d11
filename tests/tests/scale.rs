//! Scale and pipelining, with raw protocol clients built on the `jute` codec:
//!
//! * 2,000 concurrent sessions on one server, each with an ephemeral node, all kept alive
//!   with pings while a checker lists the 2,000 nodes; then every session closes and the
//!   nodes must be gone.
//! * One connection pipelines a few thousand mixed requests (create, setData, getData,
//!   exists, getChildren, delete, sync, with watches) without waiting for replies. The
//!   replies must come back in request order (xids in order), with exactly the results a
//!   sequential execution gives (checked against an in-memory model), zxids never going
//!   back, and each watch notification arriving before the reply to the request that
//!   triggered it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use jute::{
    split_frame, write_frame, xid, Acl, ConnectRequest, ConnectResponse, CreateRequest,
    DeleteRequest, ErrorCode, EventType, ExistsRequest, GetChildrenRequest, GetDataRequest, OpCode,
    Reader, Record, ReplyHeader, Request, Response, SetDataRequest, SyncRequest, WatcherEvent,
    DEFAULT_MAX_BUFFER,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Semaphore};
use zooraft_tests::{ServerKind, TestServer};

/// Sessions in the scale test.
const SESSIONS: usize = 2_000;
/// Handshakes in flight at once (Apache ZooKeeper's accept backlog is Java's default, 50).
const CONNECT_CONCURRENCY: usize = 100;
/// The scale test's session timeout: the smallest Apache grants with its default tickTime
/// (2 ticks of 2 s), so pings are needed to keep 2,000 sessions alive while the test holds
/// them for longer than that.
const SESSION_TIMEOUT_MS: i32 = 4_000;
/// Requests in the pipelining test.
const PIPELINED: usize = 4_000;
/// Bound on one whole scenario.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(150);
/// Bound on one read or one phase.
const WAIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// A minimal raw client.
// ---------------------------------------------------------------------------------------

/// One decoded frame from the server.
#[derive(Debug)]
enum Incoming {
    Reply {
        header: ReplyHeader,
        body: Option<Response>,
    },
    /// A watch event and the zxid its header carries (ZooKeeper 3.8 sends -1 there).
    Notification(WatcherEvent, i64),
}

/// Reads one length-prefixed frame, with [`WAIT`] as the bound.
async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, buf: &mut BytesMut) -> Bytes {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(frame) = split_frame(buf, DEFAULT_MAX_BUFFER).expect("sane frame length") {
            return frame;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let n = tokio::time::timeout(left, r.read_buf(buf))
            .await
            .expect("server answered within the bound")
            .expect("read from server");
        assert!(n > 0, "server closed the connection mid-conversation");
    }
}

/// Decodes a reply (its body by the opcode of the request it answers) or a notification.
fn decode_incoming(frame: Bytes, op_of: impl FnOnce(i32) -> OpCode) -> Incoming {
    let mut r = Reader::new(frame);
    let header = ReplyHeader::decode(&mut r).expect("reply header");
    if header.xid == xid::NOTIFICATION {
        let event = WatcherEvent::decode(&mut r).expect("watcher event");
        return Incoming::Notification(event, header.zxid);
    }
    let op = op_of(header.xid);
    let body = if header.err == 0 {
        Some(Response::decode(op, &mut r).expect("response body"))
    } else {
        None
    };
    Incoming::Reply { header, body }
}

fn frame_of(xid: i32, req: &Request) -> BytesMut {
    let mut out = BytesMut::new();
    write_frame(&mut out, |b| req.encode(xid, b));
    out
}

/// Opens a session: handshake with the 3.x readOnly byte, like the Java client.
async fn handshake(addr: SocketAddr, timeout_ms: i32) -> (TcpStream, ConnectResponse, BytesMut) {
    let mut stream = tokio::time::timeout(WAIT, TcpStream::connect(addr))
        .await
        .expect("connect within the bound")
        .expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let req = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout: timeout_ms,
        session_id: 0,
        passwd: Bytes::from_static(&[0u8; 16]),
        read_only: Some(false),
    };
    let mut out = BytesMut::new();
    write_frame(&mut out, |b| req.encode(b));
    stream.write_all(&out).await.expect("send handshake");
    let mut buf = BytesMut::with_capacity(4096);
    let frame = read_frame(&mut stream, &mut buf).await;
    let resp = ConnectResponse::from_bytes(frame).expect("connect response");
    assert!(resp.timeout > 0, "session refused: {resp:?}");
    assert_ne!(resp.session_id, 0);
    (stream, resp, buf)
}

/// Sends one request and reads frames until its reply (notifications are returned too).
async fn call(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    xid: i32,
    req: &Request,
) -> (ReplyHeader, Option<Response>) {
    stream
        .write_all(&frame_of(xid, req))
        .await
        .expect("send request");
    let op = req.opcode();
    loop {
        let frame = read_frame(stream, buf).await;
        match decode_incoming(frame, |_| op) {
            Incoming::Reply { header, body } => {
                assert_eq!(header.xid, xid, "reply to the request just sent");
                return (header, body);
            }
            Incoming::Notification(..) => continue,
        }
    }
}

fn open_acl() -> Vec<Acl> {
    vec![Acl::open_unsafe()]
}

fn create(path: &str, data: &[u8], flags: i32) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data)),
        acl: open_acl(),
        flags,
    })
}

use zooraft_tests::rt::runtime;

/// Raises this process's soft open-file limit (the server, started afterwards, inherits it).
fn raise_fd_limit(needed: libc::rlim_t) {
    // SAFETY: getrlimit/setrlimit on a local struct; no memory is shared.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        assert_eq!(
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim),
            0,
            "getrlimit"
        );
        if lim.rlim_cur < needed {
            lim.rlim_cur = lim.rlim_max.min(needed.max(lim.rlim_cur));
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0, "setrlimit");
        }
        assert!(
            lim.rlim_cur >= needed,
            "open-file limit {} (hard {}) is below the {needed} this test needs",
            lim.rlim_cur,
            lim.rlim_max
        );
    }
}

// ---------------------------------------------------------------------------------------
// 2,000 sessions.
// ---------------------------------------------------------------------------------------

/// One session: handshake, create its ephemeral, then ping until told to close, then close.
async fn session_task(
    addr: SocketAddr,
    index: usize,
    connect_permits: Arc<Semaphore>,
    ready: Arc<AtomicUsize>,
    mut close: watch::Receiver<bool>,
) -> i64 {
    let permit = connect_permits.acquire().await.expect("semaphore open");
    let (mut stream, resp, mut buf) = handshake(addr, SESSION_TIMEOUT_MS).await;
    let (h, body) = call(
        &mut stream,
        &mut buf,
        1,
        &create(&format!("/scale/s-{index}"), b"", 1),
    )
    .await;
    assert_eq!(h.err, 0, "create of session {index}'s ephemeral");
    assert!(matches!(body, Some(Response::Create(ref p)) if p == &format!("/scale/s-{index}")));
    drop(permit);
    ready.fetch_add(1, Ordering::SeqCst);

    // Ping at a third of the negotiated timeout, as the Java client does when idle.
    let ping_every = Duration::from_millis((resp.timeout / 3).max(100) as u64);
    let mut next_xid = 2;
    loop {
        tokio::select! {
            _ = async { let _ = close.wait_for(|c| *c).await; } => break,
            _ = tokio::time::sleep(ping_every) => {
                let (h, _) = call(&mut stream, &mut buf, xid::PING, &Request::Ping).await;
                assert_eq!(h.err, 0, "ping of session {index}");
            }
        }
    }
    let (h, _) = call(&mut stream, &mut buf, next_xid, &Request::CloseSession).await;
    next_xid += 1;
    assert_eq!(h.err, 0, "closeSession of session {index}");
    let _ = next_xid;
    resp.session_id
}

async fn list_children(addr: SocketAddr, path: &str) -> Vec<String> {
    let (mut stream, _, mut buf) = handshake(addr, 30_000).await;
    let (h, body) = call(
        &mut stream,
        &mut buf,
        1,
        &Request::GetChildren2(GetChildrenRequest {
            path: path.into(),
            watch: false,
        }),
    )
    .await;
    assert_eq!(h.err, 0, "getChildren2 {path}");
    let Some(Response::GetChildren2(children, stat)) = body else {
        panic!("getChildren2 answered {body:?}");
    };
    assert_eq!(stat.num_children as usize, children.len());
    let _ = call(&mut stream, &mut buf, 2, &Request::CloseSession).await;
    children
}

fn many_sessions(kind: ServerKind) {
    // Client sockets here, server sockets in the server process, plus slack.
    raise_fd_limit((SESSIONS as libc::rlim_t) * 2 + 512);
    let server = TestServer::start(kind);
    let addr = server.addr();
    let rt = runtime();
    let started = Instant::now();
    let outcome =
        rt.block_on(async move {
            tokio::time::timeout(SCENARIO_TIMEOUT, async move {
            let (mut s, _, mut buf) = handshake(addr, 30_000).await;
            let (h, _) = call(&mut s, &mut buf, 1, &create("/scale", b"", 0)).await;
            assert_eq!(h.err, 0, "create /scale");

            let permits = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
            let ready = Arc::new(AtomicUsize::new(0));
            let (close_tx, close_rx) = watch::channel(false);
            let tasks: Vec<_> = (0..SESSIONS)
                .map(|i| {
                    tokio::spawn(session_task(
                        addr,
                        i,
                        permits.clone(),
                        ready.clone(),
                        close_rx.clone(),
                    ))
                })
                .collect();
            tokio::time::timeout(WAIT, async {
                while ready.load(Ordering::SeqCst) < SESSIONS {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "only {} of {SESSIONS} sessions were up within {WAIT:?}",
                    ready.load(Ordering::SeqCst)
                )
            });
            println!("{SESSIONS} sessions up after {:?}", started.elapsed());

            // Every session's ephemeral is there, from a checker's point of view, and still
            // is after the sessions have lived on pings alone for 1.5 session timeouts.
            let expected: BTreeSet<String> = (0..SESSIONS).map(|i| format!("s-{i}")).collect();
            let children = list_children(addr, "/scale").await;
            assert_eq!(children.len(), SESSIONS);
            assert_eq!(children.into_iter().collect::<BTreeSet<_>>(), expected);
            tokio::time::sleep(Duration::from_millis(SESSION_TIMEOUT_MS as u64 * 3 / 2)).await;
            let children = list_children(addr, "/scale").await;
            assert_eq!(
                children.into_iter().collect::<BTreeSet<_>>(),
                expected,
                "every session survived on pings"
            );
            println!("{SESSIONS} sessions alive after {:?}", started.elapsed());
            let (h, body) = call(
                &mut s,
                &mut buf,
                2,
                &Request::Exists(ExistsRequest {
                    path: "/scale".into(),
                    watch: false,
                }),
            )
            .await;
            assert_eq!(h.err, 0);
            assert!(
                matches!(body, Some(Response::Stat(ref st)) if st.num_children as usize == SESSIONS)
            );

            // Every session closes; then no ephemeral is left.
            close_tx.send_replace(true);
            let mut ids = HashSet::new();
            for t in tasks {
                let id = tokio::time::timeout(WAIT, t)
                    .await
                    .expect("session closed within the bound")
                    .expect("session task succeeded");
                ids.insert(id);
            }
            assert_eq!(ids.len(), SESSIONS, "every session id is distinct");
            let left = list_children(addr, "/scale").await;
            assert!(left.is_empty(), "{} ephemerals left after close", left.len());
            println!("all closed after {:?}", started.elapsed());
        })
        .await
        });
    rt.shutdown_timeout(Duration::from_secs(5));
    if outcome.is_err() {
        panic!(
            "scale scenario exceeded {SCENARIO_TIMEOUT:?}; server log:\n{}",
            server.log_tail()
        );
    }
}

zooraft_tests::against_both!(
    two_thousand_sessions_apache,
    two_thousand_sessions_zooraft,
    many_sessions
);

// ---------------------------------------------------------------------------------------
// Pipelining.
// ---------------------------------------------------------------------------------------

/// What a sequential server would answer, and the watch events it would send first.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expected {
    Ok,
    Err(ErrorCode),
    Create(String),
    /// A stat's data version and length.
    Stat {
        version: i32,
        data_length: i32,
    },
    Data {
        data: Vec<u8>,
        version: i32,
    },
    Children(Vec<String>),
    Sync(Option<String>),
}

/// The in-memory model of `/pipe`'s children and this session's watches.
#[derive(Default)]
struct Model {
    nodes: BTreeMap<String, (Vec<u8>, i32)>,
    data_watches: BTreeSet<String>,
    child_watch: bool,
}

const PARENT: &str = "/pipe";

impl Model {
    fn fire_data(&mut self, path: &str, ty: EventType, events: &mut Vec<(i32, String)>) {
        if self.data_watches.remove(path) {
            events.push((ty.code(), path.to_string()));
        }
    }

    fn fire_child(&mut self, events: &mut Vec<(i32, String)>) {
        if std::mem::take(&mut self.child_watch) {
            events.push((EventType::NodeChildrenChanged.code(), PARENT.to_string()));
        }
    }

    /// Applies `req` and returns the expected reply and the notifications it triggers.
    fn apply(&mut self, req: &Request) -> (Expected, Vec<(i32, String)>) {
        let mut events = Vec::new();
        let out = match req {
            Request::Create(c) => {
                if self.nodes.contains_key(&c.path) {
                    Expected::Err(ErrorCode::NodeExists)
                } else {
                    let data = c.data.as_deref().unwrap_or_default().to_vec();
                    self.nodes.insert(c.path.clone(), (data, 0));
                    self.fire_data(&c.path, EventType::NodeCreated, &mut events);
                    self.fire_child(&mut events);
                    Expected::Create(c.path.clone())
                }
            }
            Request::SetData(s) => match self.nodes.get_mut(&s.path) {
                None => Expected::Err(ErrorCode::NoNode),
                Some((_, v)) if s.version != -1 && s.version != *v => {
                    Expected::Err(ErrorCode::BadVersion)
                }
                Some((data, v)) => {
                    *data = s.data.as_deref().unwrap_or_default().to_vec();
                    *v += 1;
                    let out = Expected::Stat {
                        version: *v,
                        data_length: data.len() as i32,
                    };
                    self.fire_data(&s.path, EventType::NodeDataChanged, &mut events);
                    out
                }
            },
            Request::GetData(g) => match self.nodes.get(&g.path) {
                None => Expected::Err(ErrorCode::NoNode),
                Some((data, v)) => {
                    if g.watch {
                        self.data_watches.insert(g.path.clone());
                    }
                    Expected::Data {
                        data: data.clone(),
                        version: *v,
                    }
                }
            },
            Request::Exists(e) => {
                // exists leaves a watch whether or not the node is there.
                if e.watch {
                    self.data_watches.insert(e.path.clone());
                }
                match self.nodes.get(&e.path) {
                    None => Expected::Err(ErrorCode::NoNode),
                    Some((data, v)) => Expected::Stat {
                        version: *v,
                        data_length: data.len() as i32,
                    },
                }
            }
            Request::Delete(d) => match self.nodes.get(&d.path) {
                None => Expected::Err(ErrorCode::NoNode),
                Some((_, v)) if d.version != -1 && d.version != *v => {
                    Expected::Err(ErrorCode::BadVersion)
                }
                Some(_) => {
                    self.nodes.remove(&d.path);
                    self.fire_data(&d.path, EventType::NodeDeleted, &mut events);
                    self.fire_child(&mut events);
                    Expected::Ok
                }
            },
            Request::GetChildren(g) => {
                if g.watch {
                    self.child_watch = true;
                }
                Expected::Children(
                    self.nodes
                        .keys()
                        .map(|p| p[PARENT.len() + 1..].to_string())
                        .collect(),
                )
            }
            Request::Sync(s) => Expected::Sync(s.path.clone()),
            other => panic!("the model does not handle {other:?}"),
        };
        (out, events)
    }
}

/// A deterministic generator (xorshift), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A mix over a few paths, so creates collide, versions go stale and deletes miss.
fn generate(count: usize, model: &Model, rng: &mut Rng) -> Vec<Request> {
    // The generator peeks at versions through a scratch model so that some conditional
    // writes carry the right version and others a stale one.
    let mut scratch = Model {
        nodes: model.nodes.clone(),
        ..Model::default()
    };
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let path = format!("{PARENT}/n{}", rng.below(24));
        let current = scratch.nodes.get(&path).map(|(_, v)| *v);
        let version = |rng: &mut Rng| match (rng.below(3), current) {
            (0, _) => -1,
            (1, Some(v)) => v,
            (_, Some(v)) => v + 1,
            (_, None) => 0,
        };
        let req = match rng.below(20) {
            0..=4 => create(&path, format!("c{i}").as_bytes(), 0),
            5..=8 => Request::SetData(SetDataRequest {
                data: Some(Bytes::from(format!("s{i}-{}", "x".repeat(i % 7)))),
                version: version(rng),
                path,
            }),
            9..=11 => Request::GetData(GetDataRequest {
                path,
                watch: rng.below(4) == 0,
            }),
            12..=13 => Request::Exists(ExistsRequest {
                path,
                watch: rng.below(4) == 0,
            }),
            14..=16 => Request::Delete(DeleteRequest {
                version: version(rng),
                path,
            }),
            17..=18 => Request::GetChildren(GetChildrenRequest {
                path: PARENT.into(),
                watch: rng.below(3) == 0,
            }),
            _ => Request::Sync(SyncRequest {
                path: Some(PARENT.into()),
            }),
        };
        scratch.apply(&req);
        out.push(req);
    }
    out
}

fn check_reply(
    i: usize,
    req: &Request,
    expected: &Expected,
    header: &ReplyHeader,
    body: Option<Response>,
) {
    let ctx = || format!("request #{i} {req:?}");
    match expected {
        Expected::Err(code) => {
            assert_eq!(header.err, code.code(), "{}: error code", ctx());
            return;
        }
        _ => assert_eq!(header.err, 0, "{}: expected success", ctx()),
    }
    match (expected, body) {
        (Expected::Ok, Some(Response::Empty)) => {}
        (Expected::Create(p), Some(Response::Create(got))) => assert_eq!(&got, p, "{}", ctx()),
        (
            Expected::Stat {
                version,
                data_length,
            },
            Some(Response::Stat(st)),
        ) => {
            assert_eq!(
                (st.version, st.data_length),
                (*version, *data_length),
                "{}",
                ctx()
            );
            if matches!(req, Request::SetData(_)) {
                assert_eq!(
                    st.mzxid,
                    header.zxid,
                    "{}: a write's reply carries its zxid",
                    ctx()
                );
            }
        }
        (Expected::Data { data, version }, Some(Response::GetData(got, st))) => {
            assert_eq!(got.as_deref().unwrap_or_default(), &data[..], "{}", ctx());
            assert_eq!(st.version, *version, "{}", ctx());
        }
        (Expected::Children(want), Some(Response::GetChildren(mut got))) => {
            got.sort();
            assert_eq!(&got, want, "{}", ctx());
        }
        (Expected::Sync(p), Some(Response::Sync(got))) => assert_eq!(&got, p, "{}", ctx()),
        (e, b) => panic!("{}: expected {e:?}, got {b:?}", ctx()),
    }
}

fn pipelining(kind: ServerKind) {
    let server = TestServer::start(kind);
    let addr = server.addr();
    let rt = runtime();
    let outcome = rt.block_on(async move {
        tokio::time::timeout(SCENARIO_TIMEOUT, async move {
            let (mut stream, _, mut buf) = handshake(addr, 30_000).await;
            let (h, _) = call(&mut stream, &mut buf, 1, &create(PARENT, b"", 0)).await;
            assert_eq!(h.err, 0, "create {PARENT}");

            let mut model = Model::default();
            let requests = generate(PIPELINED, &model, &mut Rng(0x2545_f491_4f6c_dd1d));
            let first_xid = 2;
            let expected: Vec<_> = requests.iter().map(|r| model.apply(r)).collect();
            let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
            for (e, _) in &expected {
                let key = match e {
                    Expected::Err(code) => format!("{code:?}"),
                    _ => "ok".to_string(),
                };
                *outcomes.entry(key).or_default() += 1;
            }
            println!("expected outcomes: {outcomes:?}");
            for code in [
                ErrorCode::NodeExists,
                ErrorCode::NoNode,
                ErrorCode::BadVersion,
            ] {
                assert!(
                    outcomes.get(&format!("{code:?}")).copied().unwrap_or(0) > 50,
                    "the mix exercises {code:?}"
                );
            }
            let ops: Vec<OpCode> = requests.iter().map(|r| r.opcode()).collect();

            // The writer sends everything without waiting; the reader checks as replies come.
            let (mut rd, mut wr) = stream.into_split();
            let frames: Vec<BytesMut> = requests
                .iter()
                .enumerate()
                .map(|(i, r)| frame_of(first_xid + i as i32, r))
                .collect();
            let writer = tokio::spawn(async move {
                for f in frames {
                    wr.write_all(&f).await.expect("pipeline write");
                }
                wr
            });

            let mut last_zxid = i64::MIN;
            let mut pending_events: Vec<(i32, String)> = Vec::new();
            let mut notifications = 0usize;
            let mut notification_zxids = BTreeSet::new();
            for (i, req) in requests.iter().enumerate() {
                let want_xid = first_xid + i as i32;
                let (header, body) = loop {
                    let frame = read_frame(&mut rd, &mut buf).await;
                    match decode_incoming(frame, |x| {
                        ops.get((x - first_xid) as usize)
                            .copied()
                            .unwrap_or(OpCode::Error)
                    }) {
                        Incoming::Notification(ev, zxid) => {
                            assert_eq!(ev.state, 3, "SyncConnected");
                            pending_events.push((ev.event_type, ev.path));
                            notification_zxids.insert(zxid);
                            notifications += 1;
                        }
                        Incoming::Reply { header, body } => break (header, body),
                    }
                };
                assert_eq!(header.xid, want_xid, "replies come back in request order");
                assert!(
                    header.zxid >= last_zxid,
                    "zxid went back at request #{i}: {} after {last_zxid}",
                    header.zxid
                );
                last_zxid = header.zxid;
                let (exp, mut exp_events) = expected[i].clone();
                // Events caused by this request arrive before its reply (their relative order
                // is the server's business).
                pending_events.sort();
                exp_events.sort();
                assert_eq!(
                    pending_events, exp_events,
                    "notifications before the reply to request #{i} {req:?}"
                );
                pending_events.clear();
                check_reply(i, req, &exp, &header, body);
            }
            let mut wr = tokio::time::timeout(WAIT, writer)
                .await
                .expect("writer finished")
                .expect("writer task");
            println!(
                "{PIPELINED} pipelined requests answered in order, {notifications} notifications \
                 (header zxids {:?}..={:?})",
                notification_zxids.first(),
                notification_zxids.last()
            );
            let mut out = BytesMut::new();
            write_frame(&mut out, |b| {
                Request::CloseSession.encode(first_xid + PIPELINED as i32, b)
            });
            wr.write_all(&out).await.expect("closeSession");
        })
        .await
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    if outcome.is_err() {
        panic!(
            "pipelining scenario exceeded {SCENARIO_TIMEOUT:?}; server log:\n{}",
            server.log_tail()
        );
    }
}

zooraft_tests::against_both!(
    pipelined_mixed_requests_apache,
    pipelined_mixed_requests_zooraft,
    pipelining
);
