//! Request counters of this member behind `srvr`, `stat`, `mntr` and the Prometheus endpoint.
//!
//! Everything is an atomic updated on the request path without locks: packet counts,
//! latency min/avg/max (as ZooKeeper reports them, in milliseconds), read and update latency
//! summaries with percentiles (ZooKeeper's `readlatency`, `updatelatency`), per-operation
//! latency histograms with fixed buckets, handshake and authentication outcomes, and the
//! bytes sent to clients ([`Traffic`], counted by each connection's outbox).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::state::opcodes::{self, OpClass, OpFamily};
use crate::stats::Summary;

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
    /// Milliseconds per read (answered from the tree) and per update (through the log).
    pub read_latency: Summary,
    pub update_latency: Summary,
    /// Authentications refused, as ZooKeeper counts them: a client certificate, a SASL
    /// exchange or enforced authentication (not an auth packet of an unknown scheme).
    pub auth_failed: AtomicU64,
    /// `auth_failed` by what was refused, indexed by [`AuthFailure`].
    pub auth_failed_by: [AtomicU64; AuthFailure::ALL.len()],
    /// TLS handshakes that failed on the client port (also in `auth_failed`, as ZooKeeper).
    pub tls_handshake_failed: AtomicU64,
    /// Connections refused by `maxClientCnxns`.
    pub connection_rejected: AtomicU64,
    /// Handshakes (ConnectRequests) received, and those refused.
    pub connection_requests: AtomicU64,
    pub unsuccessful_handshakes: AtomicU64,
    /// Connections closed because this member stopped serving (no leader, no quorum).
    pub closed_not_serving: AtomicU64,
    /// Bytes read from clients.
    pub bytes_received: AtomicU64,
    /// What the outboxes send.
    pub traffic: Arc<Traffic>,
}

/// What an authentication refusal was about (zooraft's per-scheme figures beside
/// ZooKeeper's total `auth_failed_count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// A client certificate or TLS handshake refused (ZooKeeper's x509 provider).
    X509,
    /// A SASL exchange (DIGEST-MD5 or GSSAPI) failed.
    Sasl,
    /// A request from a connection without an id of an enforced scheme.
    Enforced,
}

impl AuthFailure {
    pub const ALL: [AuthFailure; 3] = [AuthFailure::X509, AuthFailure::Sasl, AuthFailure::Enforced];
}

/// Watches fired per event that fired any, by event type.
#[derive(Default)]
pub struct WatchFires {
    pub created: Summary,
    pub deleted: Summary,
    pub changed: Summary,
    pub children: Summary,
}

impl WatchFires {
    /// An event of `summary`'s type fired `watches` watches.
    pub fn record(&self, summary: &Summary, watches: usize) {
        if watches > 0 {
            summary.record(watches as u64);
        }
    }

    pub fn reset(&self) {
        for s in [&self.created, &self.deleted, &self.changed, &self.children] {
            s.reset();
        }
    }
}

/// Bytes sent to clients, counted as each frame is queued: all of them, those of watch
/// notifications, and the sizes of the last, smallest and largest frame (-1 before any).
pub struct Traffic {
    pub response_bytes: AtomicU64,
    pub watch_bytes: AtomicU64,
    pub last_size: AtomicI64,
    pub min_size: AtomicI64,
    pub max_size: AtomicI64,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            response_bytes: AtomicU64::new(0),
            watch_bytes: AtomicU64::new(0),
            last_size: AtomicI64::new(-1),
            min_size: AtomicI64::new(-1),
            max_size: AtomicI64::new(-1),
        }
    }
}

impl Traffic {
    /// One frame of `bytes` queued for a client.
    pub fn sent(&self, bytes: usize) {
        let size = bytes as i64;
        self.response_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        self.last_size.store(size, Ordering::Relaxed);
        let _ = self
            .min_size
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                (m < 0 || size < m).then_some(size)
            });
        self.max_size.fetch_max(size, Ordering::Relaxed);
    }

    fn reset(&self) {
        self.response_bytes.store(0, Ordering::Relaxed);
        self.watch_bytes.store(0, Ordering::Relaxed);
        for s in [&self.last_size, &self.min_size, &self.max_size] {
            s.store(-1, Ordering::Relaxed);
        }
    }
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
            read_latency: Summary::with_quantiles(),
            update_latency: Summary::with_quantiles(),
            auth_failed: AtomicU64::new(0),
            auth_failed_by: Default::default(),
            tls_handshake_failed: AtomicU64::new(0),
            connection_rejected: AtomicU64::new(0),
            connection_requests: AtomicU64::new(0),
            unsuccessful_handshakes: AtomicU64::new(0),
            closed_not_serving: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            traffic: Arc::default(),
        }
    }
}

impl Metrics {
    /// One authentication refused.
    pub fn auth_failure(&self, what: AuthFailure) {
        self.auth_failed.fetch_add(1, Ordering::Relaxed);
        self.auth_failed_by[what as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// One request answered after `elapsed`.
    pub fn record(&self, op: i32, elapsed: Duration) {
        let us = elapsed.as_micros() as u64;
        self.min_latency_us.fetch_min(us, Ordering::Relaxed);
        self.max_latency_us.fetch_max(us, Ordering::Relaxed);
        self.total_latency_us.fetch_add(us, Ordering::Relaxed);
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        let info = opcodes::info(op);
        self.per_op[info.family.index()].record(us);
        match info.class {
            OpClass::Write | OpClass::Close => self.update_latency.record(us / 1000),
            _ => self.read_latency.record(us / 1000),
        }
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

    /// `srst`: resets the latency and packet statistics and every counter of events.
    pub fn reset(&self) {
        self.read_latency.reset();
        self.update_latency.reset();
        for c in [
            &self.auth_failed,
            &self.tls_handshake_failed,
            &self.connection_rejected,
            &self.connection_requests,
            &self.unsuccessful_handshakes,
            &self.closed_not_serving,
            &self.bytes_received,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for c in &self.auth_failed_by {
            c.store(0, Ordering::Relaxed);
        }
        self.traffic.reset();
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
        assert_eq!(m.read_latency.view().sum, 6);
        m.record(5, Duration::from_millis(7));
        assert_eq!(m.update_latency.view().max, 7);
        m.auth_failure(AuthFailure::Sasl);
        m.auth_failure(AuthFailure::Sasl);
        m.auth_failure(AuthFailure::X509);
        assert_eq!(m.auth_failed.load(Ordering::Relaxed), 3);
        let by: Vec<u64> = m
            .auth_failed_by
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        assert_eq!(by, [1, 2, 0]);
        m.reset();
        assert_eq!(m.auth_failed_by[1].load(Ordering::Relaxed), 0);
        assert_eq!(m.latency_ms(), (0, 0.0, 0));
        assert_eq!(m.read_latency.view().count, 0);
    }

    #[test]
    fn traffic_sizes() {
        let t = Traffic::default();
        assert_eq!(t.min_size.load(Ordering::Relaxed), -1);
        for n in [30, 10, 20] {
            t.sent(n);
        }
        let load = |a: &AtomicI64| a.load(Ordering::Relaxed);
        assert_eq!(
            (load(&t.last_size), load(&t.min_size), load(&t.max_size)),
            (20, 10, 30)
        );
        assert_eq!(t.response_bytes.load(Ordering::Relaxed), 60);
        t.reset();
        assert_eq!(load(&t.max_size), -1);
    }
}
