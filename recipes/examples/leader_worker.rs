//! A leader-elected worker: three participants, one leader at a time.
//!
//! Each participant joins a [`LeaderLatch`], does one term of work while it leads (the
//! leadership's fencing token stamps what it does), then steps down so the next takes over.
//! A real worker would lead until [`lost`](zooraft_recipes::LockGuard::lost) fires; here
//! each leads once so the program ends.
//!
//! ```text
//! cargo run -p zooraft-recipes --example leader_worker -- 127.0.0.1:2181
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zooraft_recipes::{Error, LeaderLatch, ZkClient, ZookeeperClient};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::args().nth(1).unwrap_or("127.0.0.1:2181".into());
    let leading = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for id in ["worker-1", "worker-2", "worker-3"] {
        let (connect, leading) = (connect.clone(), leading.clone());
        workers.push(tokio::spawn(async move {
            // One session per participant, as separate processes would have.
            let client = ZookeeperClient::connect(&connect, Duration::from_secs(10)).await?;
            let latch = LeaderLatch::new(client.clone(), "/examples-election/worker", id);
            let leadership = latch.await_leadership().await?;
            let at_once = leading.fetch_add(1, Ordering::SeqCst) + 1;
            println!(
                "{id} leads with token {} ({at_once} leading)",
                leadership.fencing_token()
            );
            tokio::select! {
                reason = leadership.lost() => println!("{id} lost the leadership: {reason}"),
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            leading.fetch_sub(1, Ordering::SeqCst);
            leadership.release().await?;
            println!("{id} stepped down");
            client.close().await;
            Ok::<_, Error>(at_once)
        }));
    }
    let mut most = 0;
    for w in workers {
        let at_once = w.await??;
        most = most.max(at_once);
    }
    println!("at most {most} leader at a time");
    Ok(())
}
