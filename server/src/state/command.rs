//! The replicated command format: what one Raft entry carries.
//!
//! An entry is a [`Batch`]: the leader's wall-clock time (every znode time in the batch
//! comes from it, never from a replica's clock) and the commands gathered in one ready
//! cycle. Client writes travel as the raw jute body the client sent, plus who sent it
//! (session, xid, the member and connection to answer) and the session's auth ids, so that
//! every member applies exactly the same bytes and checks ACLs identically.
//!
//! Layout (big-endian, jute primitives):
//! `u8 version=1 | i64 time | i32 count | command*`; each command starts with a tag byte.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use jute::{DecodeError, Id, Reader, Record, WriteExt};

const FORMAT_VERSION: u8 = 1;

const TAG_REQUEST: u8 = 1;
const TAG_CREATE_SESSION: u8 = 2;
const TAG_CLOSE_SESSION: u8 = 3;
const TAG_DELETE_NODE: u8 = 4;
const TAG_RECONFIG: u8 = 5;
const TAG_SET_CONFIG: u8 = 6;
const TAG_RESTORE: u8 = 7;

/// A connection on a member: replies are addressed to it.
pub type ConnId = u64;

/// A session's auth ids (`ip:<address>`, then what `addauth`, SASL or a certificate added).
pub type AuthIds = Arc<[Id]>;

/// Where the answer to a command goes: a member, and a connection on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub member: u64,
    pub conn: ConnId,
}

/// A client's write request (create, delete, setData, setACL, check, multi, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientWrite {
    pub session: i64,
    pub xid: i32,
    pub op: i32,
    pub origin: Origin,
    /// ClientPort, not copied: every write of a session carries the same ids, and a batch's
    /// decoder hands the same allocation to every command that encodes them identically.
    pub auth: AuthIds,
    /// The request body exactly as the client sent it (after the request header).
    pub body: Bytes,
}

/// Why a session is being closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client sent closeSession (op -11) with this xid.
    Client { origin: Origin, xid: i32 },
    /// The leader saw no sign of life for the session's timeout.
    Expired,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Write(ClientWrite),
    CreateSession {
        session: i64,
        timeout: i32,
        passwd: [u8; 16],
        origin: Origin,
    },
    CloseSession {
        session: i64,
        reason: CloseReason,
    },
    /// The leader's removal of an empty container or an expired TTL node.
    DeleteNode {
        path: String,
    },
    /// A client's reconfig (op 16), with what only the leader knew when it proposed it.
    Reconfig {
        write: ClientWrite,
        stamp: ReconfigStamp,
    },
    /// The leader's first statement of the membership (`/zookeeper/config`).
    SetConfig {
        text: String,
    },
    /// An operator's restore (the AdminServer's `restore`): the tree and sessions become
    /// the ones of `state`, a snapshot encoding (`state::restore`). `nonce` tells the
    /// member that proposed it which applied entry answers its request.
    Restore {
        nonce: u64,
        state: Bytes,
    },
}

/// What the leader knew when it proposed a reconfig, so that every member decides it alike
/// (`state::reconfig`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReconfigStamp {
    /// `reconfigEnabled` on the leader.
    pub enabled: bool,
    /// `reconfigEnabled` on a standalone server, which has no quorum to reconfigure:
    /// ZooKeeper answers UNIMPLEMENTED there (RECONFIGDISABLED without `reconfigEnabled`).
    pub standalone: bool,
    /// `skipACL` on the leader.
    pub skip_acl: bool,
    /// The previous reconfig is not carried out yet.
    pub in_progress: bool,
    /// Members connected to the leader and caught up (the leader included).
    pub synced: Vec<u64>,
}

/// One Raft entry's worth of commands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Batch {
    pub time: i64,
    pub commands: Vec<Command>,
}

fn put_origin(out: &mut BytesMut, o: &Origin) {
    out.put_u64(o.member);
    out.put_u64(o.conn);
}

fn get_origin(r: &mut Reader) -> Result<Origin, DecodeError> {
    Ok(Origin {
        member: r.read_i64()? as u64,
        conn: r.read_i64()? as u64,
    })
}

fn put_write(out: &mut BytesMut, w: &ClientWrite) {
    out.put_i64(w.session);
    out.put_i32(w.xid);
    out.put_i32(w.op);
    put_origin(out, &w.origin);
    out.put_i32(w.auth.len() as i32);
    for id in w.auth.iter() {
        id.encode(out);
    }
    out.put_buffer(Some(&w.body));
}

