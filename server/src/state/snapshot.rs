//! Serialising the state machine (tree, sessions, last zxid) for snapshots, and a digest of
//! the tree for comparing members.
//!
//! Layout (jute primitives, big-endian): `"ZRSM" | u32 version | i64 last_zxid |
//! sessions: i32 n, (i64 id, i32 timeout, 16 bytes passwd)* | acls: i32 n, vector<ACL>* |
//! nodes: i64 n, (ustring path, buffer data, i32 acl index, i64 czxid, i64 mzxid, i64 ctime,
//! i64 mtime, i32 version, i32 cversion, i32 aversion, u8 kind, i64 kind value, i64 pzxid)*`.
//! Children are not stored: they follow from the paths, and are rebuilt on load (a path
//! whose parent is missing is corruption). Nodes are written depth first, parents before
//! children, so loading places each under a parent already there; snapshots of earlier
//! builds (in hash order, same layout) still load, their early children waiting.
//!
//! Version 2 ends with a CRC-32 (IEEE, u32) of everything before it, checked before
//! anything decoded is used: a snapshot travels between members and into backups, where
//! RocksDB's block checksums no longer cover it, and a flipped byte in a node's data would
//! otherwise load as a different tree. Version 1 (no checksum, written by earlier builds)
//! still loads. Both directions stream through a few MiB (`snapshot_io.rs`): the size of
//! a snapshot is never held in memory on top of the tree it encodes or decodes.
//! Decoding runs in two stages: a thread reads, checksums and cuts the stream into batches
//! of node records, the calling thread builds the tree from them (where its memory then
//! lives); a start-up's load takes the longer of the two instead of their sum.

use std::io::{self, Read, Write};

use bytes::{BufMut, Bytes, BytesMut};
use jute::{Acl, DecodeError, Record, WriteExt};

use super::snapshot_io::{ChunkedOut, MaybeShort, TrailerSplit, Window};
use super::tree::{DataTree, NodeKind, NodeRecord, TreeCapture, TreeLoader, TreeOptions};
use super::{SessionInfo, StateMachine};

const MAGIC: &[u8; 4] = b"ZRSM";
const VERSION: u32 = 2;
/// The version before the checksum trailer, still read.
const VERSION_UNCHECKED: u32 = 1;

