//! A local mirror of a subtree: a [`SubtreeCache`] loads `/examples-config`, then follows
//! every change in order (on a persistent recursive watch where the server has them).
//!
//! ```text
//! cargo run -p zooraft-recipes --example cache -- 127.0.0.1:2181
//! ```

use std::time::Duration;

use zooraft_recipes::{
    CacheEvent, CreateMode, Error, ErrorCode, SubtreeCache, ZkClient, ZookeeperClient,
};

/// The next change the cache reports (the initial load's and resync markers skipped).
async fn next_change(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<CacheEvent>,
) -> Result<CacheEvent, Error> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.recv()).await {
            Ok(Some(CacheEvent::Initialized | CacheEvent::Resynced)) => continue,
            Ok(Some(event)) => return Ok(event),
            // The cache stopped, or said nothing for 10 s.
            Ok(None) | Err(_) => return Err(Error::Disconnected),
        }
    }
}

fn print_event(event: CacheEvent) {
    match event {
        CacheEvent::Created(n) => println!("created {}", n.path),
        CacheEvent::Changed { old, new } => println!(
            "changed {}: {:?} -> {:?}",
            new.path,
            String::from_utf8_lossy(&old.data),
            String::from_utf8_lossy(&new.data)
        ),
        CacheEvent::Deleted(n) => println!("deleted {}", n.path),
        other => println!("{other:?}"),
    }
}

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
    let cache = SubtreeCache::new(client.clone(), "/examples-config")?;
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
    // Changes made by anyone (here by us) reach the cache as events, in order. Each change
    // waits for its event: a node created and deleted at once may be seen by a cache as
    // neither (it reads a node's data after the event, and the node is gone by then).
    client
        .set_data("/examples-config/db", b"replica", -1)
        .await?;
    print_event(next_change(&mut events).await?);
    client
        .create("/examples-config/feature", b"on", CreateMode::Persistent)
        .await?;
    print_event(next_change(&mut events).await?);
    client.delete("/examples-config/feature", -1).await?;
    print_event(next_change(&mut events).await?);
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