fn get_write(r: &mut Reader, cache: &mut AuthCache) -> Result<ClientWrite, DecodeError> {
    Ok(ClientWrite {
        session: r.read_i64()?,
        xid: r.read_i32()?,
        op: r.read_i32()?,
        origin: get_origin(r)?,
        auth: cache.read(r)?,
        body: r.read_buffer()?.unwrap_or_default(),
    })
}

/// The auth ids last decoded in a batch, with their encoding. The commands of one batch
/// come from a handful of sessions that all send the same ids (typically only `ip:...`),
/// so decoding each command's ids anew would allocate two strings per write on the Raft
/// thread for nothing. The encoding is self-delimiting (a count, then length-prefixed
/// strings), so input that starts with the cached bytes holds exactly those ids.
#[derive(Default)]
pub struct AuthCache {
    last: Option<(Bytes, AuthIds)>,
}

impl AuthCache {
    fn read(&mut self, r: &mut Reader) -> Result<AuthIds, DecodeError> {
        if let Some((raw, ids)) = &self.last {
            if r.peek_rest().starts_with(raw) {
                r.skip(raw.len())?;
                return Ok(ids.clone());
            }
        }
        let rest = r.peek_bytes();
        let before = r.remaining();
        let ids: AuthIds = r.read_vec(8, Id::decode)?.into();
        let raw = rest.slice(..before - r.remaining());
        self.last = Some((raw, ids.clone()));
        Ok(ids)
    }
}

fn get_stamp(r: &mut Reader) -> Result<ReconfigStamp, DecodeError> {
    let flags = r.read_u8()?;
    let n = r.read_i32()?;
    if !(0..=1024).contains(&n) {
        return Err(DecodeError::BadMulti("too many synced members"));
    }
    let mut synced = Vec::with_capacity(n as usize);
    for _ in 0..n {
        synced.push(r.read_i64()? as u64);
    }
    Ok(ReconfigStamp {
        enabled: flags & 1 != 0,
        skip_acl: flags & 2 != 0,
        in_progress: flags & 4 != 0,
        standalone: flags & 8 != 0,
        synced,
    })
}

impl Command {
    /// Appends this command's encoding.
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            Command::Write(w) => {
                out.put_u8(TAG_REQUEST);
                put_write(out, w);
            }
            Command::Reconfig { write, stamp } => {
                out.put_u8(TAG_RECONFIG);
                put_write(out, write);
                out.put_u8(
                    u8::from(stamp.enabled)
                        | (u8::from(stamp.skip_acl) << 1)
                        | (u8::from(stamp.in_progress) << 2)
                        | (u8::from(stamp.standalone) << 3),
                );
                out.put_i32(stamp.synced.len() as i32);
                for id in &stamp.synced {
                    out.put_u64(*id);
                }
            }
            Command::SetConfig { text } => {
                out.put_u8(TAG_SET_CONFIG);
                out.put_ustring(text);
            }
            Command::CreateSession {
                session,
                timeout,
                passwd,
                origin,
            } => {
                out.put_u8(TAG_CREATE_SESSION);
                out.put_i64(*session);
                out.put_i32(*timeout);
                out.put_slice(passwd);
                put_origin(out, origin);
            }
            Command::CloseSession { session, reason } => {
                out.put_u8(TAG_CLOSE_SESSION);
                out.put_i64(*session);
                match reason {
                    CloseReason::Expired => out.put_u8(0),
                    CloseReason::Client { origin, xid } => {
                        out.put_u8(1);
                        put_origin(out, origin);
                        out.put_i32(*xid);
                    }
                }
            }
            Command::DeleteNode { path } => {
                out.put_u8(TAG_DELETE_NODE);
                out.put_ustring(path);
            }
            Command::Restore { nonce, state } => {
                out.put_u8(TAG_RESTORE);
                out.put_u64(*nonce);
                out.put_buffer(Some(state));
            }
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Command, DecodeError> {
        Command::decode_with(r, &mut AuthCache::default())
    }

