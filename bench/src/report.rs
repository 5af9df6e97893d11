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

/// One round of a row: both servers measured back to back.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Round {
    pub zookeeper: Option<Outcome>,
    pub zooraft: Option<Outcome>,
    /// zooraft ops/s over ZooKeeper ops/s in this round.
    pub ratio: Option<f64>,
}

impl Round {
    pub fn set(&mut self, kind: ServerKind, outcome: Outcome) {
        match kind {
            ServerKind::Apache => self.zookeeper = Some(outcome),
            ServerKind::Zooraft => self.zooraft = Some(outcome),
        }
        self.ratio = ratio(
            self.zookeeper.as_ref().and_then(Outcome::measured),
            self.zooraft.as_ref().and_then(Outcome::measured),
        );
    }

    fn get(&self, kind: ServerKind) -> Option<&Outcome> {
        match kind {
            ServerKind::Apache => self.zookeeper.as_ref(),
            ServerKind::Zooraft => self.zooraft.as_ref(),
        }
    }
}

/// One row of a comparison: a workload at one concurrency level, measured in one or more
/// rounds. The row shows, per server, the round with the median throughput, and as its
/// ratio the median of the per-round ratios (each round pairs two runs adjacent in time,
/// so machine noise hits both sides of a ratio alike).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub workload: Workload,
    /// How this row differs from the plain one of its workload (`TLS`, ...), if it does.
    pub variant: Option<String>,
    pub connections: usize,
    pub depth: usize,
    pub rounds: Vec<Round>,
    /// The median-throughput round's result (or a failure, if no round measured).
    pub zookeeper: Option<Outcome>,
    pub zooraft: Option<Outcome>,
    /// Median of the per-round zooraft/ZooKeeper throughput ratios.
    pub ratio: Option<f64>,
    /// Smallest and largest per-round ratio.
    pub ratio_range: Option<(f64, f64)>,
    /// Median of the per-round ZooKeeper/zooraft server-CPU-per-op ratios (above 1: zooraft
    /// spends less CPU per op). Robust to a busy machine, unlike throughput.
    pub cpu_efficiency_ratio: Option<f64>,
}

impl Row {
    pub fn new(workload: Workload, connections: usize, depth: usize) -> Row {
        Row {
            workload,
            variant: None,
            connections,
            depth,
            rounds: Vec::new(),
            zookeeper: None,
            zooraft: None,
            ratio: None,
            ratio_range: None,
            cpu_efficiency_ratio: None,
        }
    }

    /// The workload's name, with the variant if any: `get`, `get (TLS)`.
    pub fn label(&self) -> String {
        match &self.variant {
            Some(v) => format!("{} ({v})", self.workload),
            None => self.workload.to_string(),
        }
    }

    /// Adds a finished round and recomputes the row's summary.
    pub fn push(&mut self, round: Round) {
        self.rounds.push(round);
        self.zookeeper = self.representative(ServerKind::Apache);
        self.zooraft = self.representative(ServerKind::Zooraft);
        let ratios: Vec<f64> = self.rounds.iter().filter_map(|r| r.ratio).collect();
        self.ratio = median(&ratios);
        self.ratio_range = match (
            ratios.iter().copied().reduce(f64::min),
            ratios.iter().copied().reduce(f64::max),
        ) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        };
        let cpu: Vec<f64> = self
            .rounds
            .iter()
            .filter_map(|r| {
                let zk = r.zookeeper.as_ref()?.measured()?;
                let zr = r.zooraft.as_ref()?.measured()?;
                let (a, b) = (zk.server_cpu_us_per_op?, zr.server_cpu_us_per_op?);
                (b > 0.0).then_some(a / b)
            })
            .collect();
        self.cpu_efficiency_ratio = median(&cpu);
    }

    fn representative(&self, kind: ServerKind) -> Option<Outcome> {
        let mut measured: Vec<&WorkloadResult> = self
            .rounds
            .iter()
            .filter_map(|r| r.get(kind)?.measured())
            .collect();
        if measured.is_empty() {
            return self.rounds.iter().find_map(|r| r.get(kind).cloned());
        }
        measured.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
        Some(Outcome::Measured(Box::new(
            measured[(measured.len() - 1) / 2].clone(),
        )))
    }

    /// Every outcome of every round, with its server.
    fn outcomes(&self) -> impl Iterator<Item = (ServerKind, &Outcome)> {
        self.rounds.iter().flat_map(|r| {
            [
                (ServerKind::Apache, r.zookeeper.as_ref()),
                (ServerKind::Zooraft, r.zooraft.as_ref()),
            ]
            .into_iter()
            .filter_map(|(k, o)| o.map(|o| (k, o)))
        })
    }

    /// Failed runs plus errors tallied in measured ones, over all rounds.
    pub fn problems(&self) -> u64 {
        self.outcomes()
            .map(|(_, o)| match o {
                Outcome::Failed(_) => 1,
                Outcome::Measured(w) => w.error_count(),
            })
            .sum()
    }
}

