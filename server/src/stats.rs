//! Summaries of observed values (latencies in milliseconds, batch sizes, watches fired per
//! event) in the shape ZooKeeper's metrics report them: count, sum, min, max and average,
//! and for some the 50th, 95th, 99th and 99.9th percentiles (`zk_p99_readlatency`).
//!
//! Recorded from any thread without a lock: relaxed atomics, and for percentiles a
//! log-linear histogram (values below 64 exact, above that 32 buckets per power of two, so
//! a percentile is within 1/32 of the true value). The figures are cumulative since start
//! or the last `srst`, as ZooKeeper's are.

use std::sync::atomic::{AtomicU64, Ordering};

/// Values below this are counted exactly, one bucket each.
const EXACT: u64 = 64;
/// Buckets per power of two above [`EXACT`].
const PER_OCTAVE: u64 = 32;
/// log2 of [`EXACT`]: the first octave above the exact buckets.
const FIRST_OCTAVE: u32 = 6;
const BUCKETS: usize = (EXACT + (64 - FIRST_OCTAVE as u64) * PER_OCTAVE) as usize;

/// The percentiles ZooKeeper reports, and their key prefixes.
pub const QUANTILES: [(f64, &str); 4] =
    [(0.5, "p50"), (0.95, "p95"), (0.99, "p99"), (0.999, "p999")];

/// See the module docs.
pub struct Summary {
    count: AtomicU64,
    sum: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
    buckets: Option<Box<[AtomicU64]>>,
}

/// What a [`Summary`] holds at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SummaryView {
    pub count: u64,
    pub sum: u64,
    /// 0 while nothing was recorded, as ZooKeeper prints it.
    pub min: u64,
    pub max: u64,
    /// The [`QUANTILES`], for a summary that keeps them.
    pub quantiles: Option<[u64; 4]>,
}

impl SummaryView {
    /// The average, 0 while nothing was recorded.
    pub fn avg(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
}

impl Summary {
    /// A summary of count, sum, min, max and average.
    pub fn new() -> Summary {
        Summary {
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
            buckets: None,
        }
    }

    /// A summary that also keeps the [`QUANTILES`].
    pub fn with_quantiles() -> Summary {
        Summary {
            buckets: Some((0..BUCKETS).map(|_| AtomicU64::new(0)).collect()),
            ..Summary::new()
        }
    }

