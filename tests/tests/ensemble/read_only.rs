//! Read-only mode (`readonlymode.enabled=true`), against Apache ZooKeeper 3.8 and zooraft
//! ensembles: a member cut off from the quorum (its two peers killed) keeps answering the
//! reads of clients that asked for read-only (`canBeReadOnly` in the handshake), refuses
//! writes and `sync` with NOTREADONLY, says `isro` -> `ro` and `Mode: read-only`, refuses
//! clients that did not ask, and once the quorum is back closes its read-only connections
//! so the clients reconnect read-write.
//!
//! Sessions as ZooKeeper 3.8 makes them there: a new client gets a local session only with
//! `localSessionsEnabled=true` (otherwise a bare NOTREADONLY reply header), and a client
//! resuming a global session is closed without an answer, to look for a read-write member.

use std::time::Duration;

use bytes::Bytes;
use jute::{
    Acl, CreateRequest, ExistsRequest, GetDataRequest, Request, Response, SetDataRequest,
    SyncRequest,
};
use zooraft_tests::raw_client::{Body, ConnectOptions, RawClient, Reply};
use zooraft_tests::rt::{block_on, eventually};
use zooraft_tests::{ServerKind, TestEnsemble};

const WAIT: Duration = Duration::from_secs(60);
const CALL: Duration = Duration::from_secs(10);
/// ZooKeeper's NOTREADONLY.
const NOT_READ_ONLY: i32 = -119;

fn create(path: &str) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(Bytes::from_static(b"v")),
        acl: vec![Acl::open_unsafe()],
        flags: 0,
    })
}

fn get(path: &str) -> Request {
    Request::GetData(GetDataRequest {
        path: path.into(),
        watch: false,
    })
}

fn data_of(reply: &Reply) -> Option<Bytes> {
    match &reply.body {
        Body::Decoded(Response::GetData(data, _)) => data.clone(),
        other => panic!("not a getData reply: {other:?}"),
    }
}

fn read_only_opts() -> ConnectOptions {
    ConnectOptions {
        read_only: Some(true),
        ..ConnectOptions::default()
    }
}