/// The median (lower middle for an even count); `None` for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Some(v[(v.len() - 1) / 2])
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

fn fmt_ratio_cell(r: &Row) -> String {
    match (r.ratio, r.ratio_range) {
        (Some(m), Some((lo, hi))) if r.rounds.len() > 1 => {
            format!("{} ({lo:.2}–{hi:.2})", fmt_ratio(Some(m)))
        }
        (m, _) => fmt_ratio(m),
    }
}

/// The comparison table, then a detail table (tails, CPU, errors), then failures.
pub fn comparison_markdown(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| workload | conns×depth | ZooKeeper ops/s | zooraft ops/s | zooraft/ZK | CPU per op ZK/zooraft | ZK p50 | ZK p99 | zooraft p50 | zooraft p99 |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let zk = r.zookeeper.as_ref();
        let zr = r.zooraft.as_ref();
        let _ = writeln!(
            out,
            "| {} | {}×{} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.label(),
            r.connections,
            r.depth,
            fmt_ops(zk),
            fmt_ops(zr),
            fmt_ratio_cell(r),
            fmt_ratio(r.cpu_efficiency_ratio),
            fmt_lat(zk, |w| w.latency.p50_us),
            fmt_lat(zk, |w| w.latency.p99_us),
            fmt_lat(zr, |w| w.latency.p50_us),
            fmt_lat(zr, |w| w.latency.p99_us),
        );
    }
    out.push_str(
        "\nops/s, p50, p99: each server's median-throughput round. zooraft/ZK: median (and range) \
         of the per-round ratios, each round running both servers back to back. CPU per op: \
         ZooKeeper's server CPU µs per op over zooraft's (above 1: zooraft spends less).\n\n",
    );
    out.push_str(&detail_markdown(rows));
    out
}

/// What TLS costs each server: for each workload measured on the TLS-enabled servers, the
/// throughput over TLS against the same servers' plain port, and zooraft/ZooKeeper over TLS.
/// `pairs` holds (plain row, TLS row) per workload.
pub fn tls_markdown(pairs: &[(Row, Row)]) -> String {
    let mut out = String::new();
    if pairs.is_empty() {
        return out;
    }
    out.push_str(
        "| workload | ZK plain ops/s | ZK TLS ops/s | ZK TLS/plain | zooraft plain ops/s | zooraft TLS ops/s | zooraft TLS/plain | zooraft/ZK over TLS |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    let ops = |o: &Option<Outcome>| {
        o.as_ref()
            .and_then(Outcome::measured)
            .map(|w| w.ops_per_sec)
    };
    let cost = |tls: Option<f64>, plain: Option<f64>| match (tls, plain) {
        (Some(t), Some(p)) if p > 0.0 => Some(t / p),
        _ => None,
    };
    for (plain, tls) in pairs {
        let (zkp, zkt) = (ops(&plain.zookeeper), ops(&tls.zookeeper));
        let (zrp, zrt) = (ops(&plain.zooraft), ops(&tls.zooraft));
        let f = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.0}"));
        let _ = writeln!(
            out,
            "| {} {}×{} | {} | {} | {} | {} | {} | {} | {} |",
            tls.label(),
            tls.connections,
            tls.depth,
            f(zkp),
            f(zkt),
            fmt_ratio(cost(zkt, zkp)),
            f(zrp),
            f(zrt),
            fmt_ratio(cost(zrt, zrp)),
            fmt_ratio_cell(tls),
        );
    }
    let mut negotiated = String::new();
    for (_, tls) in pairs {
        for (name, o) in [("ZooKeeper", &tls.zookeeper), ("zooraft", &tls.zooraft)] {
            if let Some(h) = o
                .as_ref()
                .and_then(Outcome::measured)
                .and_then(|w| w.tls_handshakes.as_ref())
            {
                let _ = writeln!(negotiated, "- {} {name}: {h}", tls.label());
            }
        }
    }
    if !negotiated.is_empty() {
        out.push_str(
            "\nWhat the handshakes negotiated (median round, set-up and warm-up included):\n\n",
        );
        out.push_str(&negotiated);
    }
    out.push_str(
        "\nTLS-enabled servers: the same certificates for both (mutual TLS, PEM stores); ZooKeeper \
         runs its Netty connection factory there (it serves TLS with no other), so its plain \
         figures here are Netty's. TLS/plain: median rounds; zooraft/ZK: median per-round ratio.\n",
    );
    out
}

