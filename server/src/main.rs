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
use zooraft::config::Overrides;
use zooraft::server::Server;

/// The top-level help after the flags (`--help` only).
const EXAMPLES: &str = "\
Examples:
  zooraft
      A standalone server on 127.0.0.1:2181 with its data in ./data.
  zooraft /etc/zooraft/zoo.cfg
      The server zoo.cfg describes (zkServer.sh takes it the same way).
  zooraft --config zoo.cfg --port 2281 --4lw-whitelist '*'
      zoo.cfg, with clientPort and 4lw.commands.whitelist overridden.
  zooraft --data-dir /var/lib/zk2 --myid 2 --server 1=zk1:2888 \\
      --server 2=zk2:2888 --server 3=zk3:2888 --address 0.0.0.0
      Member 2 of a three-member ensemble, without a zoo.cfg.
  zooraft help import
      How to take over an Apache ZooKeeper's data.

SIGTERM or SIGINT stops the server gracefully (a leader hands over first) and it exits 0.
It exits 2 when the configuration is unusable, 1 when it cannot start or fails.
RUST_LOG sets what it logs (default: info,raft=warn); MALLOC_ARENA_MAX, glibc's malloc
arenas (default here: 2).";

#[derive(Parser)]
#[command(
    name = "zooraft",
    version,
    about = "A ZooKeeper-compatible coordination service on Raft and RocksDB",
    long_about = "\
A ZooKeeper-compatible coordination service on Raft and RocksDB.

Without a subcommand, zooraft runs a server: Apache ZooKeeper's client protocol, four-letter
words and zoo.cfg keys, with writes ordered by Raft and stored in RocksDB under dataDir. It
reads a ZooKeeper zoo.cfg (positional, as zkServer.sh takes it, or --config); each flag
below overrides the same key. With neither, it serves standalone on 127.0.0.1:2181 with
its data in ./data. An ensemble member reads its id from dataDir/myid unless --myid says.

The subcommands move state in and out: import (from a stopped Apache ZooKeeper), export
(back to one), backup (from a running member), restore (from a backup), and migrate (a live
migration from a running ZooKeeper ensemble).",
    after_long_help = EXAMPLES
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
    #[command(
        long_about = "\
Import a stopped Apache ZooKeeper's data directory into a new zooraft store.

Restores ZooKeeper's newest snapshot and replays its transaction logs in memory (ZooKeeper
3.5 to 3.9), checking its digests, and only a state that restored cleanly is written: as the
store of the server the configuration describes, whose dataDir must hold no store yet. Stop
ZooKeeper first. A zooraft member started on the store continues the zxids above the
imported ones. In an ensemble, import into one member; the others start empty and receive
the state from the leader. The configuration flags are the server's (zooraft --help).",
        after_long_help = "\
Examples:
  zooraft import --from /var/lib/zookeeper --config /etc/zooraft/zoo.cfg
  zooraft import --from /var/lib/zookeeper/data --log-dir /var/lib/zookeeper/txlog \\
      --data-dir ./data"
    )]
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
    #[command(
        long_about = "\
Export a stopped member's state as a ZooKeeper data directory (the way back).

Opens the store of the server the configuration describes (stop it first) and writes its
state as a ZooKeeper snapshot with its digest, and the epoch files, under DIR/version-2/
(DIR is created if missing; refused if it holds ZooKeeper data). Apache ZooKeeper 3.8
started with dataDir=DIR has the same tree, Stats, ACLs and sessions. The
configuration flags are the server's (zooraft --help).",
        after_long_help = "\
Examples:
  zooraft export --to /var/lib/zookeeper --config /etc/zooraft/zoo.cfg
  zooraft export --to ./zk-data --compression gz --data-dir ./data"
    )]
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
    #[command(
        long_about = "\
Take a consistent backup of a running member over its admin port.

Asks the member's AdminServer (GET /commands/snapshot) for its state exactly as of its
last applied zxid, taken while it keeps serving, and writes it to FILE with the zxid, the
tree's digest and a SHA-1 of the state. zooraft restore writes a new store from the file.

