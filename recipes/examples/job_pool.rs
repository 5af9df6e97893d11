//! A semaphore-limited job pool: eight jobs, at most two running at once across every
//! process that uses the same semaphore path (Curator's `InterProcessSemaphoreV2` layout,
//! so Java services can share the limit).
//!
//! ```text
//! cargo run -p zooraft-recipes --example job_pool -- 127.0.0.1:2181
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zooraft_recipes::{LockOptions, MaxLeases, Semaphore, ZkClient, ZookeeperClient};

const JOBS: usize = 8;
const MAX_RUNNING: usize = 2;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::args().nth(1).unwrap_or("127.0.0.1:2181".into());
    let client = ZookeeperClient::connect(&connect, Duration::from_secs(10)).await?;
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut jobs = Vec::new();
    for job in 0..JOBS {
        // A handle per job: each takes its own lease, as separate processes would.
        let sem = Semaphore::with_options(
            client.clone(),
            "/examples-pool/exports",
            MaxLeases::Fixed(MAX_RUNNING),
            LockOptions::default().node_data(format!("job-{job}")),
        )?;
        let (running, most) = (running.clone(), most.clone());
        jobs.push(tokio::spawn(async move {
            let lease = sem.acquire().await?;
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            println!("job {job} runs ({now} running)");
            tokio::time::sleep(Duration::from_millis(50)).await;
            running.fetch_sub(1, Ordering::SeqCst);
            lease.release().await
        }));
    }
    for j in jobs {
        j.await??;
    }
    println!(
        "{JOBS} jobs done, at most {} running at once (limit {MAX_RUNNING})",
        most.load(Ordering::SeqCst)
    );
    client.close().await;
    Ok(())
}
