//! The `reads` scenario: what a read that is never stale costs.
//!
//! A 3-member ensemble; the `get` workload (pipelined getData on pre-created znodes) runs
//! against one follower, whose reads are the ones that can be stale. ZooKeeper and zooraft
//! are measured with their default reads (served from the member's own tree); zooraft is
//! then measured again on a fresh ensemble with `linearizableReads=true`, where every read
//! waits for a ReadIndex round (batched across reads and connections). The note gives the
//! linearizable throughput as a share of zooraft's default.

use anyhow::Context;
use std::time::Duration;

use super::{KindOutcome, Measure, ScenarioParams};
use crate::load::run_workload_on;
use crate::server::{LaunchOptions, ServerKind};
use crate::target::Target;

/// One measured read mode: its label and the zoo.cfg line that selects it.
struct Mode {
    label: &'static str,
    line: Option<&'static str>,
}

const DEFAULT: Mode = Mode {
    label: "default reads",
    line: None,
};
const LINEARIZABLE: Mode = Mode {
    label: "linearizableReads",
    line: Some("linearizableReads=true"),
};

/// See the module docs.
pub fn run(
    kind: ServerKind,
    launch: &LaunchOptions,
    params: &ScenarioParams,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<KindOutcome> {
    let modes: &[Mode] = match kind {
        ServerKind::Apache => &[DEFAULT],
        ServerKind::Zooraft => &[DEFAULT, LINEARIZABLE],
    };
    let mut out = KindOutcome::default();
    let mut rates = Vec::new();
    for mode in modes {
        let mut launch = launch.clone();
        launch.extra_config.extend(mode.line.map(String::from));
        let mut target = Target::start(kind, 3, &launch, None)?;
        let leader = target
            .leader(Duration::from_secs(30))
            .context("no member says it leads")?;
        let follower = (leader + 1) % 3;
        let addr = target.addrs()[follower];
        let result = rt.block_on(run_workload_on(
            &[addr],
            kind.name(),
            &target.pids(),
            &params.read_load,
        ));
        target.stop();
        let result = result.with_context(|| format!("getData load, {}", mode.label))?;
        let what = format!("getData on a follower, {}", mode.label);
        out.measures.push(Measure::new(
            format!("{what}: throughput"),
            "1/s",
            result.ops_per_sec,
            false,
        ));
        out.measures.push(Measure::new(
            format!("{what}: p99 latency"),
            "µs",
            result.latency.p99_us as f64,
            true,
        ));
        if result.error_count() > 0 {
            out.notes
                .push(format!("{}: errors {:?}", mode.label, result.errors));
        }
        rates.push(result.ops_per_sec);
    }
    if let [default, linearizable] = rates[..] {
        if default > 0.0 {
            out.notes.push(format!(
                "linearizableReads: {:.0}% of the default reads' throughput ({} sessions, depth {})",
                100.0 * linearizable / default,
                params.read_load.connections,
                params.read_load.depth
            ));
        }
    }
    Ok(out)
}
