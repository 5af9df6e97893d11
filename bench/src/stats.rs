//! Latency histograms, percentiles and error tallies.
//!
//! Each connection records into its own [`Recorder`] (no sharing on the hot path); the
//! recorders are merged once the run is over. Latencies are kept in microseconds in an HDR
//! histogram (3 significant digits, 1 µs to 1 hour), so percentiles are exact to 0.1%.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Highest latency the histogram tracks exactly; anything slower is clamped to it.
const MAX_TRACKED_US: u64 = 3_600_000_000;

/// What one connection (or a whole run, after merging) measured.
#[derive(Debug, Clone)]
pub struct Recorder {
    hist: Histogram<u64>,
    errors: BTreeMap<String, u64>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            // The bounds are constants that hdrhistogram accepts (low >= 1, high >= 2*low,
            // sigfig <= 5), so construction cannot fail.
            hist: Histogram::new_with_bounds(1, MAX_TRACKED_US, 3)
                .unwrap_or_else(|e| unreachable!("constant histogram bounds rejected: {e}")),
            errors: BTreeMap::new(),
        }
    }

    /// Records one completed op.
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.hist.saturating_record(us.clamp(1, MAX_TRACKED_US));
    }

    /// Counts one error of the given kind (e.g. `NoNode (-101)` or `io: ConnectionReset`).
    pub fn error(&mut self, kind: impl Into<String>) {
        *self.errors.entry(kind.into()).or_insert(0) += 1;
    }

    /// Completed ops recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    pub fn errors(&self) -> &BTreeMap<String, u64> {
        &self.errors
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Adds another recorder's ops and errors to this one.
    pub fn merge(&mut self, other: &Recorder) {
        // Same bounds on both sides, and `saturating_record` kept values in range, so
        // `add` cannot fail; fall back to value-by-value copying if it ever does.
        if self.hist.add(&other.hist).is_err() {
            for v in other.hist.iter_recorded() {
                self.hist
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        for (k, n) in &other.errors {
            *self.errors.entry(k.clone()).or_insert(0) += n;
        }
    }

    /// The latency distribution as (quantile, µs) points, from the minimum to the maximum
    /// with more points in the tail (for CDF charts). Empty when nothing was recorded.
    pub fn cdf(&self) -> Vec<(f64, u64)> {
        if self.hist.is_empty() {
            return Vec::new();
        }
        const QUANTILES: [f64; 18] = [
            0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999,
            0.9999, 1.0,
        ];
        QUANTILES
            .iter()
            .map(|&q| (q, self.hist.value_at_quantile(q)))
            .collect()
    }

    /// Percentiles of what was recorded.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary::of(&self.hist)
    }
}

/// Latency percentiles in microseconds. All zero when nothing was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl LatencySummary {
    fn of(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            mean_us: h.mean(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// Formats microseconds for a table: `850µs`, `1.23ms`, `2.5s`.
pub fn fmt_us(us: u64) -> String {
    if us < 1000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{:.2}ms", us as f64 / 1000.0)
    } else {
        format!("{:.2}s", us as f64 / 1_000_000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// hdrhistogram with 3 significant digits is exact to within 0.1% (+1 for rounding up
    /// to the bucket's highest equivalent value).
    fn close(actual: u64, expected: u64) -> bool {
        let tol = expected / 1000 + 1;
        actual.abs_diff(expected) <= tol
    }

    #[test]
    fn percentiles_of_a_uniform_run() {
        let mut r = Recorder::new();
        for us in 1..=10_000u64 {
            r.record(Duration::from_micros(us));
        }
        let s = r.summary();
        assert_eq!(s.count, 10_000);
        assert!(close(s.p50_us, 5_000), "p50 {}", s.p50_us);
        assert!(close(s.p90_us, 9_000), "p90 {}", s.p90_us);
        assert!(close(s.p99_us, 9_900), "p99 {}", s.p99_us);
        assert!(close(s.p999_us, 9_990), "p99.9 {}", s.p999_us);
        assert!(close(s.max_us, 10_000), "max {}", s.max_us);
        assert!((s.mean_us - 5_000.5).abs() < 10.0, "mean {}", s.mean_us);
    }

    #[test]
    fn one_slow_outlier_shows_only_in_the_tail() {
        let mut r = Recorder::new();
        for _ in 0..999 {
            r.record(Duration::from_micros(100));
        }
        r.record(Duration::from_secs(2));
        let s = r.summary();
        assert!(close(s.p50_us, 100));
        assert!(close(s.p99_us, 100));
        assert!(close(s.max_us, 2_000_000), "max {}", s.max_us);
        assert!(close(s.p999_us, 100) || close(s.p999_us, 2_000_000));
    }

    #[test]
    fn merging_adds_counts_and_errors() {
        let mut a = Recorder::new();
        let mut b = Recorder::new();
        for _ in 0..300 {
            a.record(Duration::from_micros(10));
        }
        for _ in 0..100 {
            b.record(Duration::from_micros(1000));
        }
        a.error("NoNode (-101)");
        b.error("NoNode (-101)");
        b.error("io: ConnectionReset");
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 400);
        assert!(close(s.p50_us, 10));
        assert!(close(s.p90_us, 1000), "p90 {}", s.p90_us);
        assert_eq!(a.errors()["NoNode (-101)"], 2);
        assert_eq!(a.error_count(), 3);
    }

    #[test]
    fn extremes_are_clamped_not_lost() {
        let mut r = Recorder::new();
        r.record(Duration::ZERO);
        r.record(Duration::from_secs(100_000));
        let s = r.summary();
        assert_eq!(s.count, 2);
        assert_eq!(s.p50_us, 1);
        assert!(s.max_us >= MAX_TRACKED_US);
        assert_eq!(Recorder::new().summary(), LatencySummary::default());
    }

    #[test]
    fn microseconds_format_for_tables() {
        assert_eq!(fmt_us(850), "850µs");
        assert_eq!(fmt_us(1234), "1.23ms");
        assert_eq!(fmt_us(2_500_000), "2.50s");
    }
}