The member checks the caller as ZooKeeper 3.9 checks its snapshot command: --auth names
a digest user (USER:PASSWORD) or `ip` (the caller's address), and that id must hold every
permission on the root znode's ACL (the super user always does).",
        after_long_help = "\
Examples:
  zooraft backup --server 127.0.0.1:8080 --out zooraft.backup --auth ip
  zooraft backup --server zk1:8080 --out /backups/zk1.backup --auth super:secret"
    )]
    Backup {
        /// The member's admin address (admin.serverAddress:admin.serverPort).
        #[arg(long, value_name = "HOST:PORT")]
        server: String,
        /// File to write.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// A digest user (`super:<password>`, or any user the root ACL grants ALL), or `ip`.
        #[arg(long, value_name = "USER:PASSWORD|ip")]
        auth: Option<String>,
    },
    /// Write a new store from a backup (the member stopped, its store empty).
    #[command(
        long_about = "\
Write a new store from a backup (the member stopped, its store empty).

Checks the file written by zooraft backup and writes its state as the store of the server
the configuration describes; its dataDir must hold no store yet. Start the server on it
afterwards. In an ensemble, restore one member and start the others empty: they receive
the state from the leader. The configuration flags are the server's (zooraft --help).",
        after_long_help = "\
Examples:
  zooraft restore zooraft.backup --config /etc/zooraft/zoo.cfg
  zooraft restore /backups/zk1.backup --data-dir ./data"
    )]
    Restore {
        /// The backup file.
        file: PathBuf,
        #[command(flatten)]
        overrides: Overrides,
    },
    /// A live migration from a running ZooKeeper ensemble that zooraft members observe
    /// (`migrateFromZooKeeper=true`).
    #[command(
        long_about = "\
A live migration from a running ZooKeeper ensemble that zooraft members observe.

zooraft members started with migrateFromZooKeeper=true join a running Apache ZooKeeper
ensemble as observers (their server lines say :observer) and follow its writes. `status`
shows how far each member is; `cutover` turns the zooraft members into a Raft ensemble at
ZooKeeper's last zxid, keeping their clients connected.",
        after_long_help = "\
Examples:
  zooraft migrate status --server zk1:2181
  zooraft migrate cutover --server zooraft1:2181"
    )]
    Migrate {
        #[command(subcommand)]
        step: Migrate,
    },
    /// Write the man pages (zooraft.1 and one per command) into DIR (for packaging).
    #[command(
        hide = true,
        long_about = "\
Write the man pages (zooraft.1 and one per command) into DIR (for packaging).

Each page is rendered from the same text as the command's --help, so the two cannot
differ; scripts/package compresses them into the Debian package's /usr/share/man/man1.",
        after_long_help = "\
Examples:
  zooraft manpages /tmp/man && man -l /tmp/man/zooraft-backup.1"
    )]
    Manpages {
        /// Where to write them.
        dir: PathBuf,
    },
}

#[derive(clap::Subcommand)]
enum Migrate {
    /// What every member of the ensemble is, follows, and how far behind it is.
    #[command(
        long_about = "\
What every member of the ensemble is, follows, and how far behind it is.

Reads the ensemble's members from the member at --server (its /zookeeper/config), then
asks each (srvr, and mntr for a zooraft member) for its mode, zxid and client connections,
and a zooraft member for its migration phase, lag and pending writes. Changes nothing.",
        after_long_help = "\
Examples:
  zooraft migrate status --server 127.0.0.1:2181"
    )]
    Status {
        /// A member's client address (any zooraft or ZooKeeper member).
        #[arg(long, value_name = "HOST:PORT")]
        server: String,
    },
    /// Turn the zooraft members into a Raft ensemble at ZooKeeper's last zxid, with their
    /// clients connected.
    #[command(
        long_about = "\
Turn the zooraft members into a Raft ensemble at ZooKeeper's last zxid, with their clients
connected.

Checks that every zooraft member follows ZooKeeper within --max-lag transactions of its
leader and, unless --force, that no client is still connected to a ZooKeeper member
(nothing changes if a check fails). Then, through the member at --server, it prepares the
cut-over, waits until every zooraft member holds its clients' writes with none left
unanswered, and commits: the zooraft members continue as a Raft ensemble from ZooKeeper's
last zxid, and the held writes go on there. Without the commit within --timeout-ms, the
held writes go to ZooKeeper, which stays in charge.",
        after_long_help = "\
Examples:
  zooraft migrate cutover --server 127.0.0.1:2181
  zooraft migrate cutover --server zooraft1:2181 --timeout-ms 3000 --max-lag 100"
    )]
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
        #[arg(long, value_name = "MS", default_value_t = 5_000)]
        timeout_ms: u64,
        /// How many transactions a zooraft member may be behind ZooKeeper's leader.
        #[arg(long, value_name = "N", default_value_t = 1_000)]
        max_lag: u64,
    },
}

