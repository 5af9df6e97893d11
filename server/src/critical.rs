//! What the server cannot live without, and how it stops when it loses it.
//!
//! Threads the server cannot live without (the Raft loop, the log writer, the snapshot
//! worker) run through [`spawn`]: if one panics, the member must not linger as a zombie that
//! accepts connections and never answers, so the whole process exits, supervisors restart
//! it and clients move to another member. [`fatal`] is the one way out for a failure the
//! member must not carry on after (a log write that failed, an entry that cannot be
//! decoded, an unusable snapshot from the leader).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::JoinHandle;

/// Exit status for an internal failure the process cannot recover from.
pub const EXIT_FATAL: i32 = 70;

/// Logs why, and ends the process with [`EXIT_FATAL`].
pub fn fatal(why: impl std::fmt::Display) -> ! {
    tracing::error!("{why}; stopping");
    eprintln!("zooraft: {why}; stopping");
    std::process::exit(EXIT_FATAL)
}

/// Spawns `f` on a named thread; a panic in it ends the process.
pub fn spawn<F>(name: &str, f: F) -> std::io::Result<JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    let thread_name = name.to_string();
    std::thread::Builder::new()
        .name(thread_name.clone())
        .spawn(move || {
            if catch_unwind(AssertUnwindSafe(f)).is_err() {
                fatal(format_args!("internal error in thread {thread_name}"));
            }
        })
}
