//! The ensemble the bench runs: its layout (`server.N` lines for voters and observer
//! slots, the zoo.cfg every member shares), each member's process (ZooKeeper or zooraft,
//! killed with the bench however it ends) and what `srvr` and `mntr` say of it.

use std::collections::HashMap;

use super::*;

/// How the tables name a kind of server.
pub(super) fn title(kind: ServerKind) -> &'static str {
    match kind {
        ServerKind::Apache => "ZooKeeper",
        ServerKind::Zooraft => "zooraft",
    }
}

/// One `server.N` line.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) id: u64,
    pub(super) quorum: u16,
    pub(super) election: u16,
    pub(super) client: u16,
    pub(super) observer: bool,
}

/// The ensemble's members and what every zoo.cfg holds.
pub(super) struct Layout {
    pub(super) members: Vec<Member>,
    pub(super) init_limit: u32,
}

impl Layout {
    pub(super) fn new(voters: u64, observers: u64, init_limit: u32) -> Result<Layout> {
        let mut members = Vec::new();
        for id in 1..=voters + observers {
            members.push(Member {
                id,
                quorum: try_free_port()?,
                election: try_free_port()?,
                client: try_free_port()?,
                observer: id > voters,
            });
        }
        Ok(Layout {
            members,
            init_limit,
        })
    }

    pub(super) fn member(&self, id: u64) -> &Member {
        &self.members[id as usize - 1]
    }

    pub(super) fn client(&self, id: u64) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.member(id).client))
    }

    /// `/zookeeper/config` as ZooKeeper writes it for these members.
    pub(super) fn zookeeper_config(&self) -> String {
        let lines: Vec<zk_snapshot::ServerLine> = self
            .members
            .iter()
            .map(|m| zk_snapshot::ServerLine {
                id: m.id,
                host: "127.0.0.1".into(),
                quorum_port: m.quorum,
                election_port: m.election,
                observer: m.observer,
                client_port: m.client,
            })
            .collect();
        zk_snapshot::config_text(&lines)
    }

    /// Member `id`'s zoo.cfg lines as `kind`, beyond the kit's own (tickTime, dataDir,
    /// clientPort, clientPortAddress, AdminServer off, and ZooKeeper's 4lw whitelist and
    /// connection limit).
    pub(super) fn config(&self, id: u64, kind: ServerKind) -> Vec<(String, String)> {
        let me = self.member(id);
        let mut c: Vec<(String, String)> = vec![
            ("initLimit".into(), self.init_limit.to_string()),
            ("syncLimit".into(), SYNC_LIMIT.to_string()),
            ("maxClientCnxns".into(), "0".into()),
            ("4lw.commands.whitelist".into(), "*".into()),
        ];
        match kind {
            ServerKind::Apache if me.observer => c.push(("peerType".into(), "observer".into())),
            ServerKind::Apache => {}
            ServerKind::Zooraft => c.push(("migrateFromZooKeeper".into(), "true".into())),
        }
        for m in &self.members {
            c.push((
                format!("server.{}", m.id),
                format!(
                    "127.0.0.1:{}:{}{};127.0.0.1:{}",
                    m.quorum,
                    m.election,
                    if m.observer { ":observer" } else { "" },
                    m.client
                ),
            ));
        }
        c
    }
}

/// What `srvr` says.
#[derive(Debug, Clone, Default)]
pub(super) struct Srvr {
    pub(super) mode: Option<String>,
    pub(super) zxid: Option<i64>,
    pub(super) connections: Option<u64>,
}

pub(super) fn srvr(addr: SocketAddr) -> Option<Srvr> {
    let text = four_letter_word(addr, "srvr").ok()?;
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
    };
    Some(Srvr {
        mode: value("Mode:"),
        zxid: value("Zxid: 0x").and_then(|h| i64::from_str_radix(&h, 16).ok()),
        connections: value("Connections:").and_then(|c| c.parse().ok()),
    })
}

