//! Snapshot files (`FileSnap`): `FileHeader` (`ZKSN`, version 2, dbid), the session table
//! (`count`, then id and timeout each), the ACL cache (`map` count, then key and ACL
//! vector each), the nodes depth-first from the root (path `""`, then `DataNode`: data,
//! ACL key, `StatPersisted`) ended by the path `"/"`, then a seal: the Adler-32 of every
//! byte so far as a long, and the path `"/"` again. ZooKeeper 3.6+ then writes the
//! `ZxidDigest` (zxid, digest version, tree digest) and seals again; 3.9 may add the last
//! processed zxid, sealed the same way. All of it inside the optional compression.

use bytes::{BufMut, Bytes, BytesMut};
use jute::{Acl, DecodeError, Reader, Record, WriteExt};

use crate::checksum::adler32;
use crate::tree::{FastSet, StatPersisted, ZkNode, ZkTree, DIGEST_VERSION, OPEN_UNSAFE_ACL_ID};

pub const SNAP_MAGIC: i32 = 0x5a4b_534e; // "ZKSN"
pub const FORMAT_VERSION: i32 = 2;

/// The digest a snapshot carries: the tree digest at `zxid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZxidDigest {
    pub zxid: i64,
    pub version: i32,
    pub digest: i64,
}

/// What a snapshot held besides the tree.
#[derive(Debug, Clone)]
pub struct SnapshotInfo {
    pub dbid: i64,
    pub digest: Option<ZxidDigest>,
    /// ZooKeeper 3.9's last processed zxid, when written.
    pub last_processed_zxid: Option<i64>,
    pub nodes: u64,
}

/// Why a snapshot stream could not be read; `offset` is in the uncompressed stream.
#[derive(Debug, thiserror::Error)]
#[error("{what} (at offset {offset})")]
pub struct SnapshotError {
    pub offset: u64,
    pub what: String,
}

struct Cursor {
    r: Reader,
    total: usize,
}

impl Cursor {
    fn offset(&self) -> usize {
        self.total - self.r.remaining()
    }

    fn err(&self, what: impl Into<String>) -> SnapshotError {
        SnapshotError {
            offset: self.offset() as u64,
            what: what.into(),
        }
    }

    fn wrap<T>(
        &mut self,
        f: impl FnOnce(&mut Reader) -> Result<T, DecodeError>,
    ) -> Result<T, SnapshotError> {
        let at = self.offset();
        f(&mut self.r).map_err(|e| SnapshotError {
            offset: at as u64,
            what: e.to_string(),
        })
    }

    /// Reads a seal and checks it against the Adler-32 of everything before it.
    fn seal(&mut self, plain: &[u8]) -> Result<(), SnapshotError> {
        let at = self.offset();
        let expected = adler32(&plain[..at]);
        let stored = self.wrap(Reader::read_i64)?;
        if stored != expected {
            return Err(SnapshotError {
                offset: at as u64,
                what: format!("checksum mismatch: stored {stored:#x}, computed {expected:#x}"),
            });
        }
        let end = self.wrap(Reader::read_ustring)?;
        if end != "/" {
            return Err(self.err(format!("expected the end marker \"/\", found {end:?}")));
        }
        Ok(())
    }
}

/// Whether an uncompressed snapshot ends with a seal's `"/"` (ZooKeeper's
/// `isValidSnapshot`): a snapshot cut short by a crash does not, and ZooKeeper skips it.
pub fn looks_complete(plain: &[u8]) -> bool {
    plain.len() >= 10 && plain[plain.len() - 5..] == [0, 0, 0, 1, b'/']
}

