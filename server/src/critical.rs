//! Threads the server cannot live without (the Raft loop, the log writer, the snapshot
//! writer). If one of them panics, the member must not linger as a zombie that accepts
//! connections and never answers: the whole process exits, so supervisors restart it and
//! clients move to another member.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::JoinHandle;

/// Exit status for an internal failure the process cannot recover from.
pub const EXIT_FATAL: i32 = 70;

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
                tracing::error!("thread {thread_name} panicked; stopping the server");
                eprintln!("zooraft: internal error in thread {thread_name}; stopping");
                std::process::exit(EXIT_FATAL);
            }
        })
}
