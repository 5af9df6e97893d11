//! `zooraft-bench compare | run | locks`: see the library docs (`zooraft_bench`) for what each does.

use std::process::ExitCode;

use clap::Parser;
use zooraft_bench::cli::{Cli, Command};
use zooraft_bench::runner;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let finished = match &cli.command {
        Command::Compare(args) => runner::compare(args),
        Command::Run(args) => runner::run(args),
        Command::Locks(args) => zooraft_bench::locks::run(args),
    };
    match finished {
        Ok(f) => {
            println!("{}", f.markdown);
            println!("JSON results: {}", f.json_path.display());
            if f.problems > 0 {
                eprintln!(
                    "zooraft-bench: {} error(s) or failed run(s); see the tables above",
                    f.problems
                );
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("zooraft-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}
