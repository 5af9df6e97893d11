//! Turning results into the markdown tables and the JSON document a run leaves behind.
//!
//! The headline is always a ratio between two servers measured in the same run; absolute
//! figures are printed next to it for context only (the machines are noisy).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::load::WorkloadResult;
use crate::server::ServerKind;
use crate::stats::fmt_us;
use crate::workload::Workload;

/// One server's outcome for one workload: a measurement, or why there is none.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Measured(Box<WorkloadResult>),
    Failed(String),
}

impl Outcome {
    pub fn measured(&self) -> Option<&WorkloadResult> {
        match self {
            Outcome::Measured(r) => Some(r),
            Outcome::Failed(_) => None,
        }
    }
}

/// One row of a comparison: a workload at one concurrency level, per server.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub workload: Workload,
    pub connections: usize,
    pub depth: usize,
    pub zookeeper: Option<Outcome>,
    pub zooraft: Option<Outcome>,
    /// zooraft ops/s divided by ZooKeeper ops/s, when both were measured.
    pub ratio: Option<f64>,
}

impl Row {
    pub fn new(workload: Workload, connections: usize, depth: usize) -> Row {
        Row {
            workload,
            connections,
            depth,
            zookeeper: None,
            zooraft: None,
            ratio: None,
        }
    }

    pub fn set(&mut self, kind: ServerKind, outcome: Outcome) {
        match kind {
            ServerKind::ZooKeeper => self.zookeeper = Some(outcome),
            ServerKind::Zooraft => self.zooraft = Some(outcome),
        }
        self.ratio = ratio(
            self.zookeeper.as_ref().and_then(Outcome::measured),
            self.zooraft.as_ref().and_then(Outcome::measured),
        );
    }

    fn outcomes(&self) -> impl Iterator<Item = (ServerKind, &Outcome)> {
        [
            (ServerKind::ZooKeeper, self.zookeeper.as_ref()),
            (ServerKind::Zooraft, self.zooraft.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, o)| o.map(|o| (k, o)))
    }
}

/// zooraft over ZooKeeper throughput; `None` unless both ran and ZooKeeper did something.
pub fn ratio(zk: Option<&WorkloadResult>, zr: Option<&WorkloadResult>) -> Option<f64> {
    match (zk, zr) {
        (Some(a), Some(b)) if a.ops_per_sec > 0.0 => Some(b.ops_per_sec / a.ops_per_sec),
        _ => None,
    }
}

pub fn fmt_ratio(r: Option<f64>) -> String {
    match r {
        Some(r) => format!("{r:.2}×"),
        None => "—".into(),
    }
}

fn fmt_ops(o: Option<&Outcome>) -> String {
    match o {
        None => "—".into(),
        Some(Outcome::Failed(_)) => "failed".into(),
        Some(Outcome::Measured(r)) => format!("{:.0}", r.ops_per_sec),
    }
}

fn fmt_lat(o: Option<&Outcome>, pick: fn(&WorkloadResult) -> u64) -> String {
    match o.and_then(Outcome::measured) {
        Some(r) if r.ops > 0 => fmt_us(pick(r)),
        _ => "—".into(),
    }
}

fn fmt_pct(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "—".into())
}

fn fmt_errors(errors: &BTreeMap<String, u64>) -> String {
    if errors.is_empty() {
        return "0".into();
    }
    errors
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The comparison table, then a detail table (tails, CPU, errors), then failures.
pub fn comparison_markdown(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| workload | conns×depth | ZooKeeper ops/s | zooraft ops/s | zooraft/ZK | ZK p50 | ZK p99 | zooraft p50 | zooraft p99 |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let zk = r.zookeeper.as_ref();
        let zr = r.zooraft.as_ref();
        let _ = writeln!(
            out,
            "| {} | {}×{} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            r.connections,
            r.depth,
            fmt_ops(zk),
            fmt_ops(zr),
            fmt_ratio(r.ratio),
            fmt_lat(zk, |w| w.latency.p50_us),
            fmt_lat(zk, |w| w.latency.p99_us),
            fmt_lat(zr, |w| w.latency.p50_us),
            fmt_lat(zr, |w| w.latency.p99_us),
        );
    }
    out.push('\n');
    out.push_str(&detail_markdown(rows));
    out
}

