//! The `zooraft` binary: a ZooKeeper-compatible server.
//!
//! `zooraft` alone serves on 127.0.0.1:2181 with its data under ./data. `zooraft zoo.cfg`
//! or `zooraft --config zoo.cfg` reads a ZooKeeper configuration; flags override it.
//!
//! Subcommands move state in and out (see `zooraft::migrate`): `import` (from an Apache
//! ZooKeeper data directory), `export` (to one), `backup` (from a running member) and
//! `restore` (from a backup).

use std::path::PathBuf;

use clap::Parser;
use zooraft::config::{Config, Overrides};
use zooraft::server::Server;

#[derive(Parser)]
#[command(
    name = "zooraft",
    version,
    about = "A ZooKeeper-compatible coordination service on Raft and RocksDB"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(flatten)]
    overrides: Overrides,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Import a stopped Apache ZooKeeper's data directory into a new zooraft store.
    Import {
        /// ZooKeeper's dataDir (or its version-2 folder).
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        /// ZooKeeper's dataLogDir, if the logs are kept apart from the snapshots.
        #[arg(long = "log-dir", value_name = "DIR")]
        log_dir: Option<PathBuf>,
        #[command(flatten)]
        overrides: Overrides,
    },
    /// Export a stopped member's state as a ZooKeeper data directory (the way back).
    Export {
        /// Directory to write (dataDir for ZooKeeper; version-2/ is created inside).
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        /// Snapshot compression: none, gz or snappy.
        #[arg(long, default_value = "none")]
        compression: String,
        #[command(flatten)]
        overrides: Overrides,
    },
    /// Take a consistent backup of a running member over its admin port.
    Backup {
        /// The member's admin address (admin.serverAddress:admin.serverPort).
        #[arg(long, value_name = "HOST:PORT")]
        server: String,
        /// File to write.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// `super:<password>`, when the member has a superDigest.
        #[arg(long, value_name = "USER:PASSWORD")]
        auth: Option<String>,
    },
    /// Write a new store from a backup (the member stopped, its store empty).
    Restore {
        /// The backup file.
        file: PathBuf,
        #[command(flatten)]
        overrides: Overrides,
    },
    /// A live migration from a running ZooKeeper ensemble that zooraft members observe
    /// (`migrateFromZooKeeper=true`).
    Migrate {
        #[command(subcommand)]
        step: Migrate,
    },
}

#[derive(clap::Subcommand)]
enum Migrate {
    /// What every member of the ensemble is, follows, and how far behind it is.
    Status {
        /// A member's client address (any zooraft or ZooKeeper member).
        #[arg(long, value_name = "HOST:PORT")]
        server: String,
    },
    /// Turn the zooraft members into a Raft ensemble at ZooKeeper's last zxid, with their
    /// clients connected.
    Cutover {
        /// A zooraft member's client address.
        #[arg(long, value_name = "HOST:PORT")]
        server: String,
        /// Cut over although ZooKeeper members still have clients (what they write after
        /// the cut-over is not in zooraft).
        #[arg(long)]
        force: bool,
        /// How long members hold writes waiting for the commit (milliseconds); keep it
        /// below two thirds of the clients' shortest session timeout, or a client whose
        /// write is held that long drops its connection (and resumes its session).
        #[arg(long, default_value_t = 5_000)]
        timeout_ms: u64,
        /// How many transactions a zooraft member may be behind ZooKeeper's leader.
        #[arg(long, default_value_t = 1_000)]
        max_lag: u64,
    },
}

/// Runs a subcommand; its report goes to stdout.
fn run_command(command: Command) -> std::process::ExitCode {
    let config = |o: &Overrides| Config::load(o).map_err(|e| anyhow::anyhow!("{e}"));
    let mut out = std::io::stdout();
    let result = match command {
        Command::Import {
            from,
            log_dir,
            overrides,
        } => config(&overrides).and_then(|c| {
            zooraft::migrate::import(
                &c,
                &zooraft::migrate::ImportOptions { from, log_dir },
                &mut out,
            )
        }),
        Command::Export {
            to,
            compression,
            overrides,
        } => match zkdata::Compression::from_method(if compression == "none" {
            ""
        } else {
            &compression
        }) {
            Some(kind) => {
                config(&overrides).and_then(|c| zooraft::migrate::export(&c, &to, kind, &mut out))
            }
            None => Err(anyhow::anyhow!("--compression must be none, gz or snappy")),
        },
        Command::Backup {
            server,
            out: file,
            auth,
        } => zooraft::migrate::backup(&server, auth.as_deref(), &file, &mut out),
        Command::Restore { file, overrides } => {
            config(&overrides).and_then(|c| zooraft::migrate::restore(&c, &file, &mut out))
        }
        Command::Migrate {
            step: Migrate::Status { server },
        } => zooraft::zab::status(&server, &mut out),
        Command::Migrate {
            step:
                Migrate::Cutover {
                    server,
                    force,
                    timeout_ms,
                    max_lag,
                },
        } => zooraft::zab::cutover(
            &server,
            &zooraft::zab::CutoverOptions {
                force,
                timeout: std::time::Duration::from_millis(timeout_ms),
                max_lag,
            },
            &mut out,
        ),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zooraft: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn main() -> std::process::ExitCode {
    limit_malloc_arenas();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,raft=warn".into()),
        )
        .with_target(false)
        .init();
    let cli = Cli::parse();
    if let Some(command) = cli.command {
        return run_command(command);
    }
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

/// How many malloc arenas glibc may create (unless `MALLOC_ARENA_MAX` says otherwise).
const MALLOC_ARENAS: libc::c_int = 2;

/// Caps glibc's malloc arenas before any thread starts. By default glibc gives threads up to
/// eight arenas per core, and each keeps the memory freed into it for its own later use:
/// the tree's blocks, allocated by the Raft thread and the loader threads and freed by
/// others, left about 12 bytes per znode unused but held at a million znodes (258 against
/// 246 bytes per znode with two arenas, 244 with one). Small allocations go through each
/// thread's cache first, so two arenas are no lock contention for a server whose hot paths
/// run on a handful of threads. An operator's own `MALLOC_ARENA_MAX` wins.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a malloc parameter; called before any other thread.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
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
