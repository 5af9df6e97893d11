//! The last hour, for the Metrics page's charts and the Ensemble page's timeline: a ring of
//! samples of the `mntr` figures (one per [`SAMPLE_EVERY`], [`SAMPLES`] of them), and the
//! leader and membership changes the Raft thread recorded as it saw them
//! (`raft/changes.rs`), of which [`timeline`] shows the last hour.
//!
//! Samples come from the same catalogue `mntr` and Prometheus print, so a chart and a
//! scrape never disagree: counters become rates over the interval, summaries an average
//! over it (the sum and count deltas) and, for read and write latency and fsync time, the
//! p50 and p99 of the interval alone (the difference of the histograms `mntr`'s quantiles
//! are read from, taken at either end). The rings are bounded, so the console's memory
//! stays a few hundred kilobytes however long it runs.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::super::catalogue::{self, Figure, Value as Fig};
use super::super::four_letter::full_version;
use crate::net::ClientPort;
use crate::raft::Change;
use crate::stats::{quantiles_between, Summary};

/// How often a sample is taken, and how many are kept (an hour).
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
pub const SAMPLES: usize = 720;
const HOUR_MS: i64 = 3_600_000;

/// Counters charted as a rate per second: (mntr key, chart name).
const RATES: [(&str, &str); 4] = [
    ("packets_received", "requests_per_s"),
    ("packets_sent", "responses_per_s"),
    ("commit_count", "commits_per_s"),
    ("bytes_received_count", "bytes_in_per_s"),
];
/// Gauges charted as they are.
const GAUGES: [(&str, &str); 5] = [
    ("num_alive_connections", "connections"),
    ("watch_count", "watches"),
    ("znode_count", "znodes"),
    ("outstanding_requests", "outstanding"),
    ("global_sessions", "sessions"),
];
/// Summaries: the interval's average, and its p50 and p99.
const SUMMARIES: [&str; 3] = ["readlatency", "updatelatency", "fsynctime"];

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The raw figures of one moment: counters, summaries' (sum, count) and histograms.
#[derive(Default, Clone)]
struct Raw {
    at_ms: i64,
    counters: BTreeMap<&'static str, i64>,
    sums: BTreeMap<&'static str, (u64, u64)>,
    histograms: BTreeMap<&'static str, Vec<u64>>,
}

#[derive(Default)]
struct Inner {
    samples: VecDeque<Value>,
    last: Option<Raw>,
}

/// See the module docs.
#[derive(Default)]
pub struct History {
    inner: Mutex<Inner>,
}

