//! Running a group of scenarios against a reference Apache ZooKeeper and a candidate
//! (zooraft, or a second Apache ZooKeeper to prove the normalization stable), comparing
//! the normalized transcripts and reporting.
//!
//! Scenarios run one at a time per server (a read's reply zxid is the server's last zxid,
//! so two scenarios at once on one server would see each other), but the reference and
//! the candidate run each scenario at the same time. Each scenario has a time limit; the
//! group has a budget after which remaining scenarios are failed as not run.

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::ctx::{Ctx, Res};
use super::transcript::{compared, diff, NormLine, Transcript};
use crate::{ServerKind, TestServer};

/// The future a scenario function returns.
pub type ScenarioFuture<'a> = Pin<Box<dyn Future<Output = Res> + Send + 'a>>;
/// A scenario function.
pub type RunFn = for<'a> fn(&'a mut Ctx) -> ScenarioFuture<'a>;

/// How long one scenario may take on one server.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a group may take before the remaining scenarios are failed unrun.
const GROUP_BUDGET: Duration = Duration::from_secs(160);

/// The two groups, reported separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Issue 2: the operations, semantics, sessions, watches and bad input of the first server.
    Core,
    /// Issue 3: containers, TTL, multiRead, persistent watches, ACLs and auth.
    Extended,
}

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::Core => "core",
            Group::Extended => "extended",
        }
    }

    /// The configuration of the server the group's scenarios share.
    pub fn shared_spec(self) -> ServerSpec {
        match self {
            Group::Core => ServerSpec::core(),
            Group::Extended => ServerSpec::extended(),
        }
    }
}

/// How to configure a server (both kinds get the same zoo.cfg lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub tick_ms: u32,
    pub config: Vec<(String, String)>,
    /// Java system properties (Apache only; zooraft reads the matching zoo.cfg keys).
    pub jvm: Vec<(String, String)>,
}

/// How often containers and TTL nodes are checked for removal (ms).
pub const CONTAINER_CHECK_MS: &str = "100";

impl ServerSpec {
    /// tickTime 100 ms (so short sessions expire quickly), maxSessionTimeout raised to
    /// 60 s so that ordinary sessions (30 s requested) need no pings during a scenario.
    pub fn core() -> ServerSpec {
        ServerSpec {
            tick_ms: 100,
            config: vec![("maxSessionTimeout".into(), "60000".into())],
            jvm: vec![],
        }
    }

    /// The core settings plus TTL nodes enabled and a fast container/TTL reaper.
    /// zooraft is expected to read `znode.container.checkIntervalMs` from zoo.cfg.
    pub fn extended() -> ServerSpec {
        let mut s = ServerSpec::core();
        s.config
            .push(("extendedTypesEnabled".into(), "true".into()));
        s.config.push((
            "znode.container.checkIntervalMs".into(),
            CONTAINER_CHECK_MS.into(),
        ));
        s.jvm.push((
            "znode.container.checkIntervalMs".into(),
            CONTAINER_CHECK_MS.into(),
        ));
        s
    }

    /// ZooKeeper's defaults (min/max session timeout 2x/20x tick) with a given tick.
    pub fn defaults(tick_ms: u32) -> ServerSpec {
        ServerSpec {
            tick_ms,
            config: vec![],
            jvm: vec![],
        }
    }

    pub fn with(mut self, key: &str, value: &str) -> ServerSpec {
        self.config.push((key.into(), value.into()));
        self
    }

    pub fn start(&self, kind: ServerKind) -> TestServer {
        let mut b = TestServer::builder(kind).tick_time_ms(self.tick_ms);
        for (k, v) in &self.config {
            b = b.config(k, v);
        }
        for (k, v) in &self.jvm {
            b = b.jvm_property(k, v);
        }
        b.start()
    }
}

/// One scenario.
#[derive(Clone)]
pub struct Scenario {
    pub name: &'static str,
    /// `Some`: needs its own freshly started server with this configuration.
    pub fresh: Option<ServerSpec>,
    /// Whether the scenario works under its own root `/conf_<name>` (created for it).
    pub root: bool,
    pub run: RunFn,
}

impl Scenario {
    pub fn shared(name: &'static str, run: RunFn) -> Scenario {
        Scenario {
            name,
            fresh: None,
            root: true,
            run,
        }
    }

