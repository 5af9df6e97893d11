//! The world of one scenario: an ensemble, its clients, the fault schedule and how each
//! fault is injected, and the end of the run (heal, stop, keep logs, report).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zookeeper_client as zc;
use zooraft_tests::TestEnsemble;

use crate::clients::{
    connect, dump_tree, ephemeral, owner_on_member, owner_task, persistent, writer_task, Owner,
    OwnerState,
};
use crate::contender::{Contender, ContenderConfig, CsEntry, FenceServer};
use crate::links::ClientLink;
use crate::util::{bounded, lock, scenario_seed, signal, Rng};
use crate::{
    CONTENDER_SESSION, CONTENDER_TEST, FRAGILE_SESSION, STEADY_SESSION, TOOL_SESSION, WAIT,
};
use zooraft_tests::registers::{Reads, Registers};

#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    Leader,
    Follower,
    Any,
}

#[derive(Debug, Clone)]
pub(crate) enum Fault {
    /// SIGSTOP a member, SIGCONT after the given time.
    PauseMember(Target, Duration),
    /// kill -9 a member; restart it after the given time.
    KillMember(Target, Duration),
    /// kill -9 the leader and a follower at once (five members keep a quorum).
    KillTwo(Duration),
    /// Cut every link between a member and its peers.
    IsolateMember(Target, Duration),
    /// kill -9 every member, restart them all.
    RestartAll(Duration),
    /// SIGSTOP the lock holder in the middle of its critical section.
    PauseHolder(Duration),
    /// SIGSTOP a contender process (holding or not) for less than its session timeout.
    PauseContender(Duration),
    /// Cut a contender's links (reset or blackhole) past its session timeout.
    CutContender { blackhole: bool, time: Duration },
    /// Cut a fragile owner's links past its session timeout: it must expire.
    CutFragile { blackhole: bool, time: Duration },
    /// Cut a steady owner's links for a fraction of its timeout: it must not expire.
    CutSteady { blackhole: bool, time: Duration },
    /// A session left alone for longer than its timeout in total, during which the leader
    /// is killed: the new leader re-arms it with a full timeout, so it survives.
    RearmAcrossFailover,
    /// Reconfig: remove a member from the configuration, kill -9 the leader (or another
    /// member) for the given time meanwhile, then add the removed member back. Needs an
    /// ensemble started with reconfig ([`World::with_reconfig`]).
    ReconfigOut(Target, Duration),
    /// Power loss of one member (kill -9, its lossy disk drops what was not synced),
    /// restarted after the given time. Needs a world on lossy disks.
    PowerLoss(Target, Duration),
    /// Power loss of a minority at once, the leader among them.
    PowerLossMinority(Duration),
    /// Power loss of every member at once.
    PowerLossAll(Duration),
    /// kill -9 a member, remove its data directory (a replaced disk: `myid` is written
    /// again), restart it after the given time. It must not vote until caught up.
    WipeMember(Target, Duration),
    /// Copy a member's data directory aside (killed, then restarted at once), let the
    /// ensemble write for the given time, then kill -9 it and restart it on the older
    /// copy (a directory restored from a backup).
    RollBackMember(Target, Duration),
    /// Cut one direction of this many member-to-member links, picked at random: the dialler
    /// can no longer reach the other member, which can still dial it (`partitions.rs`).
    OneWayCuts(usize, Duration),
    /// A bridge: the members split in two groups cut from each other both ways, but one
    /// member left connected to both.
    Bridge(Duration),
    /// The members split into two random halves (a minority and a majority) cut from each
    /// other both ways.
    RandomHalves(Duration),
    /// Flip a bit of a running member's table file: it must stop, naming the damage; its
    /// data directory is then emptied and it is restarted after the given time
    /// (`corruption.rs`). Needs a short `scrubIntervalSeconds`.
    CorruptTable(Target, Duration),
    /// Tear a running member's snapshot file: it must write a fresh one from its tree (then
    /// it is killed and restarted on it).
    TearSnapshot(Target),
}

/// A paused holder: the contender and the critical section it was stopped in.
pub(crate) struct HolderPause {
    pub(crate) contender: usize,
    pub(crate) pid: u32,
    pub(crate) cs: String,
}

/// Counters for the report.
#[derive(Default, Debug)]
pub(crate) struct Counts {
    pub(crate) faults: u64,
    pub(crate) expiries_caused: u64,
    pub(crate) expiries_seen: u64,
    pub(crate) survived_short_cuts: u64,
    pub(crate) rearm_survived: u64,
    pub(crate) holders_paused: u64,
    pub(crate) power_losses: u64,
    /// Unsynced writes the lossy disks dropped, and their bytes.
    pub(crate) dropped_writes: u64,
    pub(crate) dropped_bytes: u64,
    pub(crate) torn_writes: u64,
    /// Members that refused to start after a power loss (with a clear message).
    pub(crate) refused_starts: u64,
    /// Flipped tables a member stopped on, and torn snapshots it wrote afresh.
    pub(crate) corruptions_found: u64,
    pub(crate) snapshots_repaired: u64,
}

/// What a finished scenario reports, for the soak's totals.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Summary {
    pub(crate) faults: u64,
    pub(crate) power_losses: u64,
    pub(crate) dropped_writes: u64,
    pub(crate) acked: u64,
    pub(crate) refused_starts: u64,
}