/// The summaries whose interval percentiles are charted, as the catalogue names them.
fn histograms(shared: &ClientPort) -> [(&'static str, &Summary); 3] {
    [
        ("readlatency", &shared.metrics.read_latency),
        ("updatelatency", &shared.metrics.update_latency),
        ("fsynctime", &shared.replica.counters.fsync_time),
    ]
}

/// One sample from the figures, against the previous moment's.
fn sample(
    figures: &[Figure],
    histograms: BTreeMap<&'static str, Vec<u64>>,
    at_ms: i64,
    prev: Option<&Raw>,
) -> (Value, Raw) {
    let mut raw = Raw {
        at_ms,
        histograms,
        ..Raw::default()
    };
    let mut out = Map::new();
    out.insert("t".into(), at_ms.into());
    let dt = prev.map(|p| (at_ms - p.at_ms) as f64 / 1000.0);
    for f in figures {
        match (&f.value, f.key) {
            (Fig::Int(v, _), key) => {
                if let Some((_, name)) = RATES.iter().find(|(k, _)| *k == key) {
                    raw.counters.insert(f.key, *v);
                    let before = prev.and_then(|p| p.counters.get(key));
                    if let (Some(b), Some(dt)) = (before, dt.filter(|d| *d > 0.0)) {
                        out.insert((*name).into(), json!(((v - b).max(0)) as f64 / dt));
                    }
                }
                if let Some((_, name)) = GAUGES.iter().find(|(k, _)| *k == key) {
                    out.insert((*name).into(), json!(v));
                }
            }
            (Fig::Summary(s), key) if SUMMARIES.contains(&key) => {
                raw.sums.insert(f.key, (s.sum, s.count));
                let avg = prev.and_then(|p| p.sums.get(key)).and_then(|(sum, n)| {
                    let (ds, dn) = (s.sum.saturating_sub(*sum), s.count.saturating_sub(*n));
                    (dn > 0).then(|| ds as f64 / dn as f64)
                });
                out.insert(format!("{key}_avg"), json!(avg.unwrap_or(0.0)));
                let before = prev.and_then(|p| p.histograms.get(key));
                if let (Some(b), Some(n)) = (before, raw.histograms.get(key)) {
                    // An interval with nothing recorded has no percentiles: 0, as its average.
                    let q = quantiles_between(b, n).unwrap_or_default();
                    out.insert(format!("{key}_p50"), json!(q[0]));
                    out.insert(format!("{key}_p99"), json!(q[2]));
                }
            }
            _ => {}
        }
    }
    (Value::Object(out), raw)
}

impl History {
    /// Takes a sample now.
    pub fn sample(&self, shared: &ClientPort) {
        let figures = catalogue::gather(shared, &full_version());
        let hist = histograms(shared)
            .into_iter()
            .filter_map(|(k, s)| Some((k, s.buckets()?)))
            .collect();
        let mut inner = self.inner.lock();
        let (value, raw) = sample(&figures, hist, now_ms(), inner.last.as_ref());
        inner.last = Some(raw);
        inner.samples.push_back(value);
        while inner.samples.len() > SAMPLES {
            inner.samples.pop_front();
        }
    }

    /// The samples of the last hour.
    pub fn samples(&self) -> Value {
        let inner = self.inner.lock();
        json!({"every_ms": SAMPLE_EVERY.as_millis() as u64, "samples": inner.samples})
    }
}

/// The leader and membership changes of the last hour, oldest first, as the page draws
/// them (a membership names the one before it, when this member saw that one too).
pub fn timeline(shared: &ClientPort) -> Value {
    timeline_of(&shared.replica.changes.since(0), now_ms() - HOUR_MS)
}

fn timeline_of(seen: &[crate::raft::Seen], since_ms: i64) -> Value {
    let mut out = Vec::new();
    let mut members: Option<String> = None;
    for s in seen {
        let event = match &s.change {
            Change::Leader {
                leader,
                previous,
                term,
            } => json!({
                "t": s.at_ms, "kind": "leader", "leader": leader, "previous": previous,
                "term": term,
            }),
            Change::Membership {
                voters,
                learners,
                index,
            } => {
                let all: Vec<String> = voters.iter().chain(learners).map(u64::to_string).collect();
                let now = all.join(",");
                let previous = members.replace(now.clone());
                json!({
                    "t": s.at_ms, "kind": "membership", "members": now, "previous": previous,
                    "voters": voters, "learners": learners, "index": index,
                })
            }
        };
        if s.at_ms >= since_ms {
            out.push(event);
        }
    }
    Value::Array(out)
}

/// Samples until shutdown. Each sample is taken on the blocking pool (it takes the state's
/// read lock and reads `/proc`), so a slow one holds no runtime thread, and a failed one
/// is logged and the next tick tries again instead of the history ending.
pub async fn run(
    shared: std::sync::Arc<ClientPort>,
    history: std::sync::Arc<History>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut sample_tick = tokio::time::interval(SAMPLE_EVERY);
    sample_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = sample_tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let (s, h) = (shared.clone(), history.clone());
        if let Err(e) = tokio::task::spawn_blocking(move || h.sample(&s)).await {
            tracing::warn!("console history: a sample failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::catalogue::Kind;
    use crate::raft::Seen;

    fn int(key: &'static str, v: i64) -> Figure {
        Figure {
            key,
            help: "",
            value: Fig::Int(v, Kind::Counter),
        }
    }

    #[test]
    fn counters_become_rates_and_gauges_stay() {
        let none = BTreeMap::new;
        let (first, raw) = sample(
            &[int("packets_received", 100), int("znode_count", 7)],
            none(),
            0,
            None,
        );
        assert!(first.get("requests_per_s").is_none());
        assert_eq!(first["znodes"], 7);
        let (second, _) = sample(&[int("packets_received", 600)], none(), 5000, Some(&raw));
        assert_eq!(second["requests_per_s"], 100.0);
    }

    #[test]
    fn latency_percentiles_are_the_intervals_own() {
        let s = Summary::with_quantiles();
        let figure = |s: &Summary| Figure {
            key: "readlatency",
            help: "",
            value: Fig::Summary(s.view()),
        };
        let hist = |s: &Summary| BTreeMap::from([("readlatency", s.buckets().unwrap_or_default())]);
        for _ in 0..10_000 {
            s.record(2);
        }
        let (_, raw) = sample(&[figure(&s)], hist(&s), 0, None);
        for _ in 0..100 {
            s.record(40);
        }
        let (second, raw) = sample(&[figure(&s)], hist(&s), 5000, Some(&raw));
        // Since start, the median is 2; over the interval, every read took 40 ms.
        assert_eq!(s.view().quantiles.map(|q| q[0]), Some(2));
        assert_eq!(second["readlatency_p50"], 40);
        assert_eq!(second["readlatency_p99"], 40);
        assert_eq!(second["readlatency_avg"], 40.0);
        let (third, _) = sample(&[figure(&s)], hist(&s), 10_000, Some(&raw));
        assert_eq!(third["readlatency_p99"], 0);
    }

    #[test]
    fn the_timeline_is_the_last_hour_of_changes() {
        let leader = |at_ms, leader, previous| Seen {
            at_ms,
            change: Change::Leader {
                leader,
                previous,
                term: 2,
            },
        };
        let members = |at_ms, voters: &[u64], learners: &[u64]| Seen {
            at_ms,
            change: Change::Membership {
                voters: voters.to_vec(),
                learners: learners.to_vec(),
                index: 5,
            },
        };
        let seen = [
            members(10, &[1, 2, 3], &[]),
            leader(20, 1, None),
            leader(30, 3, Some(1)),
            leader(30, 0, Some(3)),
            members(40, &[1, 2, 3], &[4]),
        ];
        let t = timeline_of(&seen, 15);
        let kinds: Vec<&str> = t
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["kind"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(kinds, ["leader", "leader", "leader", "membership"]);
        assert_eq!(t[0]["previous"], Value::Null);
        assert_eq!(t[1]["leader"], 3);
        assert_eq!(t[2]["previous"], 3);
        assert_eq!(t[3]["members"], "1,2,3,4");
        assert_eq!(t[3]["previous"], "1,2,3");
    }
}