/// Per server and workload: tail latencies, CPU use and errors.
pub fn detail_markdown(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| workload | conns×depth | server | ops/s | p50 | p99 | p99.9 | max | generator CPU | server CPU | server CPU µs/op | machine busy | errors |\n",
    );
    out.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    let mut failures = Vec::new();
    for r in rows {
        for (kind, o) in r.outcomes() {
            match o {
                Outcome::Failed(e) => failures.push(format!(
                    "- {} {}×{} on {}: {e}",
                    r.workload,
                    r.connections,
                    r.depth,
                    kind.name()
                )),
                Outcome::Measured(w) => {
                    let _ = writeln!(
                        out,
                        "| {} | {}×{} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                        r.workload,
                        r.connections,
                        r.depth,
                        w.server,
                        w.ops_per_sec,
                        fmt_us(w.latency.p50_us),
                        fmt_us(w.latency.p99_us),
                        fmt_us(w.latency.p999_us),
                        fmt_us(w.latency.max_us),
                        fmt_pct(Some(w.cpu.generator_pct)),
                        fmt_pct(w.cpu.server_pct),
                        w.server_cpu_us_per_op
                            .map(|v| format!("{v:.1}"))
                            .unwrap_or_else(|| "—".into()),
                        fmt_pct(w.cpu.machine_busy_pct),
                        fmt_errors(&w.errors),
                    );
                }
            }
        }
    }
    if !failures.is_empty() {
        out.push_str("\nFailed:\n");
        for f in failures {
            out.push_str(&f);
            out.push('\n');
        }
    }
    out
}

/// Rows for results of a single server (`run`).
pub fn single_markdown(results: &[Outcome], workloads: &[(Workload, usize, usize)]) -> String {
    let rows: Vec<Row> = results
        .iter()
        .zip(workloads)
        .map(|(o, &(w, c, d))| {
            let mut row = Row::new(w, c, d);
            // Shown in the ZooKeeper slot only for layout; the server column names it.
            row.zookeeper = Some(o.clone());
            row
        })
        .collect();
    detail_markdown(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuUsage;
    use crate::stats::LatencySummary;

    fn result(server: &str, ops_per_sec: f64, errors: &[(&str, u64)]) -> WorkloadResult {
        WorkloadResult {
            server: server.into(),
            workload: Workload::Get,
            unit: "requests",
            connections: 8,
            depth: 4,
            data_size: 100,
            warmup_s: 1.0,
            measured_s: 10.0,
            ops: (ops_per_sec * 10.0) as u64,
            ops_per_sec,
            latency: LatencySummary {
                count: 10,
                mean_us: 500.0,
                p50_us: 400,
                p90_us: 800,
                p99_us: 1500,
                p999_us: 3000,
                max_us: 9000,
            },
            errors: errors.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            cpu: CpuUsage::default(),
            server_cpu_us_per_op: None,
        }
    }

    #[test]
    fn ratio_is_zooraft_over_zookeeper() {
        let zk = result("zookeeper", 10_000.0, &[]);
        let zr = result("zooraft", 25_000.0, &[]);
        assert_eq!(ratio(Some(&zk), Some(&zr)), Some(2.5));
        assert_eq!(ratio(Some(&zk), None), None);
        assert_eq!(ratio(Some(&result("zookeeper", 0.0, &[])), Some(&zr)), None);
        assert_eq!(fmt_ratio(Some(2.5)), "2.50×");
        assert_eq!(fmt_ratio(None), "—");
    }

    #[test]
    fn table_shows_both_servers_the_ratio_and_failures() {
        let mut row = Row::new(Workload::Get, 8, 4);
        row.set(
            ServerKind::ZooKeeper,
            Outcome::Measured(Box::new(result(
                "zookeeper",
                10_000.0,
                &[("NoNode (-101)", 3)],
            ))),
        );
        row.set(
            ServerKind::Zooraft,
            Outcome::Measured(Box::new(result("zooraft", 30_000.0, &[]))),
        );
        let mut failed = Row::new(Workload::Lock, 8, 4);
        failed.set(
            ServerKind::Zooraft,
            Outcome::Failed("binary missing".into()),
        );
        let md = comparison_markdown(&[row, failed]);
        assert!(
            md.contains("| get | 8×4 | 10000 | 30000 | 3.00× | 400µs | 1.50ms | 400µs | 1.50ms |"),
            "{md}"
        );
        assert!(md.contains("| lock | 8×4 | — | failed | — |"), "{md}");
        assert!(md.contains("NoNode (-101): 3"), "{md}");
        assert!(md.contains("- lock 8×4 on zooraft: binary missing"), "{md}");
    }
}
