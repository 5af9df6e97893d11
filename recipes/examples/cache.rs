//! A local mirror of a subtree: a [`CuratorCache`] loads `/examples-config`, then follows
//! every change in order (on a persistent recursive watch where the server has them).
//!
//! ```text
//! cargo run -p zooraft-recipes --example cache -- 127.0.0.1:2181
//! ```

use std::time::Duration;

use zooraft_recipes::{
    CacheEvent, CreateMode, CuratorCache, Error, ErrorCode, ZkClient, ZookeeperClient,
};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let connect = std::env::args().nth(1).unwrap_or("127.0.0.1:2181".into());
    let client = ZookeeperClient::connect(&connect, Duration::from_secs(10)).await?;
    for (path, data) in [
        ("/examples-config", "v1"),
        ("/examples-config/db", "primary"),
    ] {
        match client
            .create(path, data.as_bytes(), CreateMode::Persistent)
            .await
        {
            Ok(_) | Err(ErrorCode::NodeExists) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let cache = CuratorCache::new(client.clone(), "/examples-config")?;
    let mut events = cache.listen();
    cache.start();
    cache.initialized().await?;
    // The initial load comes as events too, up to `Initialized`.
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(10), events.recv()).await {
        match event {
            CacheEvent::Created(n) => println!("initial {}", n.path),
            CacheEvent::Initialized => break,
            _ => {}
        }
    }
    println!("loaded {} nodes ({:?} watch)", cache.len(), cache.mode());
    // Changes made by anyone (here by us) reach the cache as events, in order.
    client
        .set_data("/examples-config/db", b"replica", -1)
        .await?;
    client
        .create("/examples-config/feature", b"on", CreateMode::Ephemeral)
        .await?;
    client.delete("/examples-config/feature", -1).await?;
    let mut seen = 0;
    while seen < 3 {
        let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(10), events.recv()).await
        else {
            return Err(Error::Disconnected);
        };
        match event {
            CacheEvent::Created(n) => println!("created {}", n.path),
            CacheEvent::Changed { old, new } => println!(
                "changed {}: {:?} -> {:?}",
                new.path,
                String::from_utf8_lossy(&old.data),
                String::from_utf8_lossy(&new.data)
            ),
            CacheEvent::Deleted(n) => println!("deleted {}", n.path),
            _ => continue,
        }
        seen += 1;
    }
    let db = cache.get("/examples-config/db").map(|n| n.data);
    println!(
        "cache holds {} nodes; db = {:?}",
        cache.len(),
        db.as_deref().map(String::from_utf8_lossy)
    );
    cache.close();
    client.close().await;
    Ok(())
}