/// Writes a man page per command (`zooraft.1`, `zooraft-backup.1`, `zooraft-migrate-status.1`,
/// ...) into `dir`, from the same text as `--help` (the Debian package ships them).
fn man_pages(dir: &std::path::Path) -> anyhow::Result<()> {
    fn write(dir: &std::path::Path, name: &str, cmd: clap::Command) -> anyhow::Result<()> {
        let cmd = cmd
            .display_name(name.to_string())
            .bin_name(name.replace('-', " "))
            .version(env!("CARGO_PKG_VERSION"));
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
        std::fs::write(dir.join(format!("{name}.1")), page)?;
        let pages = cmd.get_subcommands();
        for sub in pages.filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let sub_name = format!("{name}-{}", sub.get_name());
            write(dir, &sub_name, sub.clone())?;
        }
        Ok(())
    }
    std::fs::create_dir_all(dir)?;
    let mut cli = <Cli as clap::CommandFactory>::command();
    cli.build();
    write(dir, "zooraft", cli)
}

/// Runs a subcommand; its report goes to stdout.
fn run_command(command: Command) -> std::process::ExitCode {
    let config = |o: &Overrides| o.load().map_err(|e| anyhow::anyhow!("{e}"));
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
        Command::Manpages { dir } => man_pages(&dir),
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
    let config = match cli.overrides.load() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every command's path below `zooraft` (the root's is empty), built, without clap's
    /// own `help` subcommand.
    fn commands() -> Vec<(Vec<String>, clap::Command)> {
        fn walk(
            cmd: &clap::Command,
            path: Vec<String>,
            out: &mut Vec<(Vec<String>, clap::Command)>,
        ) {
            out.push((path.clone(), cmd.clone()));
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                let mut p = path.clone();
                p.push(sub.get_name().to_string());
                walk(sub, p, out);
            }
        }
        let mut root = Cli::command();
        root.build();
        let mut out = Vec::new();
        walk(&root, Vec::new(), &mut out);
        out
    }

    #[test]
    fn the_command_tree_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_command_and_argument_is_documented() {
        let commands = commands();
        assert!(commands.len() >= 8, "{} commands", commands.len());
        for (path, cmd) in commands {
            let name = format!("zooraft {}", path.join(" "));
            assert!(cmd.get_about().is_some(), "{name}: no about");
            assert!(cmd.get_long_about().is_some(), "{name}: no long_about");
            let examples = cmd.get_after_long_help().map(|h| h.to_string());
            assert!(
                examples.is_some_and(|h| h.starts_with("Examples:")),
                "{name}: no examples after the long help"
            );
            let mut argv = vec!["zooraft".to_string()];
            argv.extend(path.iter().cloned());
            argv.push("--help".into());
            let err = match Cli::command().try_get_matches_from(&argv) {
                Ok(_) => panic!("{name} --help parsed as a command"),
                Err(e) => e,
            };
            assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp, "{name}");
            assert_eq!(err.exit_code(), 0, "{name} --help");
            let help = err.to_string();
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                assert!(
                    arg.get_help().is_some() || arg.get_long_help().is_some(),
                    "{name}: argument {id} has no help"
                );
                let shown = match arg.get_long() {
                    Some(long) => format!("--{long}"),
                    // A positional shows its value name (`[ZOO_CFG]`, `<FILE>`).
                    None => arg
                        .get_value_names()
                        .and_then(|v| v.first())
                        .map_or(id.to_uppercase(), |v| v.to_string()),
                };
                assert!(
                    help.contains(&shown),
                    "{name} --help does not show {shown}:\n{help}"
                );
            }
        }
    }

    #[test]
    fn version_is_the_crates() {
        let err = match Cli::command().try_get_matches_from(["zooraft", "--version"]) {
            Ok(_) => panic!("--version parsed as a command"),
            Err(e) => e,
        };
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion);
        assert_eq!(err.exit_code(), 0);
        assert_eq!(
            err.to_string(),
            format!("zooraft {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}
