//! A fresh server: the initial tree (`/`, `/zookeeper`, `/zookeeper/quota`,
//! `/zookeeper/config`) with its Stats and data, and what writes to those special nodes do.

use crate::conformance::req::*;
use crate::conformance::runner::ServerSpec;
use crate::conformance::{Ctx, Res};

pub fn list() -> Vec<crate::conformance::Scenario> {
    vec![
        sc!(initial_tree, fresh ServerSpec::core()),
        sc!(special_nodes_writes, fresh ServerSpec::core()),
    ]
}

/// The initial tree as a client sees it.
async fn initial_tree(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    for p in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
        c.call("s1", get_children2(p, false)).await?;
        c.call("s1", get_data(p, false)).await?;
        c.call("s1", get_acl(p)).await?;
    }
    c.call("s1", exists("/zookeeper/missing", false)).await?;
    Ok(())
}

/// Creating, changing and deleting the root and the /zookeeper nodes.
async fn special_nodes_writes(c: &mut Ctx) -> Res {
    c.open("s1").await?;
    c.call("s1", create("/", b"", PERSISTENT)).await?;
    c.call("s1", create("/zookeeper", b"", PERSISTENT)).await?;
    c.call("s1", delete("/", -1)).await?;
    c.call("s1", delete("/zookeeper", -1)).await?;
    c.call("s1", delete("/zookeeper/quota", -1)).await?;
    c.call("s1", delete("/zookeeper/config", -1)).await?;
    c.call("s1", set_data("/", b"root data", -1)).await?;
    c.call("s1", set_data("/zookeeper/config", b"x", -1))
        .await?;
    c.call("s1", set_data("/zookeeper", b"x", -1)).await?;
    c.call("s1", create("/zookeeper/mine", b"", PERSISTENT))
        .await?;
    c.call("s1", create("/zookeeper/quota/mine", b"", PERSISTENT))
        .await?;
    c.call("s1", create("/s-", b"", PERSISTENT_SEQUENTIAL))
        .await?;
    c.call("s1", get_children2("/", false)).await?;
    c.call("s1", get_children2("/zookeeper", false)).await?;
    c.call("s1", get_data("/", false)).await?;
    Ok(())
}
