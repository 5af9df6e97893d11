//! A fenced write to a resource outside ZooKeeper, and one to ZooKeeper itself.
//!
//! Two workers take turns on one lock. Each write to the "store" (a stand-in for a
//! database or a file server: anything that can remember the highest token it accepted)
//! carries the lock's fencing token, and the store's [`Fence`] refuses a token older than
//! one it has seen. Last, a write stamped with the first worker's token, as a holder that
//! was paused past its session would send it, is refused.
//!
//! ```text
//! cargo run -p zooraft-recipes --example fenced_write -- 127.0.0.1:2181
//! ```

use std::sync::Arc;
use std::time::Duration;

use zooraft_recipes::{CreateMode, Error, Fence, FencingToken, Mutex, ZkClient, ZookeeperClient};

/// The resource: accepts a write only with a token at least as new as every one it saw.
struct Store {
    fence: Fence,
}

impl Store {
    fn write(&self, token: FencingToken, what: &str) -> bool {
        match self.fence.check(token) {
            Ok(()) => {
                println!("store: accepted {what:?} with token {token}");
                true
            }
            Err(stale) => {
                println!(
                    "store: refused {what:?}: token {token} is older than {}",
                    stale.highest
                );
                false
            }
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let connect = std::env::args().nth(1).unwrap_or("127.0.0.1:2181".into());
    let client = ZookeeperClient::connect(&connect, Duration::from_secs(10)).await?;
    // The node the fenced ZooKeeper write changes.
    match client
        .create("/examples-orders", b"0", CreateMode::Persistent)
        .await
    {
        Ok(_) | Err(zooraft_recipes::ErrorCode::NodeExists) => {}
        Err(e) => return Err(e.into()),
    }
    let store = Arc::new(Store {
        fence: Fence::new(),
    });
    let lock = Mutex::new(client.clone(), "/examples-locks/orders");
    let mut tokens = Vec::new();
    for worker in ["worker-a", "worker-b"] {
        let guard = lock.acquire().await?;
        let token = guard.fencing_token();
        store.write(token, worker);
        // A write to ZooKeeper applied only while our lock node exists (a multi that checks
        // it): a holder that lost the lock cannot make it.
        let stat = guard
            .fenced_set_data("/examples-orders", worker.as_bytes(), -1)
            .await?;
        println!(
            "zookeeper: {worker} set /examples-orders (version {})",
            stat.version
        );
        tokens.push(token);
        guard.release().await?;
    }
    // The first holder, woken from a long pause, still believes it holds the lock.
    let refused = !store.write(tokens[0], "worker-a, after a pause");
    println!(
        "tokens increased: {}; stale write refused: {refused}",
        tokens[1] > tokens[0]
    );
    client.close().await;
    Ok(())
}