/// One `mntr` figure.
pub(super) fn mntr_figure(addr: SocketAddr, key: &str) -> Option<String> {
    let text = four_letter_word(addr, "mntr").ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('\t')?;
        (k == key).then(|| v.trim().to_string())
    })
}

/// One member's server (the kit's launcher: killed when dropped, and by the kernel should
/// the bench be killed first), and when its process was last spawned.
pub(super) struct Proc {
    pub(super) label: String,
    pub(super) id: u64,
    pub(super) client: SocketAddr,
    pub(super) server: TestServer,
    pub(super) spawned: Instant,
}

impl Proc {
    /// Sets up member `id` as `kind` (zoo.cfg, myid, an empty data directory under
    /// `work`) without starting it; `keep` keeps its directory when the bench ends.
    pub(super) fn prepare(
        layout: &Layout,
        id: u64,
        kind: ServerKind,
        work: &Path,
        zooraft: &Path,
        keep: bool,
    ) -> Result<Proc> {
        let mut b = TestServer::builder(kind)
            .data_root(work)
            .port(layout.member(id).client)
            .myid(id)
            .tick_time_ms(TICK_MS)
            .configs(layout.config(id, kind))
            .heap("3g")
            .binary(zooraft)
            .test_hooks(false)
            .log_level("info")
            .start_timeout(SYNC_TIMEOUT)
            .stop_grace(STOP_GRACE)
            // Started and restarted by the main thread only.
            .die_with_parent();
        if keep {
            b = b.keep_data();
        }
        let server = b
            .try_prepare()
            .with_context(|| format!("cannot set up {} member {id}", title(kind)))?;
        Ok(Proc {
            label: format!("{} member {id}", title(kind)),
            id,
            client: layout.client(id),
            server,
            spawned: Instant::now(),
        })
    }

    /// Starts the process (again, on the same data), without waiting for it to serve.
    pub(super) fn spawn(&mut self) -> Result<()> {
        self.spawned = Instant::now();
        self.server
            .try_respawn()
            .with_context(|| format!("cannot start {}", self.label))
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.server.pid()
    }

    /// An error if the process has exited (it was not stopped by us).
    pub(super) fn check(&mut self) -> Result<()> {
        if let Some(status) = self.server.exited() {
            self.server.kill();
            bail!(
                "{} exited ({status}); {} ends:\n{}",
                self.label,
                self.server.log_path().display(),
                self.server.log_tail()
            );
        }
        Ok(())
    }
}

/// Every server of the run.
pub(super) struct Cluster {
    pub(super) layout: Layout,
    pub(super) work: PathBuf,
    pub(super) zooraft: PathBuf,
    /// Keep every member's directory when the bench ends.
    pub(super) keep: bool,
    pub(super) voters: Vec<Proc>,
    pub(super) observers: BTreeMap<u64, Proc>,
    /// Stopped observers, by member and kind, with their data for a restart.
    pub(super) parked: HashMap<(u64, ServerKind), Proc>,
    pub(super) t0: Instant,
}

impl Cluster {
    pub(super) fn check(&mut self) -> Result<()> {
        for p in self.voters.iter_mut().chain(self.observers.values_mut()) {
            p.check()?;
        }
        Ok(())
    }

    pub(super) fn voter_addrs(&self) -> Vec<SocketAddr> {
        self.voters.iter().map(|v| v.client).collect()
    }

    /// ZooKeeper's leader: its client address and `srvr`.
    pub(super) fn leader(&self) -> Option<(SocketAddr, Srvr)> {
        self.voters.iter().find_map(|v| {
            let s = srvr(v.client)?;
            (s.mode.as_deref() == Some("leader")).then_some((v.client, s))
        })
    }