    /// Decodes one command, sharing auth ids with the previous ones decoded through `cache`.
    pub fn decode_with(r: &mut Reader, cache: &mut AuthCache) -> Result<Command, DecodeError> {
        match r.read_u8()? {
            TAG_REQUEST => Ok(Command::Write(get_write(r, cache)?)),
            TAG_RECONFIG => Ok(Command::Reconfig {
                write: get_write(r, cache)?,
                stamp: get_stamp(r)?,
            }),
            TAG_SET_CONFIG => Ok(Command::SetConfig {
                text: r.read_ustring()?,
            }),
            TAG_CREATE_SESSION => {
                let session = r.read_i64()?;
                let timeout = r.read_i32()?;
                let mut passwd = [0u8; 16];
                for b in passwd.iter_mut() {
                    *b = r.read_u8()?;
                }
                let origin = get_origin(r)?;
                Ok(Command::CreateSession {
                    session,
                    timeout,
                    passwd,
                    origin,
                })
            }
            TAG_CLOSE_SESSION => {
                let session = r.read_i64()?;
                let reason = match r.read_u8()? {
                    0 => CloseReason::Expired,
                    _ => {
                        let origin = get_origin(r)?;
                        let xid = r.read_i32()?;
                        CloseReason::Client { origin, xid }
                    }
                };
                Ok(Command::CloseSession { session, reason })
            }
            TAG_DELETE_NODE => Ok(Command::DeleteNode {
                path: r.read_ustring()?,
            }),
            TAG_RESTORE => Ok(Command::Restore {
                nonce: r.read_i64()? as u64,
                state: r.read_buffer()?.unwrap_or_default(),
            }),
            _ => Err(DecodeError::BadMulti("unknown command tag")),
        }
    }
}

impl Command {
    /// About the size of this command's encoding (to size buffers).
    pub fn size_hint(&self) -> usize {
        match self {
            Command::Write(w) => 64 + w.body.len() + 32 * w.auth.len(),
            Command::Restore { state, .. } => 64 + state.len(),
            _ => 64,
        }
    }
}

/// Bytes of a batch's header: version, time, count.
const BATCH_HEADER: usize = 13;

/// A batch's encoding built a command at a time, its header written last: commands that
/// connections encoded as they received them (`net/submit.rs`) are appended as they are,
/// so the Raft thread does not encode them. The result is the same bytes as
/// [`Batch::encode`] gives for the same time and commands.
#[derive(Debug, Default)]
pub struct EncodedBatch {
    buf: BytesMut,
    count: usize,
}

impl EncodedBatch {
    pub fn with_capacity(bytes: usize) -> EncodedBatch {
        let mut b = EncodedBatch::default();
        b.start(bytes);
        b
    }

    /// Bytes encoded so far (header included).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was encoded yet.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Makes room for about `more` bytes of commands, if nothing was encoded yet: the
    /// buffer grows once instead of in steps.
    pub fn start(&mut self, more: usize) {
        if self.is_empty() {
            self.buf.reserve(BATCH_HEADER + more);
            self.buf.put_bytes(0, BATCH_HEADER);
        }
    }

    /// Appends one command.
    pub fn push(&mut self, c: &Command) {
        self.start(c.size_hint());
        c.encode(&mut self.buf);
        self.count += 1;
    }

    /// Appends `count` commands already encoded, one after the other, by [`Command::encode`].
    pub fn push_encoded(&mut self, encoded: &[u8], count: usize) {
        self.start(encoded.len());
        self.buf.put_slice(encoded);
        self.count += count;
    }

    /// How many commands it holds.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The batch's bytes, proposed at `time`.
    pub fn finish(mut self, time: i64) -> Vec<u8> {
        self.start(0);
        self.buf[0] = FORMAT_VERSION;
        self.buf[1..9].copy_from_slice(&time.to_be_bytes());
        self.buf[9..BATCH_HEADER].copy_from_slice(&(self.count as i32).to_be_bytes());
        // Hands over the buffer itself (no copy of the batch).
        Vec::from(self.buf)
    }
}

impl Batch {
    pub fn encode(&self) -> Vec<u8> {
        let size = self.commands.iter().map(Command::size_hint).sum();
        let mut out = EncodedBatch::with_capacity(size);
        for c in &self.commands {
            out.push(c);
        }
        out.finish(self.time)
    }