    pub fn fresh(name: &'static str, spec: ServerSpec, run: RunFn) -> Scenario {
        Scenario {
            name,
            fresh: Some(spec),
            root: false,
            run,
        }
    }
}

/// What one run of one scenario produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub lines: Vec<NormLine>,
    pub aborted: Option<String>,
    pub timed_out: bool,
    pub elapsed: Duration,
}

/// Runs one scenario on the server at `addr`.
pub async fn run_scenario(addr: SocketAddr, sc: &Scenario) -> Outcome {
    let start = Instant::now();
    let root = if sc.root {
        format!("/conf_{}", sc.name)
    } else {
        String::new()
    };
    let mut ctx = Ctx::new(addr, root);
    let mut aborted = None;
    let mut timed_out = false;
    if sc.root {
        if let Err(e) = ctx.create_root().await {
            aborted = Some(e);
        }
        // The root's ctime must not share a millisecond with the scenario's first write.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    if aborted.is_none() {
        match tokio::time::timeout(SCENARIO_TIMEOUT, (sc.run)(&mut ctx)).await {
            Ok(Ok(())) => {}
            Ok(Err(f)) => aborted = Some(f.0),
            Err(_) => timed_out = true,
        }
    }
    if let Some(a) = &aborted {
        ctx.note(format!("!! scenario aborted: {a}"));
    }
    if timed_out {
        ctx.note(format!("!! scenario timed out after {SCENARIO_TIMEOUT:?}"));
    }
    let _ = tokio::time::timeout(Duration::from_secs(20), ctx.cleanup()).await;
    let t: Transcript = ctx.into_transcript();
    Outcome {
        lines: t.normalize(),
        aborted,
        timed_out,
        elapsed: start.elapsed(),
    }
}

/// The verdict on one scenario.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub name: &'static str,
    pub passed: bool,
    pub report: String,
}

fn judge(sc: &Scenario, reference: &Outcome, candidate: &Outcome, cand_name: &str) -> Verdict {
    let a = compared(&reference.lines);
    let b = compared(&candidate.lines);
    let mut problems = Vec::new();
    if reference.timed_out || candidate.timed_out {
        problems.push("timed out".to_string());
    }
    if let Some(e) = &reference.aborted {
        problems.push(format!("scenario broken on the reference server: {e}"));
    }
    if a != b {
        problems.push("transcripts differ".to_string());
    }
    let passed = problems.is_empty();
    let mut report = String::new();
    if !passed {
        report.push_str(&format!(
            "---- {}: {} (reference zookeeper {:.1?}, {cand_name} {:.1?})\n",
            sc.name,
            problems.join("; "),
            reference.elapsed,
            candidate.elapsed
        ));
        report.push_str(&format!("     diff (- zookeeper, + {cand_name}):\n"));
        for l in diff(&a, &b) {
            report.push_str(&format!("    {l}\n"));
        }
    }
    let allowed: Vec<&NormLine> = reference
        .lines
        .iter()
        .chain(candidate.lines.iter())
        .filter(|l| !l.compared)
        .collect();
    if !allowed.is_empty() && std::env::var("CONFORMANCE_VERBOSE").is_ok() {
        report.push_str(&format!("     {}: allowed differences:\n", sc.name));
        for l in allowed {
            report.push_str(&format!("       {}\n", l.text));
        }
    }
    Verdict {
        name: sc.name,
        passed,
        report,
    }
}

/// Writes straight to stderr, past the test harness's output capture, so CI logs show it.
pub fn say(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = err.write_all(b"\n");
    }
    let _ = err.flush();
}

/// Which server the candidate side runs: `CONFORMANCE_TARGET=zookeeper` for a second
/// Apache ZooKeeper, anything else (default) zooraft.
pub fn candidate_kind() -> ServerKind {
    match std::env::var("CONFORMANCE_TARGET").as_deref() {
        Ok("zookeeper") | Ok("apache") => ServerKind::Apache,
        _ => ServerKind::Zooraft,
    }
}

/// Pass/fail counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
}

/// Running totals over the groups run by this process, and one group at a time.
static TOTALS: Mutex<Summary> = Mutex::new(Summary {
    passed: 0,
    failed: 0,
});
static ONE_GROUP_AT_A_TIME: Mutex<()> = Mutex::new(());

