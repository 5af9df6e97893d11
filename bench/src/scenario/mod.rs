//! Scenarios: measurements that are not a throughput window but a story told once per
//! server, each on fresh servers, with figures compared as zooraft/ZooKeeper ratios:
//!
//! | name | what it measures |
//! |---|---|
//! | `failover` | 3-member ensembles under a write load: kill -9 the leader, time to the first acknowledged write on a survivor |
//! | `sessions` | `--sessions` concurrent sessions: memory per session, sessions opened per second |
//! | `watches` | `--watches` data watches (`--watch-sessions` sessions × znodes): memory per watch; then the time to deliver `--fire` notifications of one change (see [`clients`]) |
//! | `reads` | 3-member ensembles: getData load on a follower with default reads, and on zooraft also with `linearizableReads=true` (what a read that is never stale costs) |
//! | `scale` | fill to each `--znodes` count (100 B each): memory and bytes per znode, restart to serving; at the last count a snapshot under a write load (write p99 during vs outside the snapshot, its peak extra RSS) |
//!
//! Memory is read as [`crate::memory`] explains (zooraft's RSS, ZooKeeper's live heap
//! after a full GC). Every wait is bounded; a scenario that fails reports why and the
//! comparison goes on.

pub mod clients;
pub mod failover;
pub mod reads;
pub mod scale;
pub mod zk_purge;

use std::fmt::Write as _;
use std::time::Duration;

use crate::load::LoadSpec;
use crate::memory;

/// Quiet time after the work a memory figure measures, before it is read, as an operator
/// would see the server: zooraft gives free memory back after two seconds without writes
/// (and RocksDB's memtables with it); ZooKeeper is read after a forced full GC.
pub(crate) const QUIET_BEFORE_MEMORY: Duration = Duration::from_secs(6);
use crate::server::{LaunchOptions, ServerKind};
use crate::target::Target;

/// A named scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    Failover,
    Sessions,
    Watches,
    Reads,
    Scale,
}

impl Scenario {
    pub const ALL: [Scenario; 5] = [
        Scenario::Failover,
        Scenario::Sessions,
        Scenario::Watches,
        Scenario::Reads,
        Scenario::Scale,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Failover => "failover",
            Scenario::Sessions => "sessions",
            Scenario::Watches => "watches",
            Scenario::Reads => "reads",
            Scenario::Scale => "scale",
        }
    }
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a comma-separated scenario list (`all` for every one, `none` or empty for none).
pub fn parse_scenarios(s: &str) -> Result<Vec<Scenario>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let found: Vec<Scenario> = match part.to_ascii_lowercase().as_str() {
            "all" => Scenario::ALL.to_vec(),
            "none" => Vec::new(),
            p => vec![Scenario::ALL
                .into_iter()
                .find(|sc| sc.name() == p)
                .ok_or_else(|| {
                    format!("unknown scenario {part:?} (known: failover, sessions, watches, reads, scale, all, none)")
                })?],
        };
        for sc in found {
            if !out.contains(&sc) {
                out.push(sc);
            }
        }
    }
    Ok(out)
}

/// The sizes of the scenarios.
#[derive(Debug, Clone)]
pub struct ScenarioParams {
    pub sessions: usize,
    pub watches: usize,
    pub watch_sessions: usize,
    pub fire: usize,
    pub znodes: Vec<usize>,
    /// Length of the write load that should see a snapshot (0: skip that part).
    pub snapshot_load: Duration,
    /// Background writer sessions during `failover`.
    pub failover_writers: usize,
    pub session_timeout_ms: i32,
    /// The getData load of `reads` (the `get` workload at the first connection level).
    pub read_load: LoadSpec,
}

/// One figure of one server.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Measure {
    pub metric: String,
    pub unit: &'static str,
    pub value: f64,
    /// Whether a smaller value is the better one (memory, times).
    pub lower_is_better: bool,
}

impl Measure {
    pub fn new(metric: impl Into<String>, unit: &'static str, value: f64, lower: bool) -> Measure {
        Measure {
            metric: metric.into(),
            unit,
            value,
            lower_is_better: lower,
        }
    }
}

/// A point of the memory and restart curves (`scale`).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct ScalePoint {
    pub znodes: usize,
    /// zooraft RSS, ZooKeeper live heap, in bytes.
    pub memory: u64,
    pub restart_s: f64,
}

/// What a scenario measured on one server.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct KindOutcome {
    pub measures: Vec<Measure>,
    pub scale: Vec<ScalePoint>,
    /// Latencies of the scenario's own load, if any (for the notes).
    pub notes: Vec<String>,
    pub error: Option<String>,
}

/// One figure of both servers.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Figure {
    pub scenario: Scenario,
    pub metric: String,
    pub unit: &'static str,
    pub zookeeper: Option<f64>,
    pub zooraft: Option<f64>,
    /// zooraft over ZooKeeper.
    pub ratio: Option<f64>,
    pub lower_is_better: bool,
}

/// A scenario's result on both servers.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScenarioResult {
    pub scenario: Scenario,
    pub zookeeper: Option<KindOutcome>,
    pub zooraft: Option<KindOutcome>,
    pub figures: Vec<Figure>,
}

