//! One connection to a ZooKeeper leader's quorum port: finding the leader, registering as
//! an observer (`OBSERVERINFO` → `LEADERINFO` → `ACKEPOCH`), and the reader thread that
//! turns what the leader sends into events for the observer loop. A SNAP's snapshot is read
//! and converted on that thread, so the loop never blocks on the leader's stream.
//!
//! The leader is found by asking each voter's client port `srvr` (ZooKeeper's observers
//! learn it from leader-election notifications; `srvr` names it as well, and a
//! follower has nothing listening on its quorum port anyway).

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use jute::quorum::{packet, LearnerInfo, QuorumPacket, LEARNER_PROTOCOL, SNAP_SIGNATURE};
use jute::Record;

use super::client::four_letter_word;
use super::wire::{read_packet, write_packet};
use super::{quorum_auth, tls_link};
use crate::config::Config;
use crate::raft::QuorumTls;
use crate::state::tree::TreeOptions;
use crate::state::StateMachine;

/// What the reader thread reports, tagged with its link's number (a later link's events
/// supersede an earlier one's).
pub enum FromLeader {
    Packet(QuorumPacket),
    /// A SNAP: the leader's tree at `zxid`, converted.
    Snapshot {
        zxid: i64,
        state: Box<StateMachine>,
    },
    /// The connection ended (the reason, for the log).
    Closed(String),
}

/// The registered connection: where to write, and what the leader said.
pub struct Link {
    pub leader: u64,
    pub epoch: u32,
    pub out: Out,
    stream: TcpStream,
}

/// What the observer loop writes to the leader through (flushed once per batch).
pub type Out = Box<dyn Write + Send>;
/// What the reader thread reads the leader's packets from.
type In = Box<dyn Read + Send>;

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// The voters' client addresses from the `server.N` lines, to ask `srvr`.
fn voters(config: &Config) -> Vec<(u64, SocketAddr, SocketAddr)> {
    let mut out = Vec::new();
    for m in config.members.values() {
        if m.observer || m.id == config.my_id {
            continue;
        }
        let Some(client) = m.client_port else {
            continue;
        };
        let resolve = |port| (m.host.as_str(), port).to_socket_addrs().ok()?.next();
        if let (Some(c), Some(q)) = (resolve(client), resolve(m.peer_port)) {
            out.push((m.id, c, q));
        }
    }
    out
}

/// Asks `srvr` of `addr`: its mode line.
fn mode_of(addr: SocketAddr, timeout: Duration) -> Option<String> {
    let text = four_letter_word(addr, "srvr", timeout).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Mode: ").map(str::to_string))
}

/// The voter that says it leads: (id, quorum address).
pub fn find_leader(config: &Config, timeout: Duration) -> Result<(u64, SocketAddr), String> {
    let voters = voters(config);
    if voters.is_empty() {
        return Err("no voter has a client port in its server line (server.N=host:quorum:election;clientPort), so the leader cannot be asked for".into());
    }
    for (id, client, quorum) in &voters {
        if mode_of(*client, timeout).as_deref() == Some("leader") {
            return Ok((*id, *quorum));
        }
    }
    Err(format!(
        "none of the voters {:?} says it leads",
        voters.iter().map(|v| v.0).collect::<Vec<_>>()
    ))
}

/// What this member knows of its own history when it registers.
pub struct Registration {
    pub me: u64,
    pub accepted_epoch: u32,
    pub current_epoch: u32,
    pub last_zxid: i64,
}

/// Connects to the leader and registers as an observer. Returns the link and the reader
/// thread's stream, ready to be handed to [`spawn_reader`].
pub fn connect(
    leader: u64,
    addr: SocketAddr,
    reg: &Registration,
    config: &Config,
) -> Result<(Link, BufReader<In>), String> {
    let init = Duration::from_millis(config.tick_time_ms as u64 * config.init_limit as u64);
    let stream = TcpStream::connect_timeout(&addr, init)
        .map_err(|e| format!("cannot connect to leader {leader} at {addr}: {e}"))?;
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(init))
        .map_err(|e| e.to_string())?;
    let io_err = |what: &str, e: std::io::Error| format!("{what} with leader {leader}: {e}");
    let tls = QuorumTls::from_config(config)
        .map_err(|e| format!("quorum TLS (sslQuorum): {e}"))?
        .and_then(|t| t.dial_config());
    let clone = || stream.try_clone().map_err(|e| io_err("socket", e));
    let (mut out, mut reader): (Out, BufReader<In>) = match tls {
        None => (
            Box::new(BufWriter::with_capacity(64 * 1024, clone()?)),
            BufReader::with_capacity(64 * 1024, Box::new(clone()?)),
        ),
        Some(tls) => {
            let s = tls_link::handshake(tls, clone()?, addr)
                .map_err(|e| format!("quorum TLS with leader {leader} at {addr}: {e}"))?;
            let (queued, pump) = tls_link::split(s, init).map_err(|e| io_err("socket", e))?;
            (
                Box::new(queued),
                BufReader::with_capacity(64 * 1024, Box::new(pump)),
            )
        }
    };
    if let Some(c) = quorum_auth::credentials(config)? {
        let host = config
            .members
            .get(&leader)
            .map_or_else(|| addr.ip().to_string(), |m| m.host.clone());
        quorum_auth::authenticate(&mut reader, &mut out, &c, &host)
            .map_err(|e| format!("with leader {leader} at {addr}: {e}"))?;
    }
    let info = LearnerInfo {
        server_id: reg.me as i64,
        protocol_version: LEARNER_PROTOCOL,
        config_version: 0,
    };
    let hello = QuorumPacket::new(
        packet::OBSERVER_INFO,
        (reg.accepted_epoch as i64) << 32,
        Some(info.to_bytes()),
    );
    write_packet(&mut out, &hello).map_err(|e| io_err("OBSERVERINFO", e))?;
    out.flush().map_err(|e| io_err("OBSERVERINFO", e))?;
    let max = config.max_buffer;
    let first = read_packet(&mut reader, max).map_err(|e| io_err("waiting for LEADERINFO", e))?;
    if first.kind != packet::LEADER_INFO {
        return Err(format!(
            "leader {leader} answered OBSERVERINFO with {} (a ZooKeeper older than 3.4 is not supported)",
            packet::name(first.kind)
        ));
    }
    let epoch = (first.zxid >> 32) as u32;
    let ack = if epoch > reg.accepted_epoch {
        reg.current_epoch as i32
    } else if epoch == reg.accepted_epoch {
        -1
    } else {
        return Err(format!(
            "leader {leader} is in epoch {epoch}, below the {} this member accepted",
            reg.accepted_epoch
        ));
    };
    let mut data = BytesMut::with_capacity(4);
    data.put_i32(ack);
    let ack = QuorumPacket::new(packet::ACK_EPOCH, reg.last_zxid, Some(data.freeze()));
    write_packet(&mut out, &ack).map_err(|e| io_err("ACKEPOCH", e))?;
    out.flush().map_err(|e| io_err("ACKEPOCH", e))?;
    Ok((
        Link {
            leader,
            epoch,
            out,
            stream,
        },
        reader,
    ))
}