/// Per server, workload and round: tail latencies, CPU use and errors.
pub fn detail_markdown(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| workload | conns×depth | server | round | ops/s | p50 | p99 | p99.9 | max | generator CPU | server CPU | server CPU µs/op | machine busy | errors |\n",
    );
    out.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    let mut failures = Vec::new();
    for r in rows {
        for (round, rd) in r.rounds.iter().enumerate() {
            for kind in [ServerKind::Apache, ServerKind::Zooraft] {
                match rd.get(kind) {
                    None => {}
                    Some(Outcome::Failed(e)) => failures.push(format!(
                        "- {} {}×{} on {} (round {}): {e}",
                        r.label(),
                        r.connections,
                        r.depth,
                        kind.name(),
                        round + 1
                    )),
                    Some(Outcome::Measured(w)) => {
                        let _ = writeln!(
                            out,
                            "| {} | {}×{} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                            r.label(),
                            r.connections,
                            r.depth,
                            w.server,
                            round + 1,
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

/// The detail table for results of a single server (`run`).
pub fn single_markdown(results: &[Outcome], workloads: &[(Workload, usize, usize)]) -> String {
    let rows: Vec<Row> = results
        .iter()
        .zip(workloads)
        .map(|(o, &(w, c, d))| {
            let mut row = Row::new(w, c, d);
            // The ZooKeeper slot is only a place to hold it; the table names the server.
            row.push(Round {
                zookeeper: Some(o.clone()),
                ..Round::default()
            });
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
            cdf: vec![(0.0, 100), (0.5, 400), (0.99, 1500), (1.0, 9000)],
            errors: errors.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            cpu: CpuUsage::default(),
            tls_handshakes: None,
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

    fn measured(server: &str, ops: f64, errors: &[(&str, u64)]) -> Outcome {
        Outcome::Measured(Box::new(result(server, ops, errors)))
    }

    #[test]
    fn table_shows_both_servers_the_ratio_and_failures() {
        let mut row = Row::new(Workload::Get, 8, 4);
        let mut round = Round::default();
        round.set(
            ServerKind::Apache,
            measured("zookeeper", 10_000.0, &[("NoNode (-101)", 3)]),
        );
        round.set(ServerKind::Zooraft, measured("zooraft", 30_000.0, &[]));
        row.push(round);
        let mut failed = Row::new(Workload::Lock, 8, 4);
        let mut round = Round::default();
        round.set(
            ServerKind::Zooraft,
            Outcome::Failed("binary missing".into()),
        );
        failed.push(round);
        assert_eq!(row.problems(), 3);
        assert_eq!(failed.problems(), 1);
        let md = comparison_markdown(&[row, failed]);
        assert!(
            md.contains(
                "| get | 8×4 | 10000 | 30000 | 3.00× | — | 400µs | 1.50ms | 400µs | 1.50ms |"
            ),
            "{md}"
        );
        assert!(md.contains("| lock | 8×4 | — | failed | — |"), "{md}");
        assert!(md.contains("NoNode (-101): 3"), "{md}");
        assert!(
            md.contains("- lock 8×4 on zooraft (round 1): binary missing"),
            "{md}"
        );
    }

    #[test]
    fn rounds_summarise_by_medians() {
        let mut row = Row::new(Workload::Set, 32, 8);
        // Paired rounds: the machine was slow in round 2 for both servers.
        for (zk, zr) in [
            (10_000.0, 40_000.0),
            (5_000.0, 15_000.0),
            (12_000.0, 60_000.0),
        ] {
            let mut round = Round::default();
            let mut a = result("zookeeper", zk, &[]);
            a.server_cpu_us_per_op = Some(100.0);
            let mut b = result("zooraft", zr, &[]);
            b.server_cpu_us_per_op = Some(20.0);
            round.set(ServerKind::Apache, Outcome::Measured(Box::new(a)));
            round.set(ServerKind::Zooraft, Outcome::Measured(Box::new(b)));
            row.push(round);
        }
        // Per-round ratios 4, 3, 5: the median is 4, the range 3–5.
        assert_eq!(row.ratio, Some(4.0));
        assert_eq!(row.ratio_range, Some((3.0, 5.0)));
        assert_eq!(row.cpu_efficiency_ratio, Some(5.0));
        // The representative run is each server's median-throughput round.
        let zk = row.zookeeper.as_ref().and_then(Outcome::measured).unwrap();
        let zr = row.zooraft.as_ref().and_then(Outcome::measured).unwrap();
        assert_eq!(zk.ops_per_sec, 10_000.0);
        assert_eq!(zr.ops_per_sec, 40_000.0);
        let md = comparison_markdown(&[row]);
        assert!(md.contains("| 4.00× (3.00–5.00) | 5.00× |"), "{md}");
        assert_eq!(md.matches("| set | 32×8 | zookeeper |").count(), 3, "{md}");
    }

    fn measured_row(workload: Workload, variant: Option<&str>, zk: f64, zr: f64) -> Row {
        let mut row = Row::new(workload, 8, 4);
        row.variant = variant.map(str::to_string);
        let mut round = Round::default();
        round.set(
            ServerKind::Apache,
            Outcome::Measured(Box::new(result("zookeeper", zk, &[]))),
        );
        round.set(
            ServerKind::Zooraft,
            Outcome::Measured(Box::new(result("zooraft", zr, &[]))),
        );
        row.push(round);
        row
    }

    #[test]
    fn tls_table_shows_each_servers_cost_and_the_ratio() {
        let plain = measured_row(
            Workload::Get,
            Some("plain, TLS-enabled servers"),
            10_000.0,
            40_000.0,
        );
        let tls = measured_row(Workload::Get, Some("TLS"), 5_000.0, 30_000.0);
        assert_eq!(tls.label(), "get (TLS)");
        let md = tls_markdown(&[(plain, tls)]);
        assert!(
            md.contains("| get (TLS) 8×4 | 10000 | 5000 | 0.50× | 40000 | 30000 | 0.75× | 6.00× |"),
            "{md}"
        );
        assert!(!md.contains("What the handshakes negotiated"), "{md}");
        assert!(tls_markdown(&[]).is_empty());
    }

    #[test]
    fn charts_are_written_as_svg() {
        let dir = tempfile::tempdir().expect("temp dir");
        let rows = vec![
            measured_row(Workload::Get, None, 10_000.0, 40_000.0),
            measured_row(Workload::Get, Some("TLS"), 5_000.0, 30_000.0),
        ];
        let scale = crate::scenario::KindOutcome {
            scale: vec![crate::scenario::ScalePoint {
                znodes: 1000,
                memory: 50 << 20,
                restart_s: 0.5,
            }],
            ..Default::default()
        };
        let sc = crate::scenario::ScenarioResult::new(
            crate::scenario::Scenario::Scale,
            Some(scale.clone()),
            Some(scale),
        );
        let files = crate::charts::write_all(dir.path(), "t", &rows, &[sc]).expect("charts");
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "t-throughput.svg",
                "t-latency-get.svg",
                "t-latency-get-TLS.svg",
                "t-memory-vs-znodes.svg",
                "t-restart-vs-znodes.svg"
            ]
        );
        let svg = std::fs::read_to_string(&files[0]).expect("svg");
        assert!(svg.starts_with("<svg") && svg.contains("zooraft"), "{svg}");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.0));
    }
}
