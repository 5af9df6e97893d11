//! Request counters of this member behind `srvr`, `stat`, `mntr` and the Prometheus endpoint.
//!
//! Everything is an atomic updated on the request path without locks: packet counts,
//! latency min/avg/max (as ZooKeeper reports them, in milliseconds), and per-operation
//! latency histograms with fixed buckets.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::state::ops::{self, OpFamily};

/// Histogram bucket upper bounds, in microseconds.
pub const BUCKETS_US: [u64; 14] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 5_000_000,
];

#[derive(Default)]
pub struct Histogram {
    pub buckets: [AtomicU64; BUCKETS_US.len() + 1],
    pub sum_us: AtomicU64,
    pub count: AtomicU64,
}

impl Histogram {
    fn record(&self, us: u64) {
        let i = BUCKETS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(BUCKETS_US.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

/// See the module docs.
pub struct Metrics {
    pub started: Instant,
    pub packets_received: AtomicU64,
    pub packets_sent: AtomicU64,
    pub connections_total: AtomicU64,
    min_latency_us: AtomicU64,
    max_latency_us: AtomicU64,
    total_latency_us: AtomicU64,
    latency_count: AtomicU64,
    /// One histogram per [`OpFamily`], by its index.
    pub per_op: [Histogram; OpFamily::ALL.len()],
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            started: Instant::now(),
            packets_received: AtomicU64::new(0),
            packets_sent: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            min_latency_us: AtomicU64::new(u64::MAX),
            max_latency_us: AtomicU64::new(0),
            total_latency_us: AtomicU64::new(0),
            latency_count: AtomicU64::new(0),
            per_op: Default::default(),
        }
    }
}

impl Metrics {
    /// One request answered after `elapsed`.
    pub fn record(&self, op: i32, elapsed: Duration) {
        let us = elapsed.as_micros() as u64;
        self.min_latency_us.fetch_min(us, Ordering::Relaxed);
        self.max_latency_us.fetch_max(us, Ordering::Relaxed);
        self.total_latency_us.fetch_add(us, Ordering::Relaxed);
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.per_op[ops::info(op).family.index()].record(us);
    }

    /// (min, avg, max) in milliseconds, as `srvr` prints them.
    pub fn latency_ms(&self) -> (u64, f64, u64) {
        let count = self.latency_count.load(Ordering::Relaxed);
        if count == 0 {
            return (0, 0.0, 0);
        }
        let min = self.min_latency_us.load(Ordering::Relaxed) / 1000;
        let max = self.max_latency_us.load(Ordering::Relaxed) / 1000;
        let avg = self.total_latency_us.load(Ordering::Relaxed) as f64 / count as f64 / 1000.0;
        (min, avg, max)
    }

    /// `srst`: resets the latency and packet statistics.
    pub fn reset(&self) {
        self.packets_received.store(0, Ordering::Relaxed);
        self.packets_sent.store(0, Ordering::Relaxed);
        self.min_latency_us.store(u64::MAX, Ordering::Relaxed);
        self.max_latency_us.store(0, Ordering::Relaxed);
        self.total_latency_us.store(0, Ordering::Relaxed);
        self.latency_count.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_summary_and_buckets() {
        let m = Metrics::default();
        assert_eq!(m.latency_ms(), (0, 0.0, 0));
        m.record(4, Duration::from_millis(2));
        m.record(4, Duration::from_millis(4));
        assert_eq!(m.latency_ms(), (2, 3.0, 4));
        let h = &m.per_op[OpFamily::GetData.index()];
        assert_eq!(h.count.load(Ordering::Relaxed), 2);
        assert_eq!(h.buckets[4].load(Ordering::Relaxed), 1);
        assert_eq!(h.buckets[5].load(Ordering::Relaxed), 1);
        m.reset();
        assert_eq!(m.latency_ms(), (0, 0.0, 0));
    }
}