fn read_only_member(kind: ServerKind) {
    let mut ensemble = TestEnsemble::start_kind(
        kind,
        3,
        0,
        &[
            ("readonlymode.enabled", "true"),
            ("localSessionsEnabled", "true"),
        ],
    );
    let leader = ensemble.leader();
    let kept = (leader + 1) % 3;
    let addr = ensemble.member(kept).addr();
    // While the quorum is there, a client that may be read-only is served read-write.
    let (session, passwd, seen) = block_on(async {
        let (mut c, hs) = RawClient::connect(addr, &read_only_opts(), CALL)
            .await
            .expect("a session on the member");
        assert_eq!(
            hs.response.read_only,
            Some(false),
            "read-write while in the quorum"
        );
        let reply = c.call(&create("/ro"), CALL).await.expect("create /ro");
        assert_eq!(reply.err, 0, "create /ro");
        (hs.response.session_id, hs.response.passwd, reply.zxid)
    });

    // The member's two peers die: it is cut off from the quorum.
    for i in (0..3).filter(|i| *i != kept) {
        ensemble.member_mut(i).kill();
    }
    let member = ensemble.member(kept);
    eventually("the member to turn read-only", WAIT, || {
        (member.four_letter_word("isro").ok()? == "ro").then_some(())
    });
    let srvr = member.four_letter_word("srvr").expect("srvr");
    assert!(srvr.contains("\nMode: read-only\n"), "{srvr}");
    let mntr = member.four_letter_word("mntr").expect("mntr");
    assert!(mntr.contains("zk_server_state\tread-only\n"), "{mntr}");

    let mut kept_open = block_on(async {
        // A client that did not ask for read-only is not served.
        let refused =
            RawClient::connect(addr, &ConnectOptions::default(), Duration::from_secs(5)).await;
        assert!(
            refused.is_err(),
            "a read-write client is refused: {refused:?}"
        );

        // A global session is not resumed on a read-only member: it is told expired.
        let opts = ConnectOptions {
            read_only: Some(true),
            ..ConnectOptions::resume(session, passwd.clone(), seen)
        };
        let (_, hs) = RawClient::connect(addr, &opts, Duration::from_secs(5))
            .await
            .expect("an answer to a resume");
        let r = &hs.response;
        assert_eq!((r.timeout, r.session_id), (0, 0), "expired: {r:?}");
        assert_eq!(r.read_only, Some(true));

        // A new read-only client gets a local session.
        let (mut c, hs) = RawClient::connect(addr, &read_only_opts(), CALL)
            .await
            .expect("a read-only session");
        assert_eq!(
            hs.response.read_only,
            Some(true),
            "the handshake says read-only"
        );
        assert!(hs.response.timeout > 0 && hs.response.session_id != 0);
        let reply = c.call(&get("/ro"), CALL).await.expect("getData");
        assert_eq!(reply.err, 0);
        assert_eq!(data_of(&reply).as_deref(), Some(&b"v"[..]));
        let exists = Request::Exists(ExistsRequest {
            path: "/ro".into(),
            watch: true,
        });
        assert_eq!(c.call(&exists, CALL).await.expect("exists").err, 0);
        for write in [
            create("/refused"),
            Request::SetData(SetDataRequest {
                path: "/ro".into(),
                data: Some(Bytes::from_static(b"w")),
                version: -1,
            }),
            Request::Sync(SyncRequest {
                path: Some("/ro".into()),
            }),
        ] {
            let reply = c
                .call(&write, CALL)
                .await
                .expect("a refused request is answered");
            assert_eq!(reply.err, NOT_READ_ONLY, "{write:?}");
        }
        // Still served after the refusals.
        assert_eq!(c.call(&get("/ro"), CALL).await.expect("getData").err, 0);
        c
    });

    // The quorum comes back: read-only connections close, clients reconnect read-write.
    for i in (0..3).filter(|i| *i != kept) {
        ensemble.member_mut(i).restart();
    }
    let member = ensemble.member(kept);
    eventually("the member to serve read-write again", WAIT, || {
        (member.four_letter_word("isro").ok()? == "rw").then_some(())
    });
    block_on(async {
        let closed = tokio::time::timeout(WAIT, async {
            loop {
                if kept_open.call(&get("/ro"), CALL).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
        .await;
        assert!(
            closed.is_ok(),
            "the read-only connection is closed once the quorum is back"
        );
        let (mut c, hs) = RawClient::connect(addr, &read_only_opts(), CALL)
            .await
            .expect("a session after the quorum is back");
        assert_eq!(hs.response.read_only, Some(false), "read-write again");
        let reply = c.call(&create("/after"), CALL).await.expect("create");
        assert_eq!(reply.err, 0, "writes are served again");
    });
}

/// The frame a read-only member answers a new client's handshake with, when it may not
/// make local sessions.
async fn handshake_frame(addr: std::net::SocketAddr) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut body = Vec::new();
    body.extend_from_slice(&0i32.to_be_bytes()); // protocol version
    body.extend_from_slice(&0i64.to_be_bytes()); // last zxid seen
    body.extend_from_slice(&30_000i32.to_be_bytes()); // timeout
    body.extend_from_slice(&0i64.to_be_bytes()); // session id
    body.extend_from_slice(&16i32.to_be_bytes());
    body.extend_from_slice(&[0u8; 16]); // password
    body.push(1); // canBeReadOnly
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    s.write_all(&frame).await.expect("send the handshake");
    let mut answer = vec![0u8; 20];
    let read = tokio::time::timeout(CALL, s.read_exact(&mut answer)).await;
    assert!(
        matches!(read, Ok(Ok(_))),
        "20 bytes of answer: {read:?} {answer:?}"
    );
    answer
}

/// Without `localSessionsEnabled` a read-only member makes no session: a new client's
/// handshake gets a reply header with NOTREADONLY (and the last zxid) where a ConnectResponse
/// belongs, exactly the 20 bytes ZooKeeper sends (zooraft then closes the connection,
/// which ZooKeeper leaves to the client); a global session's resume is closed unanswered,
/// an unknown session is told expired.
fn read_only_without_local_sessions(kind: ServerKind) {
    let mut ensemble = TestEnsemble::start_kind(kind, 3, 0, &[("readonlymode.enabled", "true")]);
    let kept = (ensemble.leader() + 1) % 3;
    let (_, global) = block_on(RawClient::connect(
        ensemble.member(kept).addr(),
        &read_only_opts(),
        CALL,
    ))
    .expect("a session before the cut");
    for i in (0..3).filter(|i| *i != kept) {
        ensemble.member_mut(i).kill();
    }
    let member = ensemble.member(kept);
    eventually("the member to turn read-only", WAIT, || {
        (member.four_letter_word("isro").ok()? == "ro").then_some(())
    });
    let zxid_text = member
        .four_letter_word("srvr")
        .expect("srvr")
        .lines()
        .find_map(|l| l.strip_prefix("Zxid: 0x").map(str::to_string))
        .expect("srvr's Zxid");
    let zxid = i64::from_str_radix(&zxid_text, 16).expect("hex zxid");
    let answer = block_on(handshake_frame(member.addr()));
    let resume = |id: i64, passwd: Bytes| ConnectOptions {
        read_only: Some(true),
        ..ConnectOptions::resume(id, passwd, 0)
    };
    let g = &global.response;
    let resumed = block_on(RawClient::connect(
        member.addr(),
        &resume(g.session_id, g.passwd.clone()),
        CALL,
    ));
    assert!(
        resumed.is_err(),
        "a global session is closed unanswered: {resumed:?}"
    );
    let unknown = resume(0x1234, Bytes::from_static(&[0u8; 16]));
    let (_, hs) = block_on(RawClient::connect(member.addr(), &unknown, CALL))
        .expect("an answer to an unknown session");
    let r = &hs.response;
    assert_eq!(
        (r.timeout, r.session_id, r.read_only),
        (0, 0, Some(true)),
        "expired"
    );
    let mut expected = 16i32.to_be_bytes().to_vec();
    expected.extend_from_slice(&0i32.to_be_bytes());
    expected.extend_from_slice(&zxid.to_be_bytes());
    expected.extend_from_slice(&NOT_READ_ONLY.to_be_bytes());
    assert_eq!(answer, expected, "the answer to a new client");
}

zooraft_tests::against_both!(
    read_only_without_local_sessions_apache,
    read_only_without_local_sessions_zooraft,
    read_only_without_local_sessions
);

zooraft_tests::against_both!(
    read_only_member_apache,
    read_only_member_zooraft,
    read_only_member
);

/// A client program run while the member is read-only: its output lines as they come, and
/// its stdin, to tell it the quorum is back.
struct ClientProgram {
    name: &'static str,
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl ClientProgram {
    fn start(name: &'static str, mut command: std::process::Command) -> ClientProgram {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start the {name} client: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        ClientProgram {
            name,
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for `line`; false if the program ended or the wait ran out first.
    fn wait_line(&mut self, line: &str, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let done = l == line;
                    self.seen.push(l);
                    if done {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    fn tell(&mut self) {
        use std::io::Write;
        if let Some(stdin) = self.child.stdin.as_mut() {
            let _ = stdin.write_all(b"quorum is back\n");
            let _ = stdin.flush();
        }
    }

    /// The pass and fail counts of its summary line, once it has ended.
    fn summary(&mut self, limit: Duration) -> (usize, usize) {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let out = self.seen.join("\n");
        zooraft_tests::checks::parse_summary(&out)
            .unwrap_or_else(|| panic!("the {} client printed no summary:\n{out}", self.name))
    }
}

impl Drop for ClientProgram {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// kazoo (`read_only=True`) and the Java client (`canBeReadOnly`) connect to the read-only
/// member, read, have a write refused, and once the quorum is back find a read-write
/// member by themselves and write.
fn clients_follow_read_only_mode(kind: ServerKind) {
    const CHECKS: usize = 5;
    let mut ensemble = TestEnsemble::start_kind(
        kind,
        3,
        0,
        &[
            ("readonlymode.enabled", "true"),
            ("localSessionsEnabled", "true"),
        ],
    );
    let kept = (ensemble.leader() + 1) % 3;
    block_on(async {
        let (mut c, _) = RawClient::connect(ensemble.member(kept).addr(), &read_only_opts(), CALL)
            .await
            .expect("a session");
        assert_eq!(c.call(&create("/ro"), CALL).await.expect("create").err, 0);
    });
    let hosts = ensemble.connect_string();
    for i in (0..3).filter(|i| *i != kept) {
        ensemble.member_mut(i).kill();
    }
    let member = ensemble.member(kept);
    eventually("the member to turn read-only", WAIT, || {
        (member.four_letter_word("isro").ok()? == "ro").then_some(())
    });
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/kazoo_read_only.py");
    let mut python = std::process::Command::new("python3");
    python.arg(script).arg(&hosts);
    let mut java = zooraft_tests::java::java_command("ReadOnlyClient");
    java.arg(&hosts);
    let mut clients = [
        ClientProgram::start("kazoo", python),
        ClientProgram::start("Java", java),
    ];
    for c in &mut clients {
        assert!(
            c.wait_line("READ-ONLY DONE", Duration::from_secs(120)),
            "the {} client in read-only mode:\n{}",
            c.name,
            c.seen.join("\n")
        );
    }
    for i in (0..3).filter(|i| *i != kept) {
        ensemble.member_mut(i).restart();
    }
    for c in &mut clients {
        c.tell();
    }
    for c in &mut clients {
        let (passed, failed) = c.summary(Duration::from_secs(180));
        assert_eq!(
            (passed, failed),
            (CHECKS, 0),
            "the {} client:\n{}",
            c.name,
            c.seen.join("\n")
        );
    }
}

zooraft_tests::against_both!(
    clients_follow_read_only_mode_apache,
    clients_follow_read_only_mode_zooraft,
    clients_follow_read_only_mode
);
