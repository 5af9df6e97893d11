//! A large ZooKeeper 3.8 data directory, written directly with the `zkdata` crate: one
//! snapshot of N znodes as ZooKeeper would hold them after N creates (1,000 parents
//! `/bNNNN` of up to 1,000 children `nNNNN` each, an open ACL, increasing zxids in epoch
//! 0), plus `acceptedEpoch`/`currentEpoch`. Generating it takes seconds where creating the
//! znodes through a server would take many minutes.
//!
//! `/zookeeper/config` holds what the caller gives ([`config_text`] formats it as
//! ZooKeeper 3.5+ does). A ZooKeeper ensemble that starts on the snapshot keeps the
//! snapshot's `/zookeeper/config` (its own configuration does not replace it on load), and
//! a real ensemble's snapshot always has its server lines there, so a bench that starts an
//! ensemble on it and reads the membership from the tree must put them in.
//!
//! For the benches that start servers on a big tree (`migration_bench`; `import_bench`
//! builds the same tree).

use std::path::{Path, PathBuf};

use bytes::Bytes;
use jute::Acl;
use zkdata::tree::{StatPersisted, ZkNode, ZkTree, OPEN_UNSAFE_ACL_ID};

/// Children per parent.
const FANOUT: u64 = 1000;
/// The ctime of the first znode (ms since the epoch); later znodes add their zxid.
const TIME: i64 = 1_700_000_000_000;

fn node(data: Bytes, zxid: i64, time: i64, cversion: i32) -> ZkNode {
    ZkNode {
        data: Some(data),
        acl: 1,
        stat: StatPersisted {
            czxid: zxid,
            mzxid: zxid,
            ctime: time,
            mtime: time,
            cversion,
            pzxid: zxid,
            ..Default::default()
        },
        children: Default::default(),
    }
}

/// The tree ZooKeeper would hold after `n` creates (children of `data_bytes` bytes each),
/// with `config` as `/zookeeper/config`'s data.
pub fn tree(n: u64, data_bytes: usize, config: &str) -> ZkTree {
    let mut t = ZkTree::new();
    let open = t.acl_key(&[Acl::open_unsafe()]);
    assert_eq!(open, 1, "the open ACL is the tree's first");
    let system = |aversion| ZkNode {
        data: Some(Bytes::new()),
        acl: OPEN_UNSAFE_ACL_ID,
        stat: StatPersisted {
            aversion,
            ..Default::default()
        },
        children: Default::default(),
    };
    let parents = n.div_ceil(FANOUT);
    for (p, av) in [
        ("/zookeeper", 0),
        ("/zookeeper/quota", 0),
        ("/zookeeper/config", -1),
    ] {
        let mut n = system(av);
        if p == "/zookeeper/config" {
            n.data = Some(Bytes::copy_from_slice(config.as_bytes()));
        }
        t.insert(p.into(), n);
    }
    // The root's Stat is final before it goes in (the digest is kept as nodes go in).
    let mut root = system(0);
    root.stat.cversion = parents as i32;
    root.stat.pzxid = (parents + n) as i64;
    t.insert("/".into(), root);
    let data = Bytes::from(vec![b'x'; data_bytes]);
    let mut zxid = 0i64;
    for p in 0..parents {
        zxid += 1;
        let children = (n - p * FANOUT).min(FANOUT);
        t.insert(
            format!("/b{p:04}"),
            node(Bytes::new(), zxid, TIME, children as i32),
        );
        for c in 0..children {
            zxid += 1;
            t.insert(
                format!("/b{p:04}/n{c:04}"),
                node(data.clone(), zxid, TIME + zxid, 0),
            );
        }
    }
    t.link_children().expect("every parent exists");
    t.last_zxid = zxid;
    t
}

/// One member of an ensemble, for [`config_text`].
#[derive(Debug, Clone)]
pub struct ServerLine {
    pub id: u64,
    pub host: String,
    pub quorum_port: u16,
    pub election_port: u16,
    pub observer: bool,
    pub client_port: u16,
}

/// `/zookeeper/config` as ZooKeeper 3.5+ writes it for a static configuration:
/// `server.N=host:quorum:election:participant|observer;host:client` lines, then
/// `version=0`.
pub fn config_text(servers: &[ServerLine]) -> String {
    let mut out = String::new();
    for s in servers {
        out.push_str(&format!(
            "server.{}={}:{}:{}:{};{}:{}\n",
            s.id,
            s.host,
            s.quorum_port,
            s.election_port,
            if s.observer {
                "observer"
            } else {
                "participant"
            },
            s.host,
            s.client_port
        ));
    }
    out.push_str("version=0");
    out
}

/// What [`write()`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// The snapshot file (`dir/version-2/snapshot.<zxid>`).
    pub snapshot: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// The snapshot's zxid (its epoch is what `acceptedEpoch`/`currentEpoch` hold).
    pub zxid: i64,
}

/// Writes a ZooKeeper data directory (`dir/version-2/`: the snapshot of [`tree`]`(n,
/// data_bytes, config)`, uncompressed, and the two epoch files) into `dir`, which must not hold
/// ZooKeeper data yet. `config`: `/zookeeper/config`'s data (see [`config_text`]).
pub fn write(dir: &Path, n: u64, data_bytes: usize, config: &str) -> anyhow::Result<Written> {
    let t = tree(n, data_bytes, config);
    let zxid = t.last_zxid;
    let snapshot = zkdata::write_datadir(&t, dir, zkdata::Compression::None)?;
    let bytes = std::fs::metadata(&snapshot)?.len();
    Ok(Written {
        snapshot,
        bytes,
        zxid,
    })
}

/// Copies a directory tree (a data directory for one more server).
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.flatten() {
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()))?;
        } else {
            std::fs::copy(e.path(), to.join(e.file_name()))?;
        }
    }
    Ok(())
}

/// Peak resident memory (MB) of a running process (`VmHWM` of `/proc/<pid>/status`).
pub fn vm_hwm_mb(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_tree_is_written_with_its_epoch_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = config_text(&[ServerLine {
            id: 1,
            host: "127.0.0.1".into(),
            quorum_port: 2888,
            election_port: 3888,
            observer: false,
            client_port: 2181,
        }]);
        assert_eq!(
            config,
            "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\nversion=0"
        );
        let w = write(dir.path(), 2500, 8, &config).expect("write");
        // 3 parents and 2,500 children, one zxid each.
        assert_eq!(w.zxid, 2503);
        assert!(w.snapshot.ends_with("version-2/snapshot.9c7"));
        for f in ["acceptedEpoch", "currentEpoch"] {
            let text = std::fs::read_to_string(dir.path().join("version-2").join(f)).unwrap();
            assert_eq!(text, "0");
        }
        let copy = dir.path().join("copy");
        copy_dir(&dir.path().join("version-2"), &copy.join("version-2")).expect("copy");
        assert!(copy.join("version-2/snapshot.9c7").is_file());
    }
}
