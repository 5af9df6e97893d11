//! The `zooraft` binary: a ZooKeeper-compatible server.
//!
//! `zooraft` alone serves on 127.0.0.1:2181 with its data under ./data. `zooraft zoo.cfg`
//! or `zooraft --config zoo.cfg` reads a ZooKeeper configuration; flags override it.

use clap::Parser;
use zooraft::config::{Config, Overrides};
use zooraft::server::Server;

#[derive(Parser)]
#[command(
    name = "zooraft",
    version,
    about = "A ZooKeeper-compatible coordination service on Raft and RocksDB"
)]
struct Cli {
    #[command(flatten)]
    overrides: Overrides,
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,raft=warn".into()),
        )
        .with_target(false)
        .init();
    let cli = Cli::parse();
    let config = match Config::load(&cli.overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zooraft: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("zooraft: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result: anyhow::Result<()> = runtime.block_on(async move {
        // Handlers first: a SIGTERM that arrives while the server starts (its port may
        // already accept) must stop it gracefully, not kill it.
        let stop = stop_signal()?;
        let server = Server::start(config).await?;
        stop.await;
        tracing::info!("shutting down");
        server.stop().await;
        Ok(())
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zooraft: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Registers SIGTERM and SIGINT now; the future resolves when either arrives.
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use anyhow::Context as _;
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    })
}
