//! The last hour, for the Metrics page's charts and the Ensemble page's timeline: a ring of
//! samples of the `mntr` figures (one per [`SAMPLE_EVERY`], [`SAMPLES`] of them) and a ring
//! of leader and membership changes this member saw (checked every [`WATCH_EVERY`]).
//!
//! Samples come from the same catalogue `mntr` and Prometheus print, so a chart and a
//! scrape never disagree: counters become rates over the interval, summaries an average
//! over it (the sum and count deltas) beside the quantiles `mntr` reports. The rings are
//! bounded, so the console's memory stays a few hundred kilobytes however long it runs.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::super::catalogue::{self, Figure, Value as Fig};
use super::super::four_letter::full_version;
use crate::net::Shared;
use crate::state::reconfig;

/// How often a sample is taken, and how many are kept (an hour).
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
pub const SAMPLES: usize = 720;
/// How often the leader and the membership are looked at.
pub const WATCH_EVERY: Duration = Duration::from_secs(1);
/// Changes kept (older than an hour are dropped too).
const EVENTS: usize = 200;
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
/// Summaries: the interval's average and the quantiles `mntr` prints.
const SUMMARIES: [&str; 3] = ["readlatency", "updatelatency", "fsynctime"];

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The raw figures of one moment: counters and summaries' (sum, count).
#[derive(Default, Clone)]
struct Raw {
    at_ms: i64,
    counters: BTreeMap<&'static str, i64>,
    sums: BTreeMap<&'static str, (u64, u64)>,
}

#[derive(Default)]
struct Inner {
    samples: VecDeque<Value>,
    events: VecDeque<Value>,
    last: Option<Raw>,
    leader: Option<u64>,
    membership: Option<String>,
}

/// See the module docs.
#[derive(Default)]
pub struct History {
    inner: Mutex<Inner>,
}

/// One sample from the figures, against the previous moment's.
fn sample(figures: &[Figure], at_ms: i64, prev: Option<&Raw>) -> (Value, Raw) {
    let mut raw = Raw {
        at_ms,
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
                if let Some(q) = s.quantiles {
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
    pub fn sample(&self, shared: &Shared) {
        let figures = catalogue::gather(shared, &full_version());
        let mut inner = self.inner.lock();
        let (value, raw) = sample(&figures, now_ms(), inner.last.as_ref());
        inner.last = Some(raw);
        inner.samples.push_back(value);
        while inner.samples.len() > SAMPLES {
            inner.samples.pop_front();
        }
    }

    /// Notes a change of leader or of membership since the last look.
    pub fn watch(&self, shared: &Shared) {
        let status = &shared.replica.status;
        let leader = status.leader.load(std::sync::atomic::Ordering::Relaxed);
        let term = status.term.load(std::sync::atomic::Ordering::Relaxed);
        let config = shared.replica.config();
        let members = (!config.is_standalone()).then(|| {
            let committed = reconfig::committed(&shared.replica.state.read().tree);
            let c = committed.unwrap_or_else(|| crate::raft::initial_config(config, 0));
            c.servers
                .keys()
                .map(|id| id.to_string())
                .collect::<Vec<_>>()
                .join(",")
        });
        self.note(leader, term, members, now_ms());
    }

    fn note(&self, leader: u64, term: u64, members: Option<String>, at: i64) {
        let mut inner = self.inner.lock();
        if inner.leader != Some(leader) {
            let from = inner.leader;
            inner.leader = Some(leader);
            inner.events.push_back(json!({
                "t": at, "kind": "leader", "leader": leader, "previous": from, "term": term,
            }));
        }
        if members.is_some() && inner.membership != members {
            let from = inner
                .membership
                .replace(members.clone().unwrap_or_default());
            inner.events.push_back(json!({
                "t": at, "kind": "membership", "members": members, "previous": from,
            }));
        }
        while inner.events.len() > EVENTS
            || inner
                .events
                .front()
                .is_some_and(|e| e["t"].as_i64().unwrap_or(0) < at - HOUR_MS)
        {
            inner.events.pop_front();
        }
    }

    /// The samples of the last hour.
    pub fn samples(&self) -> Value {
        let inner = self.inner.lock();
        json!({"every_ms": SAMPLE_EVERY.as_millis() as u64, "samples": inner.samples})
    }

    /// The changes of the last hour, oldest first.
    pub fn events(&self) -> Value {
        json!(self.inner.lock().events)
    }
}

/// Samples and watches until shutdown. Each look runs on the blocking pool (it takes the
/// state's read lock and reads `/proc`), so a slow one holds no runtime thread, and a
/// failed one is logged and the next tick tries again instead of the history ending.
pub async fn run(
    shared: std::sync::Arc<Shared>,
    history: std::sync::Arc<History>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut watch_tick = tokio::time::interval(WATCH_EVERY);
    let mut sample_tick = tokio::time::interval(SAMPLE_EVERY);
    watch_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    sample_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let sample = tokio::select! {
            _ = watch_tick.tick() => false,
            _ = sample_tick.tick() => true,
            _ = shutdown.changed() => return,
        };
        let (s, h) = (shared.clone(), history.clone());
        let look =
            tokio::task::spawn_blocking(move || if sample { h.sample(&s) } else { h.watch(&s) });
        if let Err(e) = look.await {
            tracing::warn!("console history: a look failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::catalogue::Kind;

    fn int(key: &'static str, v: i64) -> Figure {
        Figure {
            key,
            help: "",
            value: Fig::Int(v, Kind::Counter),
        }
    }

    #[test]
    fn counters_become_rates_and_gauges_stay() {
        let (first, raw) = sample(
            &[int("packets_received", 100), int("znode_count", 7)],
            0,
            None,
        );
        assert!(first.get("requests_per_s").is_none());
        assert_eq!(first["znodes"], 7);
        let (second, _) = sample(&[int("packets_received", 600)], 5000, Some(&raw));
        assert_eq!(second["requests_per_s"], 100.0);
    }

    #[test]
    fn leader_changes_are_noted_once_and_age_out() {
        let h = History::default();
        h.note(1, 1, Some("1,2,3".into()), 0);
        h.note(1, 1, Some("1,2,3".into()), 1000);
        h.note(3, 2, Some("1,2,3".into()), 2000);
        let events = h.events();
        let kinds: Vec<&str> = events
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["kind"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(kinds, ["leader", "membership", "leader"]);
        assert_eq!(events[2]["previous"], 1);
        h.note(2, 3, Some("1,2".into()), 2000 + HOUR_MS + 1);
        let after = h.events();
        assert_eq!(after.as_array().map(Vec::len), Some(2));
        assert_eq!(after[1]["members"], "1,2");
    }
}