    /// Waits until every voter serves (one leader, the others following).
    pub(super) fn wait_voters(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check()?;
            let modes: Vec<Option<String>> = self
                .voters
                .iter()
                .map(|v| srvr(v.client).and_then(|s| s.mode))
                .collect();
            let leaders = modes
                .iter()
                .filter(|m| m.as_deref() == Some("leader"))
                .count();
            let followers = modes
                .iter()
                .filter(|m| m.as_deref() == Some("follower"))
                .count();
            if leaders == 1 && followers == self.voters.len() - 1 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the ZooKeeper voters did not all serve within {timeout:?} (modes {modes:?}); \
                     member 1's log ends:\n{}",
                    self.voters[0].server.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (at most 60 s) until the voters use less than 15% of a core together, so that
    /// a timed sync does not share the machine with their start-up work (snapshots, JIT, GC).
    pub(super) fn settle(&self) {
        let pids: Vec<u32> = self.voters.iter().filter_map(Proc::pid).collect();
        let cpu = || -> Duration {
            pids.iter()
                .filter_map(|p| zooraft_bench::cpu::process_cpu(*p))
                .sum()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (a, t) = (cpu(), Instant::now());
            std::thread::sleep(Duration::from_millis(500));
            let busy = (cpu().saturating_sub(a)).as_secs_f64() / t.elapsed().as_secs_f64();
            if busy < 0.15 {
                return;
            }
            if Instant::now() > deadline {
                progress!(
                    self.t0,
                    "the voters are still busy ({:.0}% of a core); going on",
                    busy * 100.0
                );
                return;
            }
        }
    }

    /// Starts ZooKeeper voter `id` on a copy of the data directory `data`.
    pub(super) fn start_voter(&mut self, id: u64, data: &Path) -> Result<()> {
        let mut p = self.prepare(id, ServerKind::Apache)?;
        zk_snapshot::copy_dir(data, &p.server.data_dir())?;
        p.spawn()?;
        self.voters.push(p);
        Ok(())
    }

    /// Starts observer `id` as `kind`: on the data it had when it was stopped, if it ran
    /// before as that kind, or else on an empty data directory.
    pub(super) fn start_observer(&mut self, id: u64, kind: ServerKind) -> Result<()> {
        let mut p = match self.parked.remove(&(id, kind)) {
            Some(p) => p,
            None => self.prepare(id, kind)?,
        };
        p.spawn()?;
        progress!(
            self.t0,
            "started {} (pid {})",
            p.label,
            p.pid().unwrap_or(0)
        );
        self.observers.insert(id, p);
        Ok(())
    }

    fn prepare(&self, id: u64, kind: ServerKind) -> Result<Proc> {
        Proc::prepare(&self.layout, id, kind, &self.work, &self.zooraft, self.keep)
    }

    /// Waits until observer `id` serves as an observer at the ZooKeeper leader's zxid;
    /// returns the time since its process was spawned.
    pub(super) fn wait_synced(&mut self, id: u64, timeout: Duration) -> Result<Duration> {
        let deadline = Instant::now() + timeout;
        let mut last = Srvr::default();
        loop {
            self.check()?;
            let p = &self.observers[&id];
            if let Some(s) = srvr(p.client) {
                if s.mode.as_deref() == Some("observer") {
                    let target = self.leader().and_then(|(_, l)| l.zxid);
                    if let (Some(z), Some(t)) = (s.zxid, target) {
                        if z >= t {
                            return Ok(p.spawned.elapsed());
                        }
                    }
                }
                last = s;
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not sync within {timeout:?} (last srvr: mode {:?}, zxid {:?}; leader {:?}); \
                     its log ends:\n{}",
                    p.label,
                    last.mode,
                    last.zxid.map(|z| format!("{z:#x}")),
                    self.leader().and_then(|(_, l)| l.zxid).map(|z| format!("{z:#x}")),
                    p.server.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Stops observer `id` (SIGTERM, then SIGKILL after the stop grace), keeping its data
    /// for a later start as the same kind.
    pub(super) fn stop_observer(&mut self, id: u64) {
        if let Some(mut p) = self.observers.remove(&id) {
            p.server.stop();
            self.parked.insert((id, p.server.kind()), p);
        }
    }
}