pub(crate) struct World {
    pub(crate) name: String,
    pub(crate) seed: u64,
    pub(crate) rng: Rng,
    pub(crate) ensemble: TestEnsemble,
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) dir: tempfile::TempDir,
    /// The quorum TLS certificates, when the members talk TLS.
    _pki: Option<tempfile::TempDir>,
    pub(crate) t0: Instant,
    pub(crate) violations: Vec<String>,
    pub(crate) counts: Counts,
    /// Members run on lossy disks and every kill -9 is a power loss (`CHAOS_POWER_LOSS`).
    pub(crate) power_loss: bool,
    // Locks.
    pub(crate) fence: Option<FenceServer>,
    pub(crate) contenders: Vec<Contender>,
    pub(crate) pauses: Vec<HolderPause>,
    pub(crate) long_cuts: HashMap<usize, u64>,
    // Ephemerals.
    pub(crate) steady: Vec<Owner>,
    pub(crate) fragile: Vec<Owner>,
    /// Sessions the schedule expired on purpose: (owner, session, node).
    pub(crate) doomed: Vec<(String, i64, String)>,
    // The writer.
    pub(crate) acked: Arc<Mutex<Vec<(String, i64)>>>,
    pub(crate) quiet: Arc<AtomicBool>,
    pub(crate) close: Arc<AtomicBool>,
    pub(crate) tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The register clients, whose history must be linearizable.
    pub(crate) registers: Option<Registers>,
}

