//! Giving the memory the server has freed back to the system.
//!
//! glibc's malloc keeps freed memory for later allocations, resident, unless it lies at the
//! very top of a heap. Loading a snapshot frees a lot in the middle of the heaps: the
//! parser's batches, the log read at start-up, a decode dropped for another snapshot. A
//! million-znode server held 24 MiB (11%) more after a restart than it needed, all of it
//! free. Each snapshot the server takes frees its encoder's buffers the same way.
//! [`give_back_free_memory`] hands the free pages of every arena back (glibc's
//! `malloc_trim`), keeping the heaps' layout. It holds each arena's lock while it walks that
//! arena's free chunks, so it runs where a short wait of a thread that allocates does no
//! harm: on a thread of its own after start-up, on the snapshot thread after a snapshot,
//! and on a thread that gives back what a burst of writes left free once the writes stop
//! ([`give_back_when_quiet`]): the connections' buffers are freed in the middle of a heap
//! as well, and that thread first has RocksDB write its memtables out (up to 16 MiB,
//! holding the log of the burst) so that their memory is free to give back too.

use std::sync::Weak;
use std::time::{Duration, Instant};

/// How often [`give_back_when_quiet`] looks at the work counter.
const QUIET_CHECK: Duration = Duration::from_secs(2);

/// Returns the allocator's free pages to the system; how long it took. Does nothing
/// where the C library is not glibc.
pub fn give_back_free_memory() -> Duration {
    let started = Instant::now();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the allocator's own locks; it has no other precondition.
    unsafe {
        libc::malloc_trim(0);
    }
    started.elapsed()
}

/// [`give_back_and_log`] on a thread of its own.
pub fn give_back_in_background(why: &'static str) {
    let spawned = std::thread::Builder::new()
        .name("trim".into())
        .spawn(move || give_back_and_log(why));
    if let Err(e) = spawned {
        tracing::debug!("cannot start a thread to give free memory back: {e}");
    }
}

/// When to give memory back after a burst: the work counter moved since the last look, then
/// stood still for a whole look (the server went quiet). Under steady load it never says
/// so: the snapshots give back then.
#[derive(Debug, Default)]
struct QuietWatch {
    seen: u64,
    moved: bool,
}

impl QuietWatch {
    /// The counter reads `now`: whether to give memory back.
    fn look(&mut self, now: u64) -> bool {
        if now != self.seen {
            self.seen = now;
            self.moved = true;
            return false;
        }
        std::mem::take(&mut self.moved)
    }
}

/// Starts a thread that gives free memory back each time the server goes quiet after
/// work: `work` reads a counter of `owner`'s (e.g. entries applied), and `free_first` runs
/// just before memory is given back (e.g. flushing RocksDB's memtables, whose memory is
/// then free). The thread ends once `owner` is dropped; its handle, unless it could not
/// start.
pub fn give_back_when_quiet<T: Send + Sync + 'static>(
    owner: Weak<T>,
    work: fn(&T) -> u64,
    free_first: impl Fn() + Send + 'static,
) -> Option<std::thread::JoinHandle<()>> {
    let spawned = std::thread::Builder::new()
        .name("trim-quiet".into())
        .spawn(move || {
            let mut watch = QuietWatch::default();
            loop {
                std::thread::sleep(QUIET_CHECK);
                let Some(owner) = owner.upgrade() else { return };
                let now = work(&owner);
                drop(owner);
                if watch.look(now) {
                    free_first();
                    give_back_and_log("a burst of work");
                }
            }
        });
    spawned
        .map_err(|e| tracing::debug!("cannot start a thread to give free memory back: {e}"))
        .ok()
}

/// [`give_back_free_memory`], logging what it gave back (`why` says after what).
pub fn give_back_and_log(why: &str) {
    let before = resident_bytes();
    let took = give_back_free_memory();
    let freed = before
        .zip(resident_bytes())
        .map_or(0, |(b, a)| b.saturating_sub(a));
    tracing::debug!(
        freed_bytes = freed,
        ms = took.as_millis() as u64,
        "free memory given back to the system after {why}"
    );
}

/// The process's resident set in bytes, if `/proc` tells.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gives_back_once_after_each_burst() {
        let mut w = QuietWatch::default();
        assert!(!w.look(0), "nothing done yet");
        assert!(!w.look(0));
        assert!(!w.look(5), "working");
        assert!(!w.look(9), "still working");
        assert!(w.look(9), "quiet after work");
        assert!(!w.look(9), "once per burst");
        assert!(!w.look(10));
        assert!(w.look(10));
    }

    #[test]
    fn the_quiet_thread_ends_with_its_owner() {
        let owner = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let thread = give_back_when_quiet(
            std::sync::Arc::downgrade(&owner),
            |c| c.load(std::sync::atomic::Ordering::Relaxed),
            || {},
        )
        .expect("the thread starts");
        drop(owner);
        // It notices at its next look; the bound is only there so that a thread that
        // never ends fails the test instead of hanging it.
        let (done, ended) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(thread.join().is_ok()));
        assert_eq!(
            ended.recv_timeout(QUIET_CHECK * 15),
            Ok(true),
            "the thread ended, without a panic, once its owner was gone"
        );
    }

    /// Frees about 56 MB scattered over a heap and returns the resident set's drop when
    /// [`give_back_free_memory`] runs.
    fn scattered_frees_then_give_back() -> u64 {
        // Small blocks (below the mmap threshold) come from a heap; keep one in eight so
        // the free memory is scattered, not at the top, and cannot go back by itself.
        let mut blocks: Vec<Vec<u8>> = (0..16_000).map(|i| vec![i as u8; 4000]).collect();
        let mut kept = Vec::new();
        for (i, b) in blocks.drain(..).enumerate() {
            if i % 8 == 7 {
                kept.push(b);
            }
        }
        let before = resident_bytes().unwrap_or(0);
        give_back_free_memory();
        let after = resident_bytes().unwrap_or(u64::MAX);
        assert_eq!(kept.len(), 2_000);
        before.saturating_sub(after)
    }

    #[test]
    fn freed_memory_in_the_middle_of_the_heap_is_given_back() {
        // The runs of 28 KB freed between kept blocks hold whole pages, which go back. Other
        // tests allocate in this process meanwhile: one attempt of three must see it.
        let drops: Vec<u64> = (0..3).map(|_| scattered_frees_then_give_back()).collect();
        assert!(
            drops.iter().any(|&d| d > 10 << 20),
            "resident set drops: {drops:?}"
        );
    }
}
