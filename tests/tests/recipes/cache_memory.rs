//! What a SubtreeCache costs per cached node: a subtree of 10,101 nodes on zooraft, cached
//! in a fresh process (`lock-contender cache-memory`) with the persistent recursive watch and
//! with one-shot watches, and by Curator's CuratorCache in a Java process. Each prints its
//! figures (run with `--nocapture` to see them); the test checks every cache loaded the
//! whole subtree and that ours stays within a bound per node.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::Command;
use tokio::task::JoinSet;
use zooraft_recipes::{CreateMode, ZkClient};
use zooraft_tests::ServerKind;

use common::{client, contender, server};

const DIRS: usize = 100;
const LEAVES: usize = 100;
/// The subtree: its root, the directories and their leaves.
const NODES: usize = 1 + DIRS + DIRS * LEAVES;
/// Far above what a cached node needs (its path, 32 bytes of data, a Stat, two watches):
/// a cache that kept copies or leaked per event would cross it.
const MAX_BYTES_PER_NODE: f64 = 8192.0;

async fn build_tree(c: &Arc<dyn ZkClient>, root: &str) {
    c.create(root, b"root", CreateMode::Persistent)
        .await
        .expect("root");
    for d in 0..DIRS {
        c.create(&format!("{root}/d{d:03}"), b"dir", CreateMode::Persistent)
            .await
            .expect("dir");
    }
    // The leaves, many requests in flight at once.
    let mut pending = JoinSet::new();
    for d in 0..DIRS {
        for l in 0..LEAVES {
            let c = c.clone();
            let path = format!("{root}/d{d:03}/leaf-{l:03}");
            pending.spawn(async move {
                c.create(&path, &[b'x'; 32], CreateMode::Persistent)
                    .await
                    .expect("leaf")
            });
            if pending.len() >= 64 {
                pending.join_next().await.expect("task").expect("create");
            }
        }
    }
    while let Some(r) = pending.join_next().await {
        r.expect("create");
    }
}

/// `key=value` fields of the line starting with `tag`.
fn fields(out: &std::process::Output, tag: &str) -> BTreeMap<String, String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{tag} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with(tag))
        .unwrap_or_else(|| panic!("no {tag} line in {stdout}"));
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn run(mut cmd: Command) -> std::process::Output {
    cmd.kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(300), cmd.output())
        .await
        .expect("finishes in time")
        .expect("runs")
}

async fn memory(kind: ServerKind) {
    let server = server(kind);
    let cs = server.connect_string();
    let writer = client(&cs).await;
    let root = "/cache-memory";
    build_tree(&writer, root).await;
    for mode in ["auto", "one-shot"] {
        let mut probe = Command::new(contender());
        probe.args(["cache-memory", &cs, root, mode]);
        let f = fields(&run(probe).await, "cache-memory");
        eprintln!("zooraft-recipes SubtreeCache ({mode}): {f:?}");
        assert_eq!(f["nodes"], NODES.to_string(), "{mode}: the whole subtree");
        let per_node: f64 = f["bytes_per_node"].parse().expect("a number");
        assert!(
            per_node < MAX_BYTES_PER_NODE,
            "{mode}: {per_node} bytes per node"
        );
    }
    let mut curator: Command = zooraft_tests::java::java_command("CuratorCacheMemory").into();
    curator.args([&cs, root]);
    let f = fields(&run(curator).await, "curator-cache-memory");
    eprintln!("Curator CuratorCache: {f:?}");
    assert_eq!(f["nodes"], NODES.to_string(), "Curator: the whole subtree");
    writer.close().await;
}

#[test]
fn cache_memory_per_node_zooraft() {
    common::run(ServerKind::Zooraft, memory)
}
