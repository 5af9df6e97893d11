//! Per-connection counters, with ZooKeeper's fields (`cons`, `stat`), updated on the
//! request path without locks.

use std::sync::atomic::{AtomicI64, AtomicU64};

use parking_lot::Mutex;

/// Per-connection counters (for `cons`, with ZooKeeper's fields).
pub struct ConnStats {
    pub received: AtomicU64,
    pub sent: AtomicU64,
    pub outstanding: AtomicU64,
    pub last_zxid: AtomicU64,
    pub min_latency_us: AtomicU64,
    pub max_latency_us: AtomicU64,
    pub total_latency_us: AtomicU64,
    pub latency_count: AtomicU64,
    pub last_op: Mutex<&'static str>,
    /// The negotiated session timeout (ms).
    pub timeout_ms: AtomicI64,
    /// The xid of the last reply to a client request (-1 before the first).
    pub last_cxid: AtomicI64,
    /// When the last reply left (ms on a monotonic clock), and how long it took.
    pub last_response_ms: AtomicU64,
    pub last_latency_ms: AtomicU64,
}

impl Default for ConnStats {
    fn default() -> Self {
        ConnStats {
            received: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            outstanding: AtomicU64::new(0),
            last_zxid: AtomicU64::new(0),
            min_latency_us: AtomicU64::new(0),
            max_latency_us: AtomicU64::new(0),
            total_latency_us: AtomicU64::new(0),
            latency_count: AtomicU64::new(0),
            last_op: Mutex::new("NA"),
            timeout_ms: AtomicI64::new(0),
            last_cxid: AtomicI64::new(-1),
            last_response_ms: AtomicU64::new(0),
            last_latency_ms: AtomicU64::new(0),
        }
    }
}