/// Reads packets until the connection ends, sending each (a SNAP as its converted tree)
/// through `send`. `sync_timeout` bounds the silence after registration, as ZooKeeper's
/// learners bound it (`syncLimit` ticks).
fn spawn_reader(
    mut r: BufReader<In>,
    config: &Config,
    send: impl Fn(FromLeader) -> bool + Send + 'static,
) -> std::io::Result<()> {
    let max = config.max_buffer;
    let options = TreeOptions {
        extended_types: config.extended_types,
    };
    let snap_budget = config.max_buffer.max(jute::DEFAULT_MAX_BUFFER);
    std::thread::Builder::new()
        .name("zab-reader".into())
        .spawn(move || loop {
            let event = match read_packet(&mut r, max) {
                Ok(p) if p.kind == packet::SNAP => {
                    match read_snapshot(&mut r, snap_budget, options) {
                        Ok(state) => FromLeader::Snapshot {
                            zxid: p.zxid,
                            state: Box::new(state),
                        },
                        Err(e) => FromLeader::Closed(e),
                    }
                }
                Ok(p) => FromLeader::Packet(p),
                Err(e) => FromLeader::Closed(format!("reading from the leader: {e}")),
            };
            let last = matches!(event, FromLeader::Closed(_));
            if !send(event) || last {
                return;
            }
        })
        .map(drop)
}

/// A SNAP's snapshot and signature, as zooraft's state.
fn read_snapshot(
    r: &mut impl Read,
    max: usize,
    options: TreeOptions,
) -> Result<StateMachine, String> {
    let started = std::time::Instant::now();
    let mut tree = zkdata::snapshot::read_wire(r, max, &mut |_, _| {})
        .map_err(|e| format!("the leader's snapshot: {e}"))?;
    let mut sig = [0u8; 4 + SNAP_SIGNATURE.len()];
    r.read_exact(&mut sig)
        .map_err(|e| format!("the leader's snapshot signature: {e}"))?;
    if &sig[4..] != SNAP_SIGNATURE.as_bytes()
        || sig[..4] != (SNAP_SIGNATURE.len() as i32).to_be_bytes()
    {
        return Err("the leader's snapshot does not end with its signature".into());
    }
    // As ZooKeeper's `DataTree.deserialize` ends: the quota nodes' figures.
    tree.recompute_quota_stats();
    let nodes = tree.nodes.len();
    let state = crate::migrate::to_state(tree, options)
        .map_err(|e| format!("the leader's snapshot: {e}"))?;
    tracing::info!(
        nodes,
        ms = started.elapsed().as_millis() as u64,
        "snapshot received from the ZooKeeper leader"
    );
    Ok(state)
}

/// A packet's data, for the loop's decoders.
pub fn data_of(p: &QuorumPacket) -> Bytes {
    p.data.clone().unwrap_or_default()
}

/// [`connect`], then the reader thread, which hands what it reads to `send`.
pub fn open(
    leader: u64,
    addr: SocketAddr,
    reg: &Registration,
    config: &Config,
    send: impl Fn(FromLeader) -> bool + Send + 'static,
) -> Result<Link, String> {
    let (link, reader) = connect(leader, addr, reg, config)?;
    spawn_reader(reader, config, send).map_err(|e| e.to_string())?;
    tracing::info!(
        leader,
        %addr,
        epoch = link.epoch,
        last_zxid = format!("{:#x}", reg.last_zxid),
        "registered with the ZooKeeper leader as an observer"
    );
    Ok(link)
}