/// `CHAOS_QUORUM_TLS=1`: every scenario's members talk TLS.
pub(crate) fn tls_from_env() -> bool {
    std::env::var("CHAOS_QUORUM_TLS").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// zoo.cfg lines for quorum TLS with a CA and a member certificate made under `dir`.
pub(crate) fn quorum_tls_lines(dir: &std::path::Path) -> Vec<(String, String)> {
    let ca = zooraft_tests::pki::Ca::new(dir, "chaos-ca");
    let member = ca.issue("member", "/CN=member");
    vec![
        ("sslQuorum".into(), "true".into()),
        (
            "ssl.quorum.keyStore.location".into(),
            member.pem_store.display().to_string(),
        ),
        (
            "ssl.quorum.trustStore.location".into(),
            ca.cert.display().to_string(),
        ),
    ]
}

/// How a world's ensemble is started.
#[derive(Clone, Copy)]
enum Disks {
    /// Behind per-link proxies, data on the real disk.
    Plain,
    /// Behind per-link proxies, data on lossy disks (power losses).
    Lossy,
    /// With reconfig on: no proxies (the committed configuration's addresses route around
    /// them).
    Reconfig,
}

pub(crate) const LOCK_PATH: &str = "/chaos/locks/l";
pub(crate) const COUNTER: &str = "/chaos/counter";

impl World {
    pub(crate) fn new(name: &str, members: usize) -> World {
        World::with_config(name, members, &[])
    }

    /// A world whose members talk mutual TLS (`sslQuorum=true`, a CA and a member
    /// certificate made for it): pauses, kills, isolation and restarts reconnect through TLS
    /// handshakes. `CHAOS_QUORUM_TLS=1` runs every scenario this way.
    pub(crate) fn with_quorum_tls(name: &str, members: usize) -> World {
        World::start(name, members, &[], true, Disks::Plain)
    }

    /// A world whose members have extra zoo.cfg lines; on lossy disks with
    /// `CHAOS_POWER_LOSS=1`.
    pub(crate) fn with_config(name: &str, members: usize, extra: &[(&str, &str)]) -> World {
        if crate::power::power_loss_switch() {
            return World::on_lossy_disks(name, members, extra);
        }
        World::start(name, members, extra, tls_from_env(), Disks::Plain)
    }

    /// A world whose members keep their data on lossy disks: every kill -9 of the schedule
    /// is a power loss, and the power-loss faults can be used.
    pub(crate) fn on_lossy_disks(name: &str, members: usize, extra: &[(&str, &str)]) -> World {
        let mut w = World::start(name, members, extra, tls_from_env(), Disks::Lossy);
        w.power_loss = true;
        w.event("members on lossy disks: kill -9 faults are power losses");
        w
    }

    /// A world whose members take reconfigs (`reconfigEnabled`). No per-link proxies: the
    /// committed configuration gives every member the same peer addresses, which would
    /// route around them; a member is isolated by its test hook instead (see
    /// `TestEnsemble::isolate`).
    pub(crate) fn with_reconfig(name: &str, members: usize) -> World {
        World::start(
            name,
            members,
            zooraft_tests::ensemble::RECONFIG,
            tls_from_env(),
            Disks::Reconfig,
        )
    }

    fn start(name: &str, members: usize, extra: &[(&str, &str)], tls: bool, disks: Disks) -> World {
        let pki = tls.then(|| tempfile::tempdir().expect("temp dir"));
        let tls_lines = pki
            .as_ref()
            .map(|d| quorum_tls_lines(d.path()))
            .unwrap_or_default();
        let mut lines: Vec<(&str, &str)> = extra.to_vec();
        lines.extend(tls_lines.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let ensemble = match disks {
            Disks::Reconfig => TestEnsemble::start(members, 0, &lines),
            Disks::Plain => TestEnsemble::start_partitionable(members, 0, &lines),
            Disks::Lossy => TestEnsemble::start_lossy(members, &lines),
        };
        let name = if tls {
            format!("{name}-tls")
        } else {
            name.to_string()
        };
        let mut world = World::around(&name, members, ensemble);
        world._pki = pki;
        world
    }

    fn around(name: &str, members: usize, ensemble: TestEnsemble) -> World {
        let seed = scenario_seed(name);
        println!(
            "chaos {name}: seed {seed:#x} (replay with CHAOS_SEED={seed:#x}), {members} members"
        );
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let world = World {
            name: name.to_string(),
            seed,
            rng: Rng::new(seed),
            ensemble,
            rt,
            dir: tempfile::tempdir().expect("temporary directory"),
            _pki: None,
            t0: Instant::now(),
            violations: Vec::new(),
            counts: Counts::default(),
            power_loss: false,
            fence: None,
            contenders: Vec::new(),
            pauses: Vec::new(),
            long_cuts: HashMap::new(),
            steady: Vec::new(),
            fragile: Vec::new(),
            doomed: Vec::new(),
            acked: Arc::new(Mutex::new(Vec::new())),
            quiet: Arc::new(AtomicBool::new(false)),
            close: Arc::new(AtomicBool::new(false)),
            tasks: Vec::new(),
            registers: None,
        };
        let hosts = world.ensemble.connect_string();
        world.rt.block_on(async {
            let c = connect(&hosts, TOOL_SESSION).await.expect("set-up client");
            for p in [
                "/chaos",
                "/chaos/locks",
                LOCK_PATH,
                "/chaos/eph",
                "/chaos/acks",
            ] {
                create_persistent(&c, p, b"").await;
            }
            create_persistent(&c, COUNTER, b"0 init").await;
        });
        world
    }

    pub(crate) fn event(&self, what: &str) {
        println!(
            "[{:6.2}s] {}: {what}",
            self.t0.elapsed().as_secs_f64(),
            self.name
        );
    }

    pub(crate) fn violation(&mut self, what: String) {
        println!(
            "[{:6.2}s] {}: VIOLATION {what}",
            self.t0.elapsed().as_secs_f64(),
            self.name
        );
        self.violations.push(what);
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.dir.path().join("sections.log")
    }

    pub(crate) fn stop_path(&self) -> PathBuf {
        self.dir.path().join("stop")
    }

    // --- workloads ---

    pub(crate) fn start_contenders(&mut self, n: usize) {
        let fence = FenceServer::start();
        let exe = std::env::current_exe().expect("test executable");
        for id in 0..n {
            let link = ClientLink::new(&self.ensemble);
            let cfg = ContenderConfig {
                id,
                connect: link.connect_string(),
                lock_path: LOCK_PATH.into(),
                counter: COUNTER.into(),
                fence: fence.addr.to_string(),
                log: self.log_path(),
                state: self.dir.path().join(format!("state-{id}")),
                stop: self.stop_path(),
                session: CONTENDER_SESSION,
                // Both recipes backends contend for the same lock.
                backend: if id % 2 == 0 {
                    "zookeeper-client".into()
                } else {
                    "zookeeper-async".into()
                },
            };
            let out = std::fs::File::create(self.dir.path().join(format!("contender-{id}.out")))
                .expect("contender output file");
            let err = out.try_clone().expect("clone output handle");
            let mut cmd = Command::new(&exe);
            cmd.args([
                CONTENDER_TEST,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .envs(cfg.env())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
            let child = cmd.spawn().expect("spawn a lock contender");
            self.contenders.push(Contender {
                id,
                child,
                link,
                state: cfg.state,
            });
        }
        self.fence = Some(fence);
        // Wait until the lock changes hands a few times.
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.sections().len() < 3 {
            assert!(
                Instant::now() < deadline,
                "the contenders made no progress; log:\n{}",
                std::fs::read_to_string(self.log_path()).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        self.event(&format!("{n} lock contenders running"));
    }

    pub(crate) fn sections(&self) -> Vec<CsEntry> {
        std::fs::read_to_string(self.log_path())
            .unwrap_or_default()
            .lines()
            .filter_map(CsEntry::parse)
            .collect()
    }

    pub(crate) fn start_owners(&mut self, steady: usize, fragile: usize) {
        for (class, count, timeout) in [
            ("steady", steady, STEADY_SESSION),
            ("fragile", fragile, FRAGILE_SESSION),
        ] {
            for k in 0..count {
                let link = ClientLink::new(&self.ensemble);
                let owner = Owner {
                    name: format!("{class}{k}"),
                    timeout,
                    state: Arc::new(Mutex::new(OwnerState::default())),
                    link,
                };
                self.tasks.push(self.rt.spawn(owner_task(
                    owner.name.clone(),
                    owner.link.connect_string(),
                    timeout,
                    owner.state.clone(),
                    self.quiet.clone(),
                    self.close.clone(),
                )));
                if class == "steady" {
                    self.steady.push(owner);
                } else {
                    self.fragile.push(owner);
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while self
            .steady
            .iter()
            .chain(&self.fragile)
            .any(|o| o.current().is_none())
        {
            assert!(Instant::now() < deadline, "ephemeral owners did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        self.event(&format!(
            "{steady} steady ({STEADY_SESSION:?}) and {fragile} fragile ({FRAGILE_SESSION:?}) ephemeral owners running"
        ));
    }

    pub(crate) fn start_writer(&mut self) {
        let link = self.ensemble.connect_string();
        self.tasks.push(
            self.rt
                .spawn(writer_task(link, self.acked.clone(), self.quiet.clone())),
        );
    }

    /// Starts `clients` register clients on the whole ensemble (see `zooraft_tests::registers`).
    pub(crate) fn start_registers(&mut self, clients: usize, reads: Reads) {
        let hosts = self.ensemble.connect_string();
        let seed = self.rng.next();
        self.registers = Some(Registers::start(&self.rt, &hosts, clients, reads, seed));
        self.event(&format!(
            "{clients} register clients running, reads {reads:?}"
        ));
    }

    // --- the schedule ---

    pub(crate) fn pick(&mut self, target: Target) -> usize {
        let leader = self.ensemble.leader();
        match target {
            Target::Leader => leader,
            Target::Follower => {
                let others: Vec<usize> =
                    (0..self.ensemble.len()).filter(|i| *i != leader).collect();
                others[self.rng.below(others.len())]
            }
            Target::Any => self.rng.below(self.ensemble.len()),
        }
    }

    /// Between two faults: every member serves, and every steady owner has written again.
    ///
    /// The second matters because the schedule promises steady sessions faults that are each
    /// shorter than their timeout. A client that is still backing off from one fault (the
    /// zookeeper-client crate waits up to seconds between rounds of reconnects) when the next
    /// begins would see one outage as long as both, and may rightly expire.
    pub(crate) fn settle(&mut self) {
        self.ensemble.wait_all_serving();
        self.wait_for_steady_owners();
        std::thread::sleep(Duration::from_secs(1));
    }

    /// Waits until each steady owner's live session has had a write succeed since now. A
    /// session that expired meanwhile is the checker's to report, not a reason to wait.
    fn wait_for_steady_owners(&mut self) {
        let since = Instant::now();
        let late = owners_writing_since(&self.steady, since, true);
        if !self.steady.is_empty() {
            self.event(&format!(
                "steady owners writing again after {:?}",
                since.elapsed()
            ));
        }
        for name in late {
            self.violation(format!(
                "{name}: no successful write within {WAIT:?} of every member serving"
            ));
        }
    }

    pub(crate) fn run_schedule(&mut self, mut schedule: Vec<Fault>) {
        self.rng.shuffle(&mut schedule);
        let plan: Vec<String> = schedule.iter().map(|f| format!("{f:?}")).collect();
        self.event(&format!(
            "schedule of {} faults: {}",
            schedule.len(),
            plan.join(", ")
        ));
        for (step, fault) in schedule.into_iter().enumerate() {
            self.event(&format!("step {}: {fault:?}", step + 1));
            self.inject(fault);
            self.counts.faults += 1;
            self.settle();
        }
    }

    pub(crate) fn inject(&mut self, fault: Fault) {
        match fault {
            Fault::PauseMember(target, time) => {
                let i = self.pick(target);
                self.event(&format!("SIGSTOP member {} for {time:?}", i + 1));
                self.ensemble.member(i).pause();
                std::thread::sleep(time);
                self.ensemble.member(i).resume();
            }
            Fault::KillMember(target, down) => {
                let i = self.pick(target);
                if self.power_loss {
                    return self.power_loss(&[i], down);
                }
                self.event(&format!("kill -9 member {} for {down:?}", i + 1));
                self.ensemble.member_mut(i).kill();
                std::thread::sleep(down);
                self.ensemble.member_mut(i).respawn();
            }
            Fault::KillTwo(down) => {
                let leader = self.pick(Target::Leader);
                let follower = self.pick(Target::Follower);
                if self.power_loss {
                    return self.power_loss(&[leader, follower], down);
                }
                self.event(&format!(
                    "kill -9 members {} (leader) and {} for {down:?}",
                    leader + 1,
                    follower + 1
                ));
                self.ensemble.member_mut(leader).kill();
                self.ensemble.member_mut(follower).kill();
                std::thread::sleep(down);
                self.ensemble.member_mut(leader).respawn();
                self.ensemble.member_mut(follower).respawn();
            }
            Fault::IsolateMember(target, time) => {
                let i = self.pick(target);
                self.event(&format!("isolate member {} for {time:?}", i + 1));
                self.ensemble.isolate(i);
                std::thread::sleep(time);
                self.ensemble.heal(i);
                let deadline = Instant::now() + Duration::from_secs(30);
                while !self.ensemble.member(i).is_serving() {
                    assert!(Instant::now() < deadline, "member {} did not rejoin", i + 1);
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            Fault::RestartAll(down) if self.power_loss => {
                let all: Vec<usize> = (0..self.ensemble.len()).collect();
                self.power_loss(&all, down);
            }
            Fault::RestartAll(down) => {
                self.event(&format!("kill -9 every member for {down:?}"));
                for i in 0..self.ensemble.len() {
                    self.ensemble.member_mut(i).kill();
                }
                std::thread::sleep(down);
                for i in 0..self.ensemble.len() {
                    self.ensemble.member_mut(i).respawn();
                }
            }
            Fault::PauseHolder(time) => self.pause_holder(time),
            Fault::PauseContender(time) => {
                let k = self.rng.below(self.contenders.len());
                let pid = self.contenders[k].pid();
                self.event(&format!("SIGSTOP contender {k} for {time:?}"));
                signal(pid, libc::SIGSTOP);
                std::thread::sleep(time);
                signal(pid, libc::SIGCONT);
            }
            Fault::CutContender { blackhole, time } => {
                // Prefer the holder, so that a held lock is lost with the session.
                let deadline = Instant::now() + Duration::from_secs(3);
                let k = loop {
                    if let Some(c) = self.contenders.iter().find(|c| c.working_on().is_some()) {
                        break c.id;
                    }
                    if Instant::now() > deadline {
                        break self.rng.below(self.contenders.len());
                    }
                    std::thread::sleep(Duration::from_millis(10));
                };
                self.event(&format!(
                    "cut contender {k}'s links ({}) for {time:?}",
                    if blackhole { "blackhole" } else { "reset" }
                ));
                self.contenders[k].link.cut(blackhole);
                std::thread::sleep(time);
                self.contenders[k].link.heal();
                *self.long_cuts.entry(k).or_default() += 1;
                self.counts.expiries_caused += 1;
            }
            Fault::CutFragile { blackhole, time } => self.cut_fragile(blackhole, time),
            Fault::CutSteady { blackhole, time } => self.cut_steady(blackhole, time),
            Fault::RearmAcrossFailover => self.rearm_across_failover(),
            Fault::ReconfigOut(target, down) => self.reconfig_out(target, down),
            Fault::PowerLoss(target, down) => {
                let i = self.pick(target);
                self.power_loss(&[i], down);
            }
            Fault::PowerLossMinority(down) => {
                let leader = self.pick(Target::Leader);
                let mut v = vec![leader];
                while v.len() < (self.ensemble.len() - 1) / 2 {
                    let f = self.pick(Target::Follower);
                    if !v.contains(&f) {
                        v.push(f);
                    }
                }
                self.power_loss(&v, down);
            }
            Fault::PowerLossAll(down) => {
                let all: Vec<usize> = (0..self.ensemble.len()).collect();
                self.power_loss(&all, down);
            }
            Fault::WipeMember(target, down) => {
                let i = self.pick(target);
                self.event(&format!(
                    "kill -9 member {}, wipe its data directory, restart it after {down:?}",
                    i + 1
                ));
                self.ensemble.member_mut(i).kill();
                let dir = self.ensemble.member(i).data_dir();
                std::fs::remove_dir_all(&dir).expect("wipe a data directory");
                std::thread::sleep(down);
                self.ensemble.member_mut(i).respawn();
            }
            Fault::RollBackMember(target, time) => self.roll_back(target, time),
            Fault::OneWayCuts(links, time) => self.one_way_cuts(links, time),
            Fault::Bridge(time) => self.bridge(time),
            Fault::RandomHalves(time) => self.random_halves(time),
            Fault::CorruptTable(target, down) => self.corrupt_table(target, down),
            Fault::TearSnapshot(target) => self.tear_snapshot(target),
        }
    }

    /// See [`Fault::RollBackMember`].
    fn roll_back(&mut self, target: Target, time: Duration) {
        let i = self.pick(target);
        let dir = self.ensemble.member(i).data_dir();
        let copy = dir.with_extension("older");
        self.event(&format!(
            "copy member {}'s data directory aside, restore it after {time:?} of writes",
            i + 1
        ));
        self.ensemble.member_mut(i).kill();
        zooraft_tests::faults::copy_dir(&dir, &copy);
        self.ensemble.member_mut(i).respawn();
        std::thread::sleep(time);
        self.ensemble.member_mut(i).kill();
        std::fs::remove_dir_all(&dir).expect("remove the newer data directory");
        std::fs::rename(&copy, &dir).expect("put the older copy back");
        self.ensemble.member_mut(i).respawn();
    }

    fn reconfig_out(&mut self, target: Target, down: Duration) {
        let out = self.pick(target);
        let leader = self.pick(Target::Leader);
        let n = self.ensemble.len();
        let victim = if leader != out {
            leader
        } else {
            (0..n).find(|j| *j != out).unwrap_or(0)
        };
        let Some(admin) = (0..n).find(|j| *j != out && *j != victim) else {
            return;
        };
        self.event(&format!(
            "reconfig: remove member {}, kill -9 member {} for {down:?}, add member {} back",
            out + 1,
            victim + 1,
            out + 1
        ));
        let addr = self.ensemble.member(admin).addr();
        let mut c = self.rt.block_on(zooraft_tests::admin::Admin::open(addr));
        let line = self.rt.block_on(async {
            let text = c.config().await;
            let line = zooraft_tests::admin::line_of(&text, out);
            let leaving = (out + 1).to_string();
            let (after, _) = c.change(None, Some(&leaving), -1).await;
            assert!(
                !after.contains(&line),
                "member {} still in {after}",
                out + 1
            );
            line
        });
        self.ensemble.member_mut(victim).kill();
        std::thread::sleep(down);
        self.ensemble.member_mut(victim).respawn();
        self.rt.block_on(async {
            let (back, _) = c.change(Some(&line), None, -1).await;
            assert!(
                back.contains(&line),
                "member {} not back in {back}",
                out + 1
            );
        });
    }

    /// Stops a contender that is inside its critical section, before its second fence write
    /// and its fenced increment, for longer than its session. Its successor takes the lock;
    /// when the paused holder wakes up, both of its remaining writes must be refused.
    pub(crate) fn pause_holder(&mut self, time: Duration) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let order: Vec<usize> = {
                let mut o: Vec<usize> = (0..self.contenders.len()).collect();
                self.rng.shuffle(&mut o);
                o
            };
            for k in order {
                let Some(cs) = self.contenders[k].working_on() else {
                    continue;
                };
                let pid = self.contenders[k].pid();
                signal(pid, libc::SIGSTOP);
                std::thread::sleep(Duration::from_millis(5));
                if self.contenders[k].working_on().as_deref() != Some(cs.as_str()) {
                    signal(pid, libc::SIGCONT);
                    continue;
                }
                self.event(&format!(
                    "SIGSTOP lock holder {k} in critical section {cs} for {time:?}"
                ));
                std::thread::sleep(time);
                signal(pid, libc::SIGCONT);
                self.pauses.push(HolderPause {
                    contender: k,
                    pid,
                    cs,
                });
                self.counts.holders_paused += 1;
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let report = self.lock_report();
        self.violation(format!(
            "no contender was inside a critical section for 20 s; the lock then:\n{report}"
        ));
    }

    /// Who holds and who waits for the lock, as every member and every contender sees it:
    /// the lock's children with their owners, each member's sessions (`cons`), each
    /// contender's state file and process state. Printed with a liveness violation, so a
    /// stalled lock says which session holds it and whether that session is alive.
    fn lock_report(&self) -> String {
        let mut out = String::new();
        for i in 0..self.ensemble.len() {
            let tree = self.rt.block_on(dump_tree(&self.ensemble, i, LOCK_PATH));
            match tree {
                Ok(nodes) => {
                    for (path, n) in nodes.iter().filter(|(p, _)| p.as_str() != LOCK_PATH) {
                        out.push_str(&format!(
                            "  member {}: {path} czxid {:#x} owner {:#x}\n",
                            i + 1,
                            n.czxid,
                            n.ephemeral_owner
                        ));
                    }
                }
                Err(e) => out.push_str(&format!("  member {}: {e}\n", i + 1)),
            }
            let cons = self
                .ensemble
                .member(i)
                .four_letter_word("cons")
                .unwrap_or_else(|e| format!("cons: {e}"));
            for line in cons.lines().filter(|l| !l.trim().is_empty()) {
                out.push_str(&format!("  member {} cons: {}\n", i + 1, line.trim()));
            }
        }
        for c in &self.contenders {
            let state = std::fs::read_to_string(&c.state).unwrap_or_default();
            let proc_state = std::fs::read_to_string(format!("/proc/{}/stat", c.pid()))
                .ok()
                .and_then(|s| {
                    let after = s.rsplit_once(')')?.1.trim_start().to_string();
                    after.split_whitespace().next().map(str::to_string)
                })
                .unwrap_or_else(|| "gone".into());
            out.push_str(&format!(
                "  contender {}: pid {} process state {proc_state}, state file {state:?}\n",
                c.id,
                c.pid()
            ));
        }
        out
    }

    /// Cuts a fragile owner off past its session timeout. It must see its session expire,
    /// and every member must drop its ephemeral.
    pub(crate) fn cut_fragile(&mut self, blackhole: bool, time: Duration) {
        let k = self.rng.below(self.fragile.len());
        let Some(before) = self.fragile[k].current() else {
            return;
        };
        let name = self.fragile[k].name.clone();
        self.event(&format!(
            "cut {name} (session {:#x}, {}) for {time:?} ({})",
            before.id,
            before.node,
            if blackhole { "blackhole" } else { "reset" }
        ));
        self.fragile[k].link.cut(blackhole);
        std::thread::sleep(time);
        self.fragile[k].link.heal();
        self.counts.expiries_caused += 1;
        self.doomed
            .push((name.clone(), before.id, before.node.clone()));
        // The client is told (or decides) that its session expired.
        let deadline = Instant::now() + WAIT;
        let state = self.fragile[k].state.clone();
        let seen = loop {
            if lock(&state)
                .sessions
                .iter()
                .any(|r| r.id == before.id && r.expired)
            {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if !seen {
            self.violation(format!(
                "{name}: session {:#x} was cut off for {time:?} (timeout {FRAGILE_SESSION:?}) and the client never saw it expire",
                before.id
            ));
        }
        // Every member drops the ephemeral.
        let mut left = Vec::new();
        for i in 0..self.ensemble.len() {
            let deadline = Instant::now() + WAIT;
            loop {
                let owner = self
                    .rt
                    .block_on(owner_on_member(&self.ensemble, i, &before.node));
                match owner {
                    Ok(None) => break,
                    Ok(Some(_)) | Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    other => {
                        left.push(format!("member {}: {other:?}", i + 1));
                        break;
                    }
                }
            }
        }
        if left.is_empty() {
            self.event(&format!(
                "{name}: session {:#x} expired; {} is gone on every member",
                before.id, before.node
            ));
        } else {
            self.violation(format!(
                "{name}: {} of expired session {:#x} is still there: {left:?}",
                before.node, before.id
            ));
        }
    }

    /// Cuts a steady owner off for a fraction of its timeout: same session afterwards, its
    /// ephemeral still there, and it writes again.
    pub(crate) fn cut_steady(&mut self, blackhole: bool, time: Duration) {
        let k = self.rng.below(self.steady.len());
        let Some(before) = self.steady[k].current() else {
            return;
        };
        let name = self.steady[k].name.clone();
        self.event(&format!(
            "cut {name} (session {:#x}) for {time:?} ({})",
            before.id,
            if blackhole { "blackhole" } else { "reset" }
        ));
        self.steady[k].link.cut(blackhole);
        std::thread::sleep(time);
        self.steady[k].link.heal();
        let healed = Instant::now();
        let deadline = healed + WAIT;
        let outcome = loop {
            let now = self.steady[k].current();
            match now {
                Some(r) if r.id == before.id && r.last_ok > healed => break Ok(()),
                Some(r) if r.id != before.id || r.expired => {
                    break Err(format!(
                        "{name}: session {:#x} expired after a cut of {time:?} (timeout {STEADY_SESSION:?})",
                        before.id
                    ))
                }
                _ if Instant::now() > deadline => {
                    break Err(format!(
                        "{name}: no successful write within {WAIT:?} after a cut of {time:?}"
                    ))
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        match outcome {
            Ok(()) => {
                self.counts.survived_short_cuts += 1;
                self.event(&format!("{name}: session {:#x} survived", before.id));
            }
            Err(e) => self.violation(e),
        }
    }

    /// A session is left alone (its client gone, not closed) for 1.25 times its timeout. In
    /// the middle, the leader is killed. The old leader would have expired it after one
    /// timeout; the new leader re-arms every session with a full timeout when it takes
    /// over, so the client can resume it.
    pub(crate) fn rearm_across_failover(&mut self) {
        let hosts = self.ensemble.connect_string();
        let node = format!("/chaos/eph/rearm-{}", self.counts.faults);
        let timeout = STEADY_SESSION;
        let (sid, info) = self.rt.block_on(async {
            let c = bounded(
                WAIT,
                zc::Client::connector()
                    .with_session_timeout(timeout)
                    .with_detached()
                    .connect(&hosts),
            )
            .await
            .expect("connect in time")
            .expect("connect");
            bounded(WAIT, c.create(&node, b"", &ephemeral()))
                .await
                .expect("create in time")
                .expect("create the ephemeral");
            (c.session_id().0, c.into_session())
        });
        let left = Instant::now();
        self.event(&format!(
            "session {sid:#x} ({node}) left alone; the leader dies in {:?}",
            timeout / 2
        ));
        std::thread::sleep(timeout / 2);
        let leader = self.pick(Target::Leader);
        self.event(&format!("kill -9 member {} (leader)", leader + 1));
        self.ensemble.member_mut(leader).kill();
        let back_at = left + timeout + timeout / 4;
        std::thread::sleep(back_at.saturating_duration_since(Instant::now()));
        let hosts: String = (0..self.ensemble.len())
            .filter(|i| *i != leader)
            .map(|i| self.ensemble.member(i).connect_string())
            .collect::<Vec<_>>()
            .join(",");
        let away = left.elapsed();
        let resumed = self.rt.block_on(async {
            let c = bounded(
                WAIT,
                zc::Client::connector()
                    .with_session(info)
                    .with_session_timeout(timeout)
                    .connect(&hosts),
            )
            .await
            .ok_or("no answer")?
            .map_err(|e| format!("{e}"))?;
            let owner = match bounded(WAIT, c.check_stat(&node)).await {
                Some(Ok(s)) => s.map(|s| s.ephemeral_owner),
                other => return Err(format!("stat: {other:?}")),
            };
            let same = c.session_id().0;
            drop(c); // closes the session
            Ok((same, owner))
        });
        match resumed {
            Ok((same, Some(owner))) if same == sid && owner == sid => {
                self.counts.rearm_survived += 1;
                self.event(&format!(
                    "session {sid:#x} resumed after {away:?} away (timeout {timeout:?}) across a failover"
                ));
            }
            other => self.violation(format!(
                "session {sid:#x} away {away:?} (timeout {timeout:?}), the leader killed after {:?}: \
                 the new leader should have re-armed it, but resuming gave {other:?}",
                timeout / 2
            )),
        }
        self.ensemble.member_mut(leader).respawn();
    }

    // --- the end ---

    /// Heals everything, lets the clients settle, stops the contenders and the writes.
    pub(crate) fn wind_down(&mut self) {
        for c in &self.contenders {
            signal(c.pid(), libc::SIGCONT);
            c.link.heal();
        }
        for o in self.steady.iter().chain(&self.fragile) {
            o.link.heal();
        }
        for i in 0..self.ensemble.len() {
            self.ensemble.heal(i);
            if !self.ensemble.member(i).is_running() {
                self.ensemble.member_mut(i).respawn();
            }
            self.ensemble.member(i).resume();
        }
        self.ensemble.wait_all_serving();
        std::thread::sleep(Duration::from_secs(2));
        if !self.contenders.is_empty() {
            std::fs::write(self.stop_path(), b"stop").expect("write the stop file");
            let deadline = Instant::now() + Duration::from_secs(45);
            for k in 0..self.contenders.len() {
                loop {
                    match self.contenders[k].child.try_wait() {
                        Ok(Some(status)) => {
                            if !status.success() {
                                let out = std::fs::read_to_string(
                                    self.dir.path().join(format!("contender-{k}.out")),
                                )
                                .unwrap_or_default();
                                self.violation(format!(
                                    "contender {k} exited with {status}:\n{out}"
                                ));
                            }
                            break;
                        }
                        _ if Instant::now() > deadline => {
                            let _ = self.contenders[k].child.kill();
                            let _ = self.contenders[k].child.wait();
                            self.violation(format!("contender {k} did not stop within 45 s"));
                            break;
                        }
                        _ => std::thread::sleep(Duration::from_millis(50)),
                    }
                }
            }
        }
        // Every owner works again (in its old session, or in a new one if the old expired),
        // so each current session was alive after the last fault.
        let healed = Instant::now();
        let owners: Vec<&Owner> = self.steady.iter().chain(&self.fragile).collect();
        for name in owners_writing_since(owners, healed, false) {
            self.violations.push(format!(
                "{name}: no successful write within {WAIT:?} after the faults ended"
            ));
        }
        self.quiet.store(true, Ordering::SeqCst);
        // Let in-flight writes finish before the trees are compared.
        std::thread::sleep(Duration::from_secs(1));
    }

    /// Copies every member's log (and the contenders' log) where a failure can be studied.
    pub(crate) fn keep_logs(&self) {
        let dir = std::env::temp_dir().join(format!("chaos-{}-{:x}", self.name, self.seed));
        if std::fs::create_dir_all(&dir).is_err() {
            return;
        }
        for i in 0..self.ensemble.len() {
            let _ = std::fs::copy(
                self.ensemble.member(i).log_path(),
                dir.join(format!("member-{}.log", i + 1)),
            );
        }
        let _ = std::fs::copy(self.log_path(), dir.join("sections.log"));
        for id in 0..self.contenders.len() {
            let name = format!("contender-{id}.out");
            let _ = std::fs::copy(self.dir.path().join(&name), dir.join(&name));
        }
        self.event(&format!("logs kept in {}", dir.display()));
    }

    /// Runs the end checks and fails the test with every violation and the seed.
    pub(crate) fn finish(mut self) -> Summary {
        self.wind_down();
        if let Some(registers) = self.registers.take() {
            let report = registers.finish(&self.rt);
            self.event(&report.summary);
            for v in report.violations {
                self.violation(v);
            }
        }
        let tree = self.check_convergence();
        if !self.contenders.is_empty() {
            self.check_locks(&tree);
        }
        if !self.steady.is_empty() || !self.fragile.is_empty() {
            self.check_ephemerals(&tree);
        }
        self.close.store(true, Ordering::SeqCst);
        for t in std::mem::take(&mut self.tasks) {
            let _ = self.rt.block_on(bounded(Duration::from_secs(5), t));
        }
        // Kept on a failure, and on request (`CHAOS_KEEP_LOGS=1`) to study a passing run.
        if !self.violations.is_empty() || std::env::var_os("CHAOS_KEEP_LOGS").is_some() {
            self.keep_logs();
        }
        self.event(&format!(
            "done in {:.1}s: {} faults injected, {:?}",
            self.t0.elapsed().as_secs_f64(),
            self.counts.faults,
            self.counts
        ));
        assert!(
            self.violations.is_empty(),
            "chaos {} (seed {:#x}, replay with CHAOS_SEED={:#x}): {} violation(s):\n  {}",
            self.name,
            self.seed,
            self.seed,
            self.violations.len(),
            self.violations.join("\n  ")
        );
        Summary {
            faults: self.counts.faults,
            power_losses: self.counts.power_losses,
            dropped_writes: self.counts.dropped_writes,
            acked: lock(&self.acked).len() as u64,
            refused_starts: self.counts.refused_starts,
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for c in &mut self.contenders {
            signal(c.child.id(), libc::SIGCONT);
            let _ = c.child.kill();
            let _ = c.child.wait();
        }
        self.close.store(true, Ordering::SeqCst);
    }
}

/// Creates a persistent node for the set-up, riding out a lost connection (a member of a
/// freshly started ensemble may still be settling); `NodeExists` is fine.
async fn create_persistent(c: &zc::Client, path: &str, data: &[u8]) {
    for _ in 0..10 {
        match bounded(WAIT, c.create(path, data, &persistent())).await {
            Some(Ok(_)) | Some(Err(zc::Error::NodeExists)) => return,
            Some(Err(zc::Error::ConnectionLoss)) | None => {
                tokio::time::sleep(Duration::from_millis(500)).await
            }
            Some(Err(e)) => panic!("create {path}: {e}"),
        }
    }
    panic!("create {path}: no success in 10 attempts");
}

/// Waits, up to [`WAIT`] from `since`, until each owner's current session has had a write
/// succeed after `since` (or, with `expired_ends_wait`, has expired: the checker reports
/// that); the names of the owners still waited for when the time ran out.
fn owners_writing_since<'a>(
    owners: impl IntoIterator<Item = &'a Owner>,
    since: Instant,
    expired_ends_wait: bool,
) -> Vec<String> {
    let deadline = since + WAIT;
    let mut late = Vec::new();
    for o in owners {
        loop {
            match o.current() {
                Some(r) if r.last_ok > since || (expired_ends_wait && r.expired) => break,
                _ if Instant::now() > deadline => {
                    late.push(o.name.clone());
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
    late
}