impl ScenarioResult {
    pub fn new(
        scenario: Scenario,
        zookeeper: Option<KindOutcome>,
        zooraft: Option<KindOutcome>,
    ) -> ScenarioResult {
        let mut figures: Vec<Figure> = Vec::new();
        for (kind, out) in [
            (ServerKind::Apache, &zookeeper),
            (ServerKind::Zooraft, &zooraft),
        ] {
            for m in out.iter().flat_map(|o| &o.measures) {
                let i = match figures.iter().position(|f| f.metric == m.metric) {
                    Some(i) => i,
                    None => {
                        figures.push(Figure {
                            scenario,
                            metric: m.metric.clone(),
                            unit: m.unit,
                            zookeeper: None,
                            zooraft: None,
                            ratio: None,
                            lower_is_better: m.lower_is_better,
                        });
                        figures.len() - 1
                    }
                };
                match kind {
                    ServerKind::Apache => figures[i].zookeeper = Some(m.value),
                    ServerKind::Zooraft => figures[i].zooraft = Some(m.value),
                }
            }
        }
        for f in &mut figures {
            f.ratio = match (f.zookeeper, f.zooraft) {
                (Some(zk), Some(zr)) if zk > 0.0 => Some(zr / zk),
                _ => None,
            };
        }
        ScenarioResult {
            scenario,
            zookeeper,
            zooraft,
            figures,
        }
    }

    /// Scenarios that failed on a server.
    pub fn problems(&self) -> u64 {
        [&self.zookeeper, &self.zooraft]
            .iter()
            .filter(|o| o.as_ref().is_some_and(|o| o.error.is_some()))
            .count() as u64
    }
}

/// Runs `scenario` on a fresh server (or ensemble) of `kind`.
pub fn run(
    scenario: Scenario,
    kind: ServerKind,
    launch: &LaunchOptions,
    params: &ScenarioParams,
    rt: &tokio::runtime::Runtime,
) -> KindOutcome {
    tracing::info!("scenario {scenario} on {}", kind.name());
    let result = match scenario {
        Scenario::Failover => failover::run(kind, launch, params, rt),
        Scenario::Sessions => clients::sessions(kind, launch, params, rt),
        Scenario::Watches => clients::watches(kind, launch, params, rt),
        Scenario::Reads => reads::run(kind, launch, params, rt),
        Scenario::Scale => scale::run(kind, launch, params, rt),
    };
    match result {
        Ok(out) => {
            for m in &out.measures {
                tracing::info!("  {}: {:.3} {}", m.metric, m.value, m.unit);
            }
            out
        }
        Err(e) => {
            tracing::error!("  scenario {scenario} on {} failed: {e:#}", kind.name());
            KindOutcome {
                error: Some(format!("{e:#}")),
                ..KindOutcome::default()
            }
        }
    }
}

/// The memory of a standalone target's server (see [`crate::memory`]).
fn memory_of(kind: ServerKind, target: &Target) -> anyhow::Result<memory::MemoryReading> {
    use anyhow::Context;
    let pid = target.pid().context("the server has no pid")?;
    memory::read(kind, pid).context("the server process is gone")
}

fn fmt_value(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// The scenarios' table: one line per figure, with the ratio zooraft/ZooKeeper.
pub fn markdown(results: &[ScenarioResult]) -> String {
    let mut out = String::new();
    if results.is_empty() {
        return out;
    }
    out.push_str("| scenario | figure | unit | ZooKeeper | zooraft | zooraft/ZK |\n");
    out.push_str("|---|---|---|---:|---:|---:|\n");
    for r in results {
        for f in &r.figures {
            let better = if f.lower_is_better { "lower" } else { "higher" };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} ({better} is better) |",
                r.scenario,
                f.metric,
                f.unit,
                fmt_value(f.zookeeper),
                fmt_value(f.zooraft),
                f.ratio.map_or("—".into(), |r| format!("{r:.2}")),
            );
        }
    }
    for r in results {
        for (kind, o) in [("ZooKeeper", &r.zookeeper), ("zooraft", &r.zooraft)] {
            if let Some(o) = o {
                if let Some(e) = &o.error {
                    let _ = writeln!(out, "\n{} on {kind} failed: {e}", r.scenario);
                }
                for n in &o.notes {
                    let _ = writeln!(out, "\n{} on {kind}: {n}", r.scenario);
                }
            }
        }
    }
    out.push_str(
        "\nMemory: zooraft's RSS, ZooKeeper's live heap after a full GC (jcmd GC.run + \
         GC.heap_info); deltas over the server's own reading before the scenario.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_lists_parse() {
        assert_eq!(
            parse_scenarios("scale, failover").unwrap(),
            vec![Scenario::Scale, Scenario::Failover]
        );
        assert_eq!(parse_scenarios("all").unwrap(), Scenario::ALL.to_vec());
        assert!(parse_scenarios("none").unwrap().is_empty());
        assert!(parse_scenarios("").unwrap().is_empty());
        assert!(parse_scenarios("chaos")
            .unwrap_err()
            .contains("unknown scenario"));
    }

    #[test]
    fn figures_pair_up_and_get_ratios() {
        let zk = KindOutcome {
            measures: vec![
                Measure::new("bytes per session", "B", 2000.0, true),
                Measure::new("only zk", "s", 1.0, true),
            ],
            ..KindOutcome::default()
        };
        let zr = KindOutcome {
            measures: vec![Measure::new("bytes per session", "B", 500.0, true)],
            error: None,
            ..KindOutcome::default()
        };
        let r = ScenarioResult::new(Scenario::Sessions, Some(zk), Some(zr));
        assert_eq!(r.figures.len(), 2);
        assert_eq!(r.figures[0].ratio, Some(0.25));
        assert_eq!(r.figures[1].ratio, None);
        assert_eq!(r.problems(), 0);
        let md = markdown(&[r]);
        assert!(
            md.contains(
                "| sessions | bytes per session | B | 2000 | 500 | 0.25 (lower is better) |"
            ),
            "{md}"
        );
    }
}