/// Why a snapshot could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("not a zooraft snapshot (bad magic)")]
    BadMagic,
    #[error("snapshot format {0} is not supported by this build")]
    Version(u32),
    #[error("corrupt snapshot: {0}")]
    Decode(#[from] DecodeError),
    #[error("corrupt snapshot: {0}")]
    Inconsistent(String),
    #[error("corrupt snapshot: checksum mismatch (stored {stored:08x}, computed {computed:08x})")]
    Checksum { stored: u32, computed: u32 },
    #[error("cannot read the snapshot: {0}")]
    Io(#[from] io::Error),
}

fn kind_code(kind: NodeKind) -> (u8, i64) {
    match kind {
        NodeKind::Persistent => (0, 0),
        NodeKind::Ephemeral(s) => (1, s),
        NodeKind::Container => (2, 0),
        NodeKind::Ttl(t) => (3, t),
    }
}

/// What a snapshot holds, captured on the Raft loop in one pointer copy per chunk of the
/// tree's arena (the chunks are shared with the live tree, which copies one only when it
/// changes it while the snapshot still holds it). Encoding happens elsewhere, from this
/// view.
pub struct SnapshotView {
    pub last_zxid: i64,
    pub sessions: Vec<(i64, SessionInfo)>,
    pub tree: TreeCapture,
    /// Path and data bytes, to size the encoding buffer once.
    pub data_size: u64,
}

impl SnapshotView {
    /// Captures the state for a snapshot (cheap: no znode is copied).
    pub fn of(state: &StateMachine) -> SnapshotView {
        SnapshotView {
            last_zxid: state.last_zxid,
            sessions: state
                .sessions
                .iter()
                .map(|(id, s)| (*id, s.clone()))
                .collect(),
            tree: state.tree.capture(),
            data_size: state.tree.approximate_data_size(),
        }
    }
}

/// Serialises a captured state into memory (a backup, a test); a snapshot for the store
/// is streamed with [`encode_into`].
pub fn encode(view: &SnapshotView) -> Bytes {
    let capacity = 64 + view.data_size as usize + view.tree.len() * 80 + view.sessions.len() * 28;
    let mut out = Vec::with_capacity(capacity);
    match encode_into(view, &mut out) {
        Ok(_) => Bytes::from(out),
        Err(e) => unreachable!("writing to a Vec fails only when memory does: {e}"),
    }
}

/// Serialises a captured state into `w` as it goes, through a buffer of a few MiB (see
/// `snapshot_io.rs`); the bytes written.
pub fn encode_into<W: Write + ?Sized>(view: &SnapshotView, w: &mut W) -> io::Result<u64> {
    let mut sink = ChunkedOut::new(w);
    let out = &mut sink.buf;
    out.put_slice(MAGIC);
    out.put_u32(VERSION);
    out.put_i64(view.last_zxid);
    out.put_i32(view.sessions.len() as i32);
    for (id, info) in &view.sessions {
        out.put_i64(*id);
        out.put_i32(info.timeout);
        out.put_slice(&info.passwd);
    }
    // The tree's interned ACL lists, each written once; nodes refer to them by index.
    let lists = view.tree.acl_lists();
    out.put_i32(lists.len() as i32);
    for list in lists {
        out.put_i32(list.len() as i32);
        for a in list.iter() {
            a.encode(out);
        }
    }
    // Parents before children (the capture walks depth first), which loading relies on
    // for speed (it accepts any order).
    out.put_i64(view.tree.len() as i64);
    sink.maybe_flush()?;
    let mut failed = None;
    view.tree.walk(|p, n| {
        if failed.is_some() {
            return;
        }
        let out = &mut sink.buf;
        out.put_ustring(p);
        out.put_buffer(n.data());
        out.put_i32(n.acl_id() as i32);
        out.put_i64(n.czxid());
        out.put_i64(n.mzxid());
        out.put_i64(n.ctime());
        out.put_i64(n.mtime());
        out.put_i32(n.version());
        out.put_i32(n.cversion());
        out.put_i32(n.aversion());
        let (k, v) = kind_code(n.kind());
        out.put_u8(k);
        out.put_i64(v);
        out.put_i64(n.pzxid());
        if let Err(e) = sink.maybe_flush() {
            failed = Some(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    sink.finish(true)
}

impl MaybeShort for SnapshotError {
    fn is_short(&self) -> bool {
        matches!(self, SnapshotError::Decode(e) if e.is_short())
    }
}

/// Reads a snapshot's magic and version: the eight bytes, and whether the format has a
/// checksum trailer.
fn read_head(src: &mut impl Read) -> Result<([u8; 8], bool), SnapshotError> {
    let mut head = [0u8; 8];
    if let Err(e) = src.read_exact(&mut head) {
        return Err(match e.kind() {
            io::ErrorKind::UnexpectedEof => SnapshotError::BadMagic,
            _ => SnapshotError::Io(e),
        });
    }
    if &head[..4] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    match u32::from_be_bytes([head[4], head[5], head[6], head[7]]) {
        VERSION => Ok((head, true)),
        VERSION_UNCHECKED => Ok((head, false)),
        v => Err(SnapshotError::Version(v)),
    }
}

/// Loads a state machine from a snapshot in memory.
pub fn decode(bytes: Bytes, options: TreeOptions) -> Result<StateMachine, SnapshotError> {
    decode_from(&bytes[..], options)
}

/// Loads a state machine from a snapshot read as a stream, a window of a few MiB at a
/// time. The tree is built as the stream goes and returned only once the checksum over
/// the whole stream matched (format 2); a stream that fails to decode is read to its end
/// all the same, so that damage shows as the checksum mismatch it is.
pub fn decode_from(
    mut src: impl Read + Send,
    options: TreeOptions,
) -> Result<StateMachine, SnapshotError> {
    let (head, checked) = read_head(&mut src)?;
    let mut w = Window::new(TrailerSplit::new(src, checked, &head));
    let decoded = decode_body(&mut w, options, checked);
    if !checked {
        return decoded;
    }
    let split = w.source();
    if decoded.is_err() {
        if let Err(e) = split.drain() {
            tracing::warn!("cannot read a damaged snapshot to its end: {e}");
            return decoded;
        }
    }
    match split.trailer() {
        (Some(stored), computed) if stored != computed => {
            Err(SnapshotError::Checksum { stored, computed })
        }
        (Some(_), _) => decoded,
        (None, _) => decoded.and(Err(SnapshotError::Inconsistent(
            "shorter than its checksum".into(),
        ))),
    }
}

/// Checks a stored snapshot without decoding it: the magic, the version and, for format 2,
/// the checksum over the whole stream (one pass, a small buffer at a time). For the copy a
/// leader is about to send and for the scrub of the stored file: damage found here is
/// repaired from the tree in memory, never sent or loaded. A format 1 snapshot has no
/// checksum to check.
pub fn verify(mut src: impl Read) -> Result<(), SnapshotError> {
    let (head, checked) = read_head(&mut src)?;
    if !checked {
        return Ok(());
    }
    let mut split = TrailerSplit::new(src, true, &head);
    split.drain()?;
    match split.trailer() {
        (Some(stored), computed) if stored != computed => {
            Err(SnapshotError::Checksum { stored, computed })
        }
        (Some(_), _) => Ok(()),
        (None, _) => Err(SnapshotError::Inconsistent(
            "shorter than its checksum".into(),
        )),
    }
}

/// Decodes everything after the magic and version, to the end of the stream.
fn decode_body<R: Read + Send>(
    w: &mut Window<R>,
    options: TreeOptions,
    checked: bool,
) -> Result<StateMachine, SnapshotError> {
    let (last_zxid, n) = w.record(|r| Ok::<_, SnapshotError>((r.read_i64()?, r.read_i32()?)))?;
    let mut sessions = std::collections::BTreeMap::new();
    for _ in 0..n.max(0) {
        let (id, info) = w.record(|r| {
            let id = r.read_i64()?;
            let timeout = r.read_i32()?;
            let mut passwd = [0u8; 16];
            for b in passwd.iter_mut() {
                *b = r.read_u8()?;
            }
            Ok::<_, SnapshotError>((id, SessionInfo { timeout, passwd }))
        })?;
        sessions.insert(id, info);
    }
    let n_acls = w.record(|r| Ok::<_, SnapshotError>(r.read_i32()?))?;
    let mut lists = Vec::new();
    for _ in 0..n_acls.max(0) {
        lists.push(w.record(|r| Ok::<_, SnapshotError>(r.read_vec(12, Acl::decode)?))?);
    }
    let n_nodes = w.record(|r| Ok::<_, SnapshotError>(r.read_i64()?))?;
    // Sized for the count it announces, within reason: the count is not yet checked. A
    // checksummed snapshot is one of ours: depth first, each path once (see TreeLoader).
    let expected = n_nodes.clamp(0, 1 << 24) as usize;
    let mut loader = if checked {
        TreeLoader::depth_first(options, expected)
    } else {
        TreeLoader::new(options, expected)
    };
    let acls: Vec<u32> = lists
        .into_iter()
        .map(|l| loader.tree.intern_acl(l))
        .collect();
    let inconsistent = |e: super::tree::LoadError| SnapshotError::Inconsistent(e.to_string());
    // The stream is read, checksummed and cut into records on one thread while this one
    // builds the tree (where it will be used: see `open_loading` on allocator arenas).
    let (to_builder, batches) = std::sync::mpsc::sync_channel::<Batch>(BATCHES_IN_FLIGHT);
    let (built, parsed) = std::thread::scope(|s| {
        let (n, reading, acls) = (n_nodes.max(0) as u64, &mut *w, &acls[..]);
        let parser = s.spawn(move || parse_nodes(reading, n, acls, to_builder));
        let built = (|| -> Result<(), SnapshotError> {
            for batch in batches {
                for node in &batch.nodes {
                    let record = NodeRecord {
                        data: node.data.map(|d| batch.slice(d)),
                        ..node.record
                    };
                    loader
                        .checked_node(batch.path(node.path), &record)
                        .map_err(inconsistent)?;
                }
            }
            Ok(())
        })();
        let parsed = parser
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (built, parsed)
    });
    built?;
    parsed?;
    if !w.at_end()? {
        return Err(SnapshotError::Inconsistent(
            "bytes after the last node".into(),
        ));
    }
    let tree = loader.finish().map_err(inconsistent)?;
    Ok(StateMachine {
        tree,
        sessions,
        last_zxid,
    })
}

/// Parsed node records handed from the reading thread to the building one.
const BATCH_NODES: usize = 4096;
/// Batches parsed ahead of the builder (bounds the memory the pipeline holds).
const BATCHES_IN_FLIGHT: usize = 4;

/// A node as a snapshot stores it; its path is a range of its batch's paths, its data of
/// its batch's bytes (the record's own `data` is set from them when the node is placed).
struct RawNode {
    path: (u32, u32),
    data: Option<(u32, u32)>,
    record: NodeRecord<'static>,
}

/// Consecutive node records: their fixed fields, their paths (checked on the parsing
/// thread, kept as text) and their data.
#[derive(Default)]
struct Batch {
    nodes: Vec<RawNode>,
    paths: String,
    bytes: Vec<u8>,
}

impl Batch {
    fn push_path(&mut self, p: &str) -> (u32, u32) {
        let at = self.paths.len() as u32;
        self.paths.push_str(p);
        (at, p.len() as u32)
    }

    fn push_bytes(&mut self, b: &[u8]) -> (u32, u32) {
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(b);
        (at, b.len() as u32)
    }

    fn path(&self, (at, len): (u32, u32)) -> &str {
        &self.paths[at as usize..at as usize + len as usize]
    }

    fn slice(&self, (at, len): (u32, u32)) -> &[u8] {
        &self.bytes[at as usize..at as usize + len as usize]
    }

    /// Bytes held (paths and data).
    fn size(&self) -> usize {
        self.paths.len() + self.bytes.len()
    }
}

/// Reads `n` node records from the window into batches for the builder. Stops early, with
/// no error, when the builder stopped (its error is the one reported).
fn parse_nodes<R: Read>(
    w: &mut Window<R>,
    n: u64,
    acls: &[u32],
    to: std::sync::mpsc::SyncSender<Batch>,
) -> Result<(), SnapshotError> {
    let mut batch = Batch::default();
    for _ in 0..n {
        w.record(|r| {
            let used = read_node(r.peek_rest(), acls, &mut batch)?;
            r.skip(used)?;
            Ok::<_, SnapshotError>(())
        })?;
        let full = batch.nodes.len() == BATCH_NODES || batch.size() >= 1 << 20;
        if full && to.send(std::mem::take(&mut batch)).is_err() {
            return Ok(());
        }
    }
    if !batch.nodes.is_empty() {
        let _ = to.send(batch);
    }
    Ok(())
}

/// Reads one node record at the start of `buf` into `batch` (only once it is whole and
/// valid), and how many bytes it took. `acls` maps the snapshot's ACL indexes to the
/// tree's. The same rules as the jute reader's: a length beyond `buf` (or a record cut
/// short) is `Truncated`, so the window reads more and retries; a null path is an error.
fn read_node(buf: &[u8], acls: &[u32], batch: &mut Batch) -> Result<usize, SnapshotError> {
    let mut c = Cursor { buf, at: 0 };
    let path = match c.i32()? {
        -1 => return Err(DecodeError::UnexpectedNull("string").into()),
        n if n < 0 => return Err(DecodeError::InvalidLength(n as i64).into()),
        n => c.take(n as usize)?,
    };
    let data = match c.i32()? {
        -1 => None,
        n if n < 0 => return Err(DecodeError::InvalidLength(n as i64).into()),
        n => Some(c.take(n as usize)?),
    };
    let (acl_i, czxid, mzxid, ctime, mtime) = (c.i32()?, c.i64()?, c.i64()?, c.i64()?, c.i64()?);
    let (version, cversion, aversion) = (c.i32()?, c.i32()?, c.i32()?);
    let (kind, kind_value, pzxid) = (c.take(1)?[0], c.i64()?, c.i64()?);
    let bad = |what: String| {
        let p = String::from_utf8_lossy(path);
        SnapshotError::Inconsistent(format!("{p}: {what}"))
    };
    let acl = acls
        .get(acl_i as usize)
        .copied()
        .ok_or_else(|| bad(format!("ACL index {acl_i}")))?;
    let kind = match (kind, kind_value) {
        (0, _) => NodeKind::Persistent,
        (1, s) => NodeKind::Ephemeral(s),
        (2, _) => NodeKind::Container,
        (3, t) => NodeKind::Ttl(t),
        (k, _) => return Err(bad(format!("node kind {k}"))),
    };
    // Checked here, on the parsing thread, so the building thread need not (paths are
    // written from strings: anything else is damage).
    let text = std::str::from_utf8(path)
        .map_err(|_| SnapshotError::Inconsistent("a path is not UTF-8".into()))?;
    if crate::state::path::validate(text).is_err() {
        let e = super::tree::LoadError::BadPath(text.to_string());
        return Err(SnapshotError::Inconsistent(e.to_string()));
    }
    let node = RawNode {
        path: batch.push_path(text),
        data: data.map(|d| batch.push_bytes(d)),
        record: NodeRecord {
            data: None,
            acl,
            czxid,
            mzxid,
            ctime,
            mtime,
            version,
            cversion,
            aversion,
            kind,
            pzxid,
        },
    };
    batch.nodes.push(node);
    Ok(c.at)
}

/// Big-endian reads over a slice, for [`read_node`].
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let remaining = self.buf.len() - self.at;
        if n > remaining {
            return Err(DecodeError::Truncated {
                needed: n,
                remaining,
            });
        }
        let out = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        self.array().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        self.array().map(i64::from_be_bytes)
    }
}

/// A 64-bit digest of the tree (paths, data, Stat, ACLs), independent of map order: equal
/// on two members exactly when their trees are equal (up to hash collisions).
pub fn tree_digest(tree: &DataTree) -> u64 {
    // FNV-1a over a canonical encoding of each node, in path order.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    let mut buf = BytesMut::new();
    for p in tree.sorted_paths() {
        let Some(n) = tree.get(&p) else { continue };
        buf.clear();
        buf.put_ustring(&p);
        buf.put_buffer(n.data());
        n.stat().encode(&mut buf);
        for a in n.acl().iter() {
            a.encode(&mut buf);
        }
        let (k, v) = kind_code(n.kind());
        buf.put_u8(k);
        buf.put_i64(v);
        feed(&buf);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::snapshot_io::tests::Trickle;
    use crate::state::tree::{CreateOp, CreateRecord, TxnContext};
    use jute::Id;

    fn sample() -> StateMachine {
        let mut sm = StateMachine::new(TreeOptions {
            extended_types: true,
        });
        sm.sessions.insert(
            7,
            SessionInfo {
                timeout: 4000,
                passwd: [9; 16],
            },
        );
        sm.last_zxid = (3 << 32) | 17;
        let auth = [Id {
            scheme: "digest".into(),
            id: "u:h".into(),
        }];
        let ctx = TxnContext {
            zxid: 5,
            time: 99,
            session: 7,
            auth: &auth,
        };
        let open = [Acl::open_unsafe()];
        let digest = [Acl {
            perms: 31,
            id: Id {
                scheme: "digest".into(),
                id: "u:h".into(),
            },
        }];
        for (p, flags, acl, record) in [
            ("/a", 0, &open[..], CreateRecord::Plain),
            ("/a/b", 2, &digest[..], CreateRecord::Plain),
            ("/e", 1, &open[..], CreateRecord::Plain),
            ("/c", 4, &open[..], CreateRecord::Container),
            ("/t", 5, &open[..], CreateRecord::Ttl(5000)),
        ] {
            let op = CreateOp {
                path: p,
                data: Some(Bytes::from_static(b"xyz")),
                acl,
                flags,
                record,
            };
            sm.tree.create(&ctx, &op, &mut Vec::new(), None).unwrap();
        }
        sm
    }

    #[test]
    fn round_trip_preserves_everything() {
        let sm = sample();
        let bytes = encode(&SnapshotView::of(&sm));
        let back = decode(
            bytes,
            TreeOptions {
                extended_types: true,
            },
        )
        .unwrap();
        assert_eq!(back.last_zxid, sm.last_zxid);
        assert_eq!(back.sessions, sm.sessions);
        assert_eq!(tree_digest(&back.tree), tree_digest(&sm.tree));
        assert_eq!(back.tree.node_count(), sm.tree.node_count());
        assert_eq!(back.tree.ephemerals_of(7).count(), 1);
        assert_eq!(back.tree.containers().len(), 1);
        assert_eq!(back.tree.ttls().len(), 1);
        assert_eq!(
            back.tree.approximate_data_size(),
            sm.tree.approximate_data_size()
        );
        assert_eq!(
            back.tree.get("/").unwrap().stat(),
            sm.tree.get("/").unwrap().stat()
        );
    }

    #[test]
    fn digest_sees_any_difference() {
        let a = sample();
        let mut b = sample();
        assert_eq!(tree_digest(&a.tree), tree_digest(&b.tree));
        let ctx = TxnContext {
            zxid: 6,
            time: 100,
            session: 7,
            auth: &[],
        };
        b.tree
            .set_data(
                &ctx,
                "/a",
                Some(Bytes::from_static(b"xyz")),
                -1,
                &mut Vec::new(),
                None,
            )
            .unwrap();
        assert_ne!(tree_digest(&a.tree), tree_digest(&b.tree));
    }

    #[test]
    fn corruption_is_detected() {
        let bytes = encode(&SnapshotView::of(&sample()));
        assert!(matches!(
            decode(Bytes::from_static(b"nope"), TreeOptions::default()),
            Err(SnapshotError::BadMagic)
        ));
        assert!(decode(
            Bytes::from(bytes[..bytes.len() - 3].to_vec()),
            TreeOptions::default()
        )
        .is_err());
        let mut v = bytes.to_vec();
        v[4..8].copy_from_slice(&9u32.to_be_bytes());
        assert!(matches!(
            decode(Bytes::from(v), TreeOptions::default()),
            Err(SnapshotError::Version(9))
        ));
    }

    #[test]
    fn a_flipped_byte_anywhere_fails_the_checksum() {
        let bytes = encode(&SnapshotView::of(&sample()));
        // Every position after the magic and version (those fail on their own).
        for pos in 8..bytes.len() {
            let mut v = bytes.to_vec();
            v[pos] ^= 0x10;
            assert!(
                matches!(
                    decode(Bytes::from(v), TreeOptions::default()),
                    Err(SnapshotError::Checksum { .. })
                ),
                "flip at {pos} not detected"
            );
        }
    }

    #[test]
    fn verify_finds_a_flip_or_a_tear_without_decoding() {
        let bytes = encode(&SnapshotView::of(&sample()));
        assert!(verify(&bytes[..]).is_ok());
        for pos in [8, bytes.len() / 2, bytes.len() - 1] {
            let mut v = bytes.to_vec();
            v[pos] ^= 0x01;
            assert!(
                matches!(verify(&v[..]), Err(SnapshotError::Checksum { .. })),
                "flip at {pos} passed"
            );
        }
        for len in [0, 5, 9, bytes.len() / 2, bytes.len() - 1] {
            assert!(verify(&bytes[..len]).is_err(), "torn at {len} passed");
        }
        let mut other = bytes.to_vec();
        other[4..8].copy_from_slice(&7u32.to_be_bytes());
        assert!(matches!(verify(&other[..]), Err(SnapshotError::Version(7))));
    }

    #[test]
    fn version_1_without_a_checksum_still_loads() {
        let sm = sample();
        let bytes = encode(&SnapshotView::of(&sm));
        let mut v1 = bytes[..bytes.len() - 4].to_vec();
        v1[4..8].copy_from_slice(&VERSION_UNCHECKED.to_be_bytes());
        let options = TreeOptions {
            extended_types: true,
        };
        let back = decode(Bytes::from(v1), options).unwrap();
        assert_eq!(tree_digest(&back.tree), tree_digest(&sm.tree));
    }

    #[test]
    fn a_bad_path_in_a_snapshot_is_refused() {
        // Version 1 has no checksum, so the damaged path reaches the path checks.
        let bytes = encode(&SnapshotView::of(&sample()));
        let mut v1 = bytes[..bytes.len() - 4].to_vec();
        v1[4..8].copy_from_slice(&VERSION_UNCHECKED.to_be_bytes());
        // The record of "/a": its path's length (2), then the path.
        let at = 4 + v1.windows(6).position(|w| w == b"\0\0\0\x02/a").unwrap();
        for (bad, why) in [(b"/.", "invalid path"), (b"/\xff", "not UTF-8")] {
            let mut v = v1.clone();
            v[at..at + 2].copy_from_slice(bad);
            match decode(Bytes::from(v), TreeOptions::default()) {
                Err(SnapshotError::Inconsistent(m)) => assert!(m.contains(why), "{m}"),
                other => panic!("{bad:?}: {:?}", other.map(|_| ())),
            }
        }
    }

    #[test]
    fn a_tree_of_many_batches_and_windows_round_trips_and_damage_fails() {
        let mut sm = sample();
        let ctx = TxnContext {
            zxid: 6,
            time: 100,
            session: 7,
            auth: &[],
        };
        let open = [Acl::open_unsafe()];
        let data = Bytes::from(vec![b'd'; 300]);
        for i in 0..12_000 {
            let op = CreateOp {
                path: &format!("/a/n{i}"),
                data: Some(data.clone()),
                acl: &open,
                flags: 0,
                record: CreateRecord::Plain,
            };
            sm.tree.create(&ctx, &op, &mut Vec::new(), None).unwrap();
        }
        let bytes = encode(&SnapshotView::of(&sm));
        assert!(bytes.len() > 3 << 20, "spans several windows");
        for step in [7777, 1 << 20] {
            let src = Trickle { data: &bytes, step };
            let back = decode_from(src, TreeOptions::default()).unwrap();
            assert_eq!(
                tree_digest(&back.tree),
                tree_digest(&sm.tree),
                "step {step}"
            );
        }
        for pos in [bytes.len() / 3, bytes.len() - 10] {
            let mut v = bytes.to_vec();
            v[pos] ^= 0x01;
            assert!(
                matches!(
                    decode(Bytes::from(v), TreeOptions::default()),
                    Err(SnapshotError::Checksum { .. })
                ),
                "flip at {pos} not detected"
            );
        }
        assert!(decode(bytes.slice(..bytes.len() / 2), TreeOptions::default()).is_err());
    }
}
