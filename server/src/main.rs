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
        let server = Server::start(config).await?;
        wait_for_signal().await;
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

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
