//! A whole tree as clients see it (data, ACL and every Stat field of each node), read as
//! the super user, to compare two servers node by node: ZooKeeper and zooraft after an
//! import, or a ZooKeeper ensemble and the zooraft members that observe it.
//!
//! Both kinds of server run these tests with the same superDigest ([`SUPER_DIGEST`]), so
//! the dump reads every node whatever its ACL.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::rt::block_on;
use zookeeper_client as zc;

/// `super:secret`, as a superDigest.
pub const SUPER_DIGEST: &str = "super:lK75jTNcA+U9vtVEw5vB51mj/w4=";
const LIMIT: Duration = Duration::from_secs(120);

/// One node as clients see it: data, ACL and Stat (Debug-formatted to compare).
pub type Dump = BTreeMap<String, String>;

pub async fn super_client(hosts: &str) -> zc::Client {
    let c = crate::zc::connect(hosts, Duration::from_secs(20), LIMIT).await;
    c.auth("digest", b"super:secret")
        .await
        .expect("auth as super");
    c
}

/// Every node of the tree under `/`, as `super`.
pub fn dump(hosts: &str) -> Dump {
    block_on(async {
        let c = super_client(hosts).await;
        let mut out = Dump::new();
        let mut stack = vec!["/".to_string()];
        while let Some(path) = stack.pop() {
            let (data, stat) = match c.get_data(&path).await {
                Ok(v) => v,
                Err(zc::Error::NoNode) => continue,
                Err(e) => panic!("get_data {path}: {e}"),
            };
            let acl = match c.get_acl(&path).await {
                Ok((acl, _)) => acl,
                Err(zc::Error::NoNode) => continue,
                Err(e) => panic!("get_acl {path}: {e}"),
            };
            let (children, _) = match c.get_children(&path).await {
                Ok(v) => v,
                Err(zc::Error::NoNode) => continue,
                Err(e) => panic!("get_children {path}: {e}"),
            };
            out.insert(path.clone(), format!("{data:?} {acl:?} {stat:?}"));
            for child in children {
                stack.push(if path == "/" {
                    format!("/{child}")
                } else {
                    format!("{path}/{child}")
                });
            }
        }
        out
    })
}

/// Asserts two dumps are equal, naming the first differences.
pub fn assert_same(what: &str, expected: &Dump, found: &Dump, at_least: usize) {
    let mut diffs = Vec::new();
    for (p, v) in expected {
        match found.get(p) {
            None => diffs.push(format!("missing {p}")),
            Some(f) if f != v => diffs.push(format!("{p}:\n  expected {v}\n  found    {f}")),
            _ => {}
        }
    }
    for p in found.keys().filter(|p| !expected.contains_key(*p)) {
        diffs.push(format!("unexpected {p}"));
    }
    assert!(
        diffs.is_empty(),
        "{what}: {} of {} nodes differ; first ones:\n{}",
        diffs.len(),
        expected.len(),
        diffs[..diffs.len().min(8)].join("\n")
    );
    assert!(
        expected.len() >= at_least,
        "{what}: only {} nodes",
        expected.len()
    );
}