    /// Records one value.
    pub fn record(&self, value: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.min.fetch_min(value, Ordering::Relaxed);
        self.max.fetch_max(value, Ordering::Relaxed);
        if let Some(buckets) = &self.buckets {
            buckets[bucket_of(value)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records a duration in whole milliseconds, ZooKeeper's unit for times.
    pub fn record_ms(&self, elapsed: std::time::Duration) {
        self.record(elapsed.as_millis().min(u64::MAX as u128) as u64);
    }

    /// Forgets everything recorded (`srst`).
    pub fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
        self.sum.store(0, Ordering::Relaxed);
        self.min.store(u64::MAX, Ordering::Relaxed);
        self.max.store(0, Ordering::Relaxed);
        if let Some(buckets) = &self.buckets {
            for b in buckets.iter() {
                b.store(0, Ordering::Relaxed);
            }
        }
    }

    /// The histogram's bucket counts now, for a summary that keeps the [`QUANTILES`]: two
    /// of them apart give the percentiles of what was recorded in between
    /// ([`quantiles_between`]).
    pub fn buckets(&self) -> Option<Vec<u64>> {
        let buckets = self.buckets.as_ref()?;
        Some(buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect())
    }

    /// The figures without the percentiles (where ZooKeeper's `mntr` prints none).
    pub fn view_basic(&self) -> SummaryView {
        self.view_of(None)
    }

    /// Reads the figures now.
    pub fn view(&self) -> SummaryView {
        self.view_of(self.buckets.as_ref().map(|b| quantiles(b)))
    }

    fn view_of(&self, quantiles: Option<[u64; 4]>) -> SummaryView {
        let count = self.count.load(Ordering::Relaxed);
        let min = self.min.load(Ordering::Relaxed);
        SummaryView {
            count,
            sum: self.sum.load(Ordering::Relaxed),
            min: if count == 0 || min == u64::MAX {
                0
            } else {
                min
            },
            max: self.max.load(Ordering::Relaxed),
            quantiles,
        }
    }
}

impl Default for Summary {
    fn default() -> Self {
        Summary::new()
    }
}

fn bucket_of(value: u64) -> usize {
    if value < EXACT {
        return value as usize;
    }
    let octave = 63 - value.leading_zeros();
    let sub = (value >> (octave - 5)) & (PER_OCTAVE - 1);
    (EXACT + (octave - FIRST_OCTAVE) as u64 * PER_OCTAVE + sub) as usize
}

/// The smallest value that falls in bucket `i`.
fn bucket_floor(i: usize) -> u64 {
    let i = i as u64;
    if i < EXACT {
        return i;
    }
    let octave = (i - EXACT) / PER_OCTAVE + FIRST_OCTAVE as u64;
    let sub = (i - EXACT) % PER_OCTAVE;
    (PER_OCTAVE + sub) << (octave - 5)
}

fn quantiles(buckets: &[AtomicU64]) -> [u64; 4] {
    let counts: Vec<u64> = buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
    quantiles_of(&counts)
}

/// The [`QUANTILES`] of what was recorded between two readings of [`Summary::buckets`]
/// (`None` if nothing was). A reset in between (`srst`) makes a bucket smaller than it
/// was: then `now` alone counts, as it holds only what came after the reset.
pub fn quantiles_between(before: &[u64], now: &[u64]) -> Option<[u64; 4]> {
    let reset = before.iter().zip(now).any(|(b, n)| n < b);
    let delta: Vec<u64> = if reset || before.len() != now.len() {
        now.to_vec()
    } else {
        now.iter().zip(before).map(|(n, b)| n - b).collect()
    };
    delta.iter().any(|c| *c > 0).then(|| quantiles_of(&delta))
}

fn quantiles_of(counts: &[u64]) -> [u64; 4] {
    let total: u64 = counts.iter().sum();
    let mut out = [0; 4];
    if total == 0 {
        return out;
    }
    for (slot, (q, _)) in out.iter_mut().zip(QUANTILES) {
        // The value below which a fraction q of the recorded values fall (nearest rank).
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                *slot = bucket_floor(i);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(63), 63);
        assert_eq!(bucket_of(64), 64);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        let mut last = 0;
        for v in (0..100_000u64).chain([1 << 40, (1 << 40) + 12345, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b >= last, "bucket of {v} goes backwards");
            assert!(
                bucket_floor(b) <= v,
                "floor of the bucket of {v} is above it"
            );
            // Within 1/32 of the value.
            assert!(v - bucket_floor(b) <= v / 32, "bucket of {v} too coarse");
            last = b;
        }
    }

    #[test]
    fn summary_figures_and_percentiles() {
        let s = Summary::with_quantiles();
        assert_eq!(
            s.view(),
            SummaryView {
                count: 0,
                sum: 0,
                min: 0,
                max: 0,
                quantiles: Some([0; 4])
            }
        );
        for v in 1..=1000 {
            s.record(v);
        }
        let v = s.view();
        assert_eq!((v.count, v.sum, v.min, v.max), (1000, 500_500, 1, 1000));
        assert_eq!(v.avg(), 500.5);
        let [p50, p95, p99, p999] = v.quantiles.unwrap_or_default();
        for (got, want) in [(p50, 500), (p95, 950), (p99, 990), (p999, 999)] {
            assert!(got <= want && want - got <= want / 32, "{got} for {want}");
        }
        s.reset();
        assert_eq!(s.view().count, 0);
        assert_eq!(s.view().quantiles, Some([0; 4]));
    }

    #[test]
    fn percentiles_of_an_interval_count_only_what_came_in_it() {
        let s = Summary::with_quantiles();
        for _ in 0..1000 {
            s.record(1);
        }
        let before = s.buckets().unwrap_or_default();
        assert_eq!(quantiles_between(&before, &before), None);
        for v in 100..=199 {
            s.record(v);
        }
        let now = s.buckets().unwrap_or_default();
        let [p50, _, p99, _] = quantiles_between(&before, &now).unwrap_or_default();
        assert!((148..=150).contains(&p50), "{p50}");
        assert!((192..=198).contains(&p99), "{p99}");
        // The whole history's median is still 1.
        assert_eq!(s.view().quantiles.map(|q| q[0]), Some(1));
        s.reset();
        s.record(7);
        let after = s.buckets().unwrap_or_default();
        assert_eq!(quantiles_between(&now, &after).map(|q| q[0]), Some(7));
        assert!(Summary::new().buckets().is_none());
        assert_eq!(s.view_basic().quantiles, None);
    }

    #[test]
    fn a_plain_summary_keeps_no_percentiles() {
        let s = Summary::new();
        s.record_ms(std::time::Duration::from_micros(2_500));
        let v = s.view();
        assert_eq!(
            (v.count, v.sum, v.min, v.max, v.quantiles),
            (1, 2, 2, 2, None)
        );
    }
}