/// Parses a whole (decompressed) snapshot stream into a tree with its links, sessions and
/// ACL cache. `progress` is called every 64 Ki nodes with (nodes, bytes read).
pub fn read(
    plain: Bytes,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(ZkTree, SnapshotInfo), SnapshotError> {
    let total = plain.len();
    let mut c = Cursor {
        r: Reader::new(plain.clone()),
        total,
    };
    let magic = c.wrap(Reader::read_i32)?;
    if magic != SNAP_MAGIC {
        return Err(SnapshotError {
            offset: 0,
            what: format!("not a ZooKeeper snapshot (magic {magic:#x})"),
        });
    }
    let version = c.wrap(Reader::read_i32)?;
    if version != FORMAT_VERSION {
        return Err(SnapshotError {
            offset: 4,
            what: format!(
                "snapshot format version {version} is not supported (only {FORMAT_VERSION})"
            ),
        });
    }
    let dbid = c.wrap(Reader::read_i64)?;
    let (tree, nodes) = read_body(&mut c, progress)?;
    c.seal(&plain)?;
    let mut info = SnapshotInfo {
        dbid,
        digest: None,
        last_processed_zxid: None,
        nodes,
    };
    // Optional sections, each sealed: the digest (20 bytes) and 3.9's last zxid (8 bytes).
    let seal_len = 8 + 4 + 1;
    if c.r.remaining() >= 20 + seal_len {
        let zxid = c.wrap(Reader::read_i64)?;
        let version = c.wrap(Reader::read_i32)?;
        let digest = c.wrap(Reader::read_i64)?;
        c.seal(&plain)?;
        info.digest = Some(ZxidDigest {
            zxid,
            version,
            digest,
        });
    }
    if c.r.remaining() >= 8 + seal_len {
        info.last_processed_zxid = Some(c.wrap(Reader::read_i64)?);
        c.seal(&plain)?;
    }
    if c.r.remaining() != 0 {
        return Err(c.err(format!(
            "{} unexpected bytes after the snapshot",
            c.r.remaining()
        )));
    }
    progress(nodes, total as u64);
    Ok((tree, info))
}

/// What the snapshot body is read from: a whole buffer (a file) or a stream (a leader's
/// SNAP, which has no length and ends where its end marker does).
trait Source {
    fn offset(&self) -> usize;
    fn i32(&mut self) -> Result<i32, SnapshotError>;
    fn i64(&mut self) -> Result<i64, SnapshotError>;
    fn buffer(&mut self) -> Result<Option<Bytes>, SnapshotError>;
    fn ustring(&mut self) -> Result<String, SnapshotError>;
    fn acl_list(&mut self) -> Result<Vec<Acl>, SnapshotError>;
    fn stat(&mut self) -> Result<StatPersisted, SnapshotError>;

    fn err(&self, what: impl Into<String>) -> SnapshotError {
        SnapshotError {
            offset: self.offset() as u64,
            what: what.into(),
        }
    }
}

impl Source for Cursor {
    fn offset(&self) -> usize {
        Cursor::offset(self)
    }
    fn i32(&mut self) -> Result<i32, SnapshotError> {
        self.wrap(Reader::read_i32)
    }
    fn i64(&mut self) -> Result<i64, SnapshotError> {
        self.wrap(Reader::read_i64)
    }
    fn buffer(&mut self) -> Result<Option<Bytes>, SnapshotError> {
        self.wrap(Reader::read_buffer)
    }
    fn ustring(&mut self) -> Result<String, SnapshotError> {
        self.wrap(Reader::read_ustring)
    }
    fn acl_list(&mut self) -> Result<Vec<Acl>, SnapshotError> {
        self.wrap(|r| r.read_vec(12, Acl::decode))
    }
    fn stat(&mut self) -> Result<StatPersisted, SnapshotError> {
        self.wrap(read_stat)
    }
}

/// The session table, the ACL cache and the nodes up to the end marker `"/"`.
fn read_body(
    c: &mut impl Source,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(ZkTree, u64), SnapshotError> {
    let mut tree = ZkTree::new();
    let count = c.i32()?;
    if count < 0 {
        return Err(c.err(format!("negative session count {count}")));
    }
    for _ in 0..count {
        let id = c.i64()?;
        let timeout = c.i32()?;
        tree.sessions.insert(id, timeout);
    }
    let acl_count = c.i32()?;
    if acl_count < 0 {
        return Err(c.err(format!("negative ACL cache size {acl_count}")));
    }
    for _ in 0..acl_count {
        let key = c.i64()?;
        let list = c.acl_list()?;
        tree.add_acl(key, list);
    }
    let mut nodes = 0u64;
    loop {
        let at = c.offset();
        let path = c.ustring()?;
        if path == "/" {
            break;
        }
        let data = c.buffer()?;
        let acl = c.i64()?;
        let stat = c.stat()?;
        if acl != OPEN_UNSAFE_ACL_ID && !tree.acls.contains_key(&acl) {
            return Err(SnapshotError {
                offset: at as u64,
                what: format!(
                    "node {path:?} names ACL {acl}, which the snapshot's ACL cache lacks"
                ),
            });
        }
        let key = if path.is_empty() {
            "/".to_string()
        } else {
            path
        };
        if key != "/" && !key.starts_with('/') {
            return Err(SnapshotError {
                offset: at as u64,
                what: format!("invalid path {key:?}"),
            });
        }
        // Depth-first order: a parent comes before its children (ZooKeeper links them as it
        // reads, and refuses a node whose parent it has not seen).
        if key != "/" {
            let (parent, child) = crate::tree::split(&key);
            match tree.nodes.get_mut(parent) {
                Some(p) => {
                    p.children.insert(child.to_string());
                }
                None => {
                    return Err(SnapshotError {
                        offset: at as u64,
                        what: format!("node {key:?} comes before its parent"),
                    })
                }
            }
        }
        tree.insert(
            key,
            ZkNode {
                data,
                acl,
                stat,
                children: FastSet::default(),
            },
        );
        nodes += 1;
        if nodes.is_multiple_of(65_536) {
            progress(nodes, c.offset() as u64);
        }
    }
    if !tree.nodes.contains_key("/") {
        return Err(c.err("the snapshot has no root node"));
    }
    Ok((tree, nodes))
}

/// A leader's snapshot as it comes on the quorum port after a SNAP packet: the session
/// table, the ACL cache and the nodes up to the end marker `"/"`, read straight from the
/// stream (no file header, no checksum, no digest). A length above `max_buffer` is refused
/// before anything is allocated for it. The caller reads the signature that follows.
pub fn read_wire<R: std::io::Read>(
    r: &mut R,
    max_buffer: usize,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ZkTree, SnapshotError> {
    let mut s = Stream {
        r,
        at: 0,
        max: max_buffer,
        scratch: Vec::new(),
    };
    let (tree, _) = read_body(&mut s, progress)?;
    Ok(tree)
}

/// [`Source`] over a byte stream.
struct Stream<'a, R> {
    r: &'a mut R,
    at: usize,
    max: usize,
    scratch: Vec<u8>,
}

impl<R: std::io::Read> Stream<'_, R> {
    fn exact(&mut self, n: usize) -> Result<&[u8], SnapshotError> {
        self.scratch.resize(n, 0);
        self.r
            .read_exact(&mut self.scratch)
            .map_err(|e| SnapshotError {
                offset: self.at as u64,
                what: format!("reading the snapshot: {e}"),
            })?;
        self.at += n;
        Ok(&self.scratch)
    }

    /// A length field: -1 (null) is `None`; a negative or too large one is an error.
    fn len(&mut self) -> Result<Option<usize>, SnapshotError> {
        let v = self.i32()?;
        if v == -1 {
            return Ok(None);
        }
        if v < 0 || v as usize > self.max {
            return Err(self.err(format!("invalid length {v}")));
        }
        Ok(Some(v as usize))
    }

    fn parse<T>(
        &mut self,
        n: usize,
        f: impl FnOnce(&mut Reader) -> Result<T, DecodeError>,
    ) -> Result<T, SnapshotError> {
        let at = self.at;
        let bytes = Bytes::copy_from_slice(self.exact(n)?);
        f(&mut Reader::new(bytes)).map_err(|e| SnapshotError {
            offset: at as u64,
            what: e.to_string(),
        })
    }
}

impl<R: std::io::Read> Source for Stream<'_, R> {
    fn offset(&self) -> usize {
        self.at
    }
    fn i32(&mut self) -> Result<i32, SnapshotError> {
        let b = self.exact(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, SnapshotError> {
        let b = self.exact(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn buffer(&mut self) -> Result<Option<Bytes>, SnapshotError> {
        match self.len()? {
            None => Ok(None),
            Some(n) => Ok(Some(Bytes::copy_from_slice(self.exact(n)?))),
        }
    }
    fn ustring(&mut self) -> Result<String, SnapshotError> {
        let n = self
            .len()?
            .ok_or_else(|| self.err("unexpected null string"))?;
        let b = self.exact(n)?;
        Ok(match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => jute::java_utf8_lossy(b),
        })
    }
    fn acl_list(&mut self) -> Result<Vec<Acl>, SnapshotError> {
        let Some(count) = self.len()? else {
            return Ok(Vec::new());
        };
        let mut list = Vec::with_capacity(count.min(64));
        for _ in 0..count {
            let perms = self.i32()?;
            let scheme = self.ustring()?;
            let id = self.ustring()?;
            list.push(Acl {
                perms,
                id: jute::Id { scheme, id },
            });
        }
        Ok(list)
    }
    fn stat(&mut self) -> Result<StatPersisted, SnapshotError> {
        self.parse(60, read_stat)
    }
}

fn read_stat(r: &mut Reader) -> Result<StatPersisted, DecodeError> {
    Ok(StatPersisted {
        czxid: r.read_i64()?,
        mzxid: r.read_i64()?,
        ctime: r.read_i64()?,
        mtime: r.read_i64()?,
        version: r.read_i32()?,
        cversion: r.read_i32()?,
        aversion: r.read_i32()?,
        ephemeral_owner: r.read_i64()?,
        pzxid: r.read_i64()?,
    })
}

fn put_stat(out: &mut BytesMut, s: &StatPersisted) {
    out.put_i64(s.czxid);
    out.put_i64(s.mzxid);
    out.put_i64(s.ctime);
    out.put_i64(s.mtime);
    out.put_i32(s.version);
    out.put_i32(s.cversion);
    out.put_i32(s.aversion);
    out.put_i64(s.ephemeral_owner);
    out.put_i64(s.pzxid);
}

fn seal(out: &mut BytesMut) {
    let sum = adler32(out);
    out.put_i64(sum);
    out.put_ustring("/");
}

/// Writes a snapshot stream (uncompressed) of `tree` as ZooKeeper 3.8 does, with the
/// digest section for `tree.last_zxid`. Children are written in name order.
pub fn write(tree: &ZkTree) -> Vec<u8> {
    let data_size: usize = tree
        .nodes
        .iter()
        .map(|(p, n)| p.len() + n.data.as_ref().map_or(0, |d| d.len()) + 90)
        .sum();
    let mut out = BytesMut::with_capacity(data_size + 1024);
    out.put_i32(SNAP_MAGIC);
    out.put_i32(FORMAT_VERSION);
    out.put_i64(0);
    out.put_i32(tree.sessions.len() as i32);
    for (id, timeout) in &tree.sessions {
        out.put_i64(*id);
        out.put_i32(*timeout);
    }
    let mut keys: Vec<&i64> = tree.acls.keys().collect();
    keys.sort();
    out.put_i32(keys.len() as i32);
    for k in keys {
        out.put_i64(*k);
        let list = &tree.acls[k];
        out.put_i32(list.len() as i32);
        for a in list {
            a.encode(&mut out);
        }
    }
    // Depth-first from the root, iteratively (trees can be deep).
    let mut stack: Vec<String> = vec!["/".to_string()];
    while let Some(path) = stack.pop() {
        let Some(node) = tree.nodes.get(&path) else {
            continue;
        };
        out.put_ustring(if path == "/" { "" } else { &path });
        out.put_buffer(node.data.as_deref());
        out.put_i64(node.acl);
        put_stat(&mut out, &node.stat);
        let mut children: Vec<&String> = node.children.iter().collect();
        children.sort_unstable_by(|a, b| b.cmp(a));
        for c in children {
            stack.push(if path == "/" {
                format!("/{c}")
            } else {
                format!("{path}/{c}")
            });
        }
    }
    out.put_ustring("/");
    seal(&mut out);
    out.put_i64(tree.last_zxid);
    out.put_i32(DIGEST_VERSION);
    out.put_i64(tree.digest());
    seal(&mut out);
    out.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::CONTAINER_OWNER;

    pub(crate) fn sample() -> ZkTree {
        let mut t = crate::tree::fresh();
        let open = t.acl_key(&[Acl::open_unsafe()]);
        t.sessions.insert(0x100, 4000);
        t.create_node(
            "/a",
            Some(Bytes::from_static(b"x")),
            &[Acl::open_unsafe()],
            0,
            -1,
            2,
            10,
        )
        .unwrap();
        t.create_node("/a/e", None, &[Acl::read_unsafe()], 0x100, -1, 3, 11)
            .unwrap();
        t.create_node(
            "/c",
            None,
            &[Acl::open_unsafe()],
            CONTAINER_OWNER,
            -1,
            4,
            12,
        )
        .unwrap();
        t.last_zxid = 4;
        assert!(open > 0);
        t
    }

    #[test]
    fn a_snap_from_the_wire_reads_like_the_file() {
        let t = sample();
        let file = write(&t);
        // The wire form is the file's body without its 16-byte header, up to the first
        // end marker; here followed by the signature a leader sends.
        let (plain, _) = read(Bytes::from(file.clone()), &mut |_, _| {}).unwrap();
        let end = body_end(&file);
        let mut wire = file[16..end].to_vec();
        wire.extend_from_slice(&[0, 0, 0, 10]);
        wire.extend_from_slice(b"BenWasHere");
        let mut r = &wire[..];
        let back = read_wire(&mut r, 1 << 20, &mut |_, _| {}).unwrap();
        assert_eq!(back.nodes, plain.nodes);
        assert_eq!(back.sessions, plain.sessions);
        assert_eq!(back.acls, plain.acls);
        assert_eq!(
            r,
            &b"\0\0\0\nBenWasHere"[..],
            "stops right after the marker"
        );
        // Cut anywhere, or with a hostile length: an error, never a panic or a huge
        // allocation.
        for cut in 0..end - 16 {
            let mut r = &wire[..cut];
            assert!(
                read_wire(&mut r, 1 << 20, &mut |_, _| {}).is_err(),
                "cut {cut}"
            );
        }
        let mut hostile = wire.clone();
        hostile[4..8].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
        hostile[0..4].copy_from_slice(&[0, 0, 0, 0]);
        let mut r = &hostile[..];
        assert!(read_wire(&mut r, 1 << 20, &mut |_, _| {}).is_err());
    }

    /// Where the body (sessions, ACLs, nodes and the first `"/"`) of a written file ends.
    fn body_end(file: &[u8]) -> usize {
        let marker = [0u8, 0, 0, 1, b'/'];
        let seal_len = 8 + marker.len();
        // The first seal follows the body: its `"/"` is the second marker from the start
        // (the first ends the nodes).
        let first = file
            .windows(marker.len())
            .position(|w| w == marker)
            .expect("an end marker");
        assert!(file.len() > first + seal_len);
        first + marker.len()
    }

    #[test]
    fn round_trip_and_damage() {
        let t = sample();
        let bytes = write(&t);
        assert!(looks_complete(&bytes));
        let (back, info) = read(Bytes::from(bytes.clone()), &mut |_, _| {}).unwrap();
        assert_eq!(back.nodes, t.nodes);
        assert_eq!(back.sessions, t.sessions);
        assert_eq!(back.digest(), t.digest());
        assert_eq!(
            info.digest,
            Some(ZxidDigest {
                zxid: 4,
                version: 2,
                digest: t.digest()
            })
        );
        assert_eq!(info.nodes, 5);
        // Truncated anywhere: an error with an offset, never a panic.
        for cut in [3, 20, bytes.len() / 2, bytes.len() - 1] {
            assert!(
                read(Bytes::from(bytes[..cut].to_vec()), &mut |_, _| {}).is_err(),
                "cut {cut}"
            );
        }
        // A flipped byte in the tree fails the checksum.
        let mut bad = bytes.clone();
        let at = bytes.len() / 2;
        bad[at] ^= 0x40;
        assert!(read(Bytes::from(bad), &mut |_, _| {}).is_err());
        // ZooKeeper 3.9's optional last-processed-zxid section, sealed like the others.
        let mut with_zxid = BytesMut::from(&write(&t)[..]);
        with_zxid.put_i64(0x1_0000_0007);
        seal(&mut with_zxid);
        let (_, info) = read(with_zxid.freeze(), &mut |_, _| {}).unwrap();
        assert_eq!(info.last_processed_zxid, Some(0x1_0000_0007));
        // A future format version is refused.
        let mut future = bytes;
        future[7] = 3;
        let e = read(Bytes::from(future), &mut |_, _| {}).unwrap_err();
        assert!(e.what.contains("version 3"), "{e}");
    }
}