    /// Decodes an entry written by this version. Anything else is an error: a member must
    /// never guess at a log it cannot read.
    pub fn decode(data: Bytes) -> Result<Batch, DecodeError> {
        let mut r = Reader::new(data);
        let version = r.read_u8()?;
        if version != FORMAT_VERSION {
            return Err(DecodeError::InvalidLength(version as i64));
        }
        let time = r.read_i64()?;
        let mut cache = AuthCache::default();
        let commands = r.read_vec(1, |r| Command::decode_with(r, &mut cache))?;
        Ok(Batch { time, commands })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip() {
        let origin = Origin {
            member: 3,
            conn: 99,
        };
        let batch = Batch {
            time: 1_700_000_000_000,
            commands: vec![
                Command::Write(ClientWrite {
                    session: 7,
                    xid: 12,
                    op: 1,
                    origin,
                    auth: vec![Id {
                        scheme: "ip".into(),
                        id: "127.0.0.1".into(),
                    }]
                    .into(),
                    body: Bytes::from_static(b"\x00\x00\x00\x02/a"),
                }),
                Command::CreateSession {
                    session: 8,
                    timeout: 30000,
                    passwd: [5; 16],
                    origin,
                },
                Command::CloseSession {
                    session: 8,
                    reason: CloseReason::Client { origin, xid: 4 },
                },
                Command::CloseSession {
                    session: 9,
                    reason: CloseReason::Expired,
                },
                Command::DeleteNode { path: "/c".into() },
                Command::Restore {
                    nonce: u64::MAX - 5,
                    state: Bytes::from_static(b"a snapshot"),
                },
                Command::Reconfig {
                    write: ClientWrite {
                        session: 7,
                        xid: 13,
                        op: 16,
                        origin,
                        auth: Arc::from([]),
                        body: Bytes::from_static(b"\xff\xff\xff\xff"),
                    },
                    stamp: ReconfigStamp {
                        enabled: true,
                        skip_acl: false,
                        in_progress: true,
                        standalone: true,
                        synced: vec![1, 3],
                    },
                },
                Command::SetConfig {
                    text: "server.1=h:1:1:participant\nversion=100000000".into(),
                },
            ],
        };
        let bytes = Bytes::from(batch.encode());
        assert_eq!(Batch::decode(bytes.clone()).unwrap(), batch);
        // Assembled from commands encoded elsewhere, in runs: the very same bytes.
        let mut built = EncodedBatch::default();
        let (first, rest) = batch.commands.split_at(3);
        let mut run = BytesMut::new();
        for c in first {
            c.encode(&mut run);
        }
        built.push_encoded(&run, first.len());
        for c in rest {
            built.push(c);
        }
        assert_eq!(built.count(), batch.commands.len());
        assert_eq!(built.finish(batch.time), &bytes[..]);
        let empty = Batch::default().encode();
        assert_eq!(EncodedBatch::default().finish(0), empty);
        assert_eq!(Batch::decode(Bytes::from(empty)).unwrap(), Batch::default());
    }

    #[test]
    fn equal_auth_ids_in_a_batch_share_one_allocation() {
        let ip = Id {
            scheme: "ip".into(),
            id: "10.0.0.1".into(),
        };
        let digest = Id {
            scheme: "digest".into(),
            id: "u:x".into(),
        };
        let write = |auth: Vec<Id>| {
            Command::Write(ClientWrite {
                session: 1,
                xid: 1,
                op: 5,
                origin: Origin { member: 1, conn: 1 },
                auth: auth.into(),
                body: Bytes::from_static(b"body"),
            })
        };
        let batch = Batch {
            time: 1,
            commands: vec![
                write(vec![ip.clone()]),
                write(vec![ip.clone()]),
                write(vec![ip.clone(), digest.clone()]),
                write(vec![ip.clone(), digest]),
                write(vec![]),
                write(vec![ip]),
            ],
        };
        let decoded = Batch::decode(Bytes::from(batch.encode())).unwrap();
        assert_eq!(decoded, batch);
        let auth = |i: usize| match &decoded.commands[i] {
            Command::Write(w) => w.auth.clone(),
            _ => unreachable!(),
        };
        assert!(Arc::ptr_eq(&auth(0), &auth(1)));
        assert!(Arc::ptr_eq(&auth(2), &auth(3)));
        assert!(!Arc::ptr_eq(&auth(1), &auth(5)));
        assert_eq!(auth(4).len(), 0);
    }

    #[test]
    fn foreign_versions_and_garbage_are_errors() {
        assert!(Batch::decode(Bytes::from_static(&[2, 0, 0])).is_err());
        assert!(Batch::decode(Bytes::from_static(&[
            1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 77
        ]))
        .is_err());
    }
}
