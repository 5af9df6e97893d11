//! Seeds, a small seeded random generator, the machine-wide monotonic clock, signals to
//! child processes and bounded waits: what every part of the chaos tests shares.

use std::future::Future;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// splitmix64: tiny and seedable, which is all that picking faults needs.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub(crate) fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo + 1))
    }

    pub(crate) fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }

    pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// The scenario's seed: `CHAOS_SEED` (decimal or 0x-hex) when set, otherwise a fresh one.
pub(crate) fn scenario_seed(name: &str) -> u64 {
    if let Ok(s) = std::env::var("CHAOS_SEED") {
        let s = s.trim();
        let parsed = match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => s.parse(),
        };
        return parsed.expect("CHAOS_SEED must be a decimal or 0x-hex number");
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut h = nanos ^ u64::from(std::process::id()).rotate_left(32);
    for b in name.bytes() {
        h = h.rotate_left(5) ^ u64::from(b);
    }
    Rng::new(h).next()
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine, so critical
/// sections logged by different contenders can be compared.
pub(crate) fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a child process this test spawned.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Scenarios run one at a time: each starts 3 or 5 servers and several client processes,
/// and on two cores two of them at once would turn every timeout into a coin toss.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) async fn bounded<T>(max: Duration, f: impl Future<Output = T>) -> Option<T> {
    tokio::time::timeout(max, f).await.ok()
}