fn start_pair(spec: &ServerSpec, cand: ServerKind) -> Result<(TestServer, TestServer), String> {
    std::thread::scope(|s| {
        let a = s.spawn(|| spec.start(ServerKind::Apache));
        let b = s.spawn(|| spec.start(cand));
        let a = a.join();
        let b = b.join();
        match (a, b) {
            (Ok(a), Ok(b)) => Ok((a, b)),
            _ => Err("a server failed to start (see the panic message above)".to_string()),
        }
    })
}

/// Runs every scenario of `group` (filtered by `CONFORMANCE_FILTER`, comma-separated
/// substrings of scenario names), prints the verdicts
/// and the counts, and returns the counts.
pub fn run_group(group: Group, scenarios: Vec<Scenario>) -> Summary {
    let _one = ONE_GROUP_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let started = Instant::now();
    let cand = candidate_kind();
    let cand_name = match cand {
        ServerKind::Apache => "zookeeper#2",
        ServerKind::Zooraft => "zooraft",
    };
    let filter = std::env::var("CONFORMANCE_FILTER").unwrap_or_default();
    let list: Vec<Scenario> = scenarios
        .into_iter()
        .filter(|s| {
            filter.is_empty()
                || filter
                    .split(',')
                    .any(|f| !f.is_empty() && s.name.contains(f))
        })
        .collect();
    say(&format!(
        "conformance[{}]: {} scenarios, zookeeper vs {cand_name}",
        group.name(),
        list.len()
    ));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut shared: Option<(TestServer, TestServer)> = None;
    if list.iter().any(|s| s.fresh.is_none()) {
        match start_pair(&group.shared_spec(), cand) {
            Ok(p) => shared = Some(p),
            Err(e) => panic!("conformance[{}]: {e}", group.name()),
        }
    }
    let mut summary = Summary::default();
    let mut failures = Vec::new();
    for sc in &list {
        if started.elapsed() > GROUP_BUDGET {
            summary.failed += 1;
            failures.push(sc.name);
            say(&format!(
                "FAIL {} (not run: group time budget spent)",
                sc.name
            ));
            continue;
        }
        let fresh_pair;
        let (a, b) = match &sc.fresh {
            None => match &shared {
                Some((a, b)) => (a.addr(), b.addr()),
                None => unreachable!("shared servers start when any scenario needs them"),
            },
            Some(spec) => match start_pair(spec, cand) {
                Ok(p) => {
                    fresh_pair = p;
                    (fresh_pair.0.addr(), fresh_pair.1.addr())
                }
                Err(e) => {
                    summary.failed += 1;
                    failures.push(sc.name);
                    say(&format!("FAIL {}: {e}", sc.name));
                    continue;
                }
            },
        };
        let (ra, rb) =
            rt.block_on(async { tokio::join!(run_scenario(a, sc), run_scenario(b, sc)) });
        let v = judge(sc, &ra, &rb, cand_name);
        if v.passed {
            summary.passed += 1;
            say(&format!(
                "ok   {} ({:.1?})",
                v.name,
                ra.elapsed.max(rb.elapsed)
            ));
        } else {
            summary.failed += 1;
            failures.push(v.name);
            say(&format!("FAIL {}", v.name));
        }
        if !v.report.is_empty() {
            say(&v.report);
        }
        if std::env::var("CONFORMANCE_SHOW").is_ok() {
            let mut text = format!("     transcript of {} (zookeeper):\n", sc.name);
            for l in &ra.lines {
                text.push_str(&format!(
                    "       {}{}\n",
                    if l.compared { "" } else { "(not compared) " },
                    l.text
                ));
            }
            say(&text);
        }
    }
    drop(shared);
    let total = {
        let mut t = TOTALS.lock().unwrap_or_else(|p| p.into_inner());
        t.passed += summary.passed;
        t.failed += summary.failed;
        *t
    };
    if !failures.is_empty() {
        say(&format!(
            "conformance[{}]: failed scenarios: {}",
            group.name(),
            failures.join(", ")
        ));
    }
    say(&format!(
        "conformance[{}]: {} passed, {} failed ({:.1?})",
        group.name(),
        summary.passed,
        summary.failed,
        started.elapsed()
    ));
    say(&format!(
        "conformance: {} passed, {} failed",
        total.passed, total.failed
    ));
    summary
}
