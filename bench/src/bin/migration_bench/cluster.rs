//! The ensemble the bench runs: its layout (`server.N` lines for voters and observer
//! slots, the zoo.cfg every member shares), each member's process (ZooKeeper or zooraft,
//! killed with the bench however it ends) and what `srvr` and `mntr` say of it.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    ZooKeeper,
    Zooraft,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::ZooKeeper => "ZooKeeper",
            Kind::Zooraft => "zooraft",
        }
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

    pub(super) fn config(&self, id: u64, kind: Kind, data: &Path) -> String {
        let me = self.member(id);
        let mut c = format!(
            "tickTime={TICK_MS}\ninitLimit={}\nsyncLimit={SYNC_LIMIT}\ndataDir={}\n\
             clientPort={}\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n\
             4lw.commands.whitelist=*\n",
            self.init_limit,
            data.display(),
            me.client
        );
        match kind {
            Kind::ZooKeeper => {
                c.push_str("admin.enableServer=false\n");
                if me.observer {
                    c.push_str("peerType=observer\n");
                }
            }
            Kind::Zooraft => c.push_str("migrateFromZooKeeper=true\n"),
        }
        for m in &self.members {
            c.push_str(&format!(
                "server.{}=127.0.0.1:{}:{}{};127.0.0.1:{}\n",
                m.id,
                m.quorum,
                m.election,
                if m.observer { ":observer" } else { "" },
                m.client
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

/// A server process, killed when dropped.
pub(super) struct Proc {
    pub(super) label: String,
    pub(super) id: u64,
    pub(super) dir: PathBuf,
    pub(super) client: SocketAddr,
    pub(super) child: Option<Child>,
    pub(super) spawned: Instant,
}

impl Proc {
    /// Writes `dir/zoo.cfg` (data in `dir/data`, which may already hold ZooKeeper's data)
    /// and starts member `id` as `kind`; its output goes to `dir/server.log`.
    pub(super) fn spawn(
        layout: &Layout,
        id: u64,
        kind: Kind,
        dir: &Path,
        zooraft: &Path,
    ) -> Result<Proc> {
        let data = dir.join("data");
        std::fs::create_dir_all(&data)?;
        std::fs::write(data.join("myid"), format!("{id}\n"))?;
        let cfg = dir.join("zoo.cfg");
        std::fs::write(&cfg, layout.config(id, kind, &data))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("server.log"))?;
        let mut cmd = match kind {
            Kind::ZooKeeper => {
                let mut c = Command::new("java");
                c.args(["-Xmx3g", "-Dzookeeper.admin.enableServer=false", "-cp"])
                    .arg(JAVA_CP)
                    .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                    .arg(&cfg);
                c
            }
            Kind::Zooraft => {
                let mut c = Command::new(zooraft);
                c.arg("--config").arg(&cfg).env("RUST_LOG", "info");
                c
            }
        };
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // SAFETY: prctl(2) is async-signal-safe and touches no memory of this process. The
        // server is killed when the thread that spawned it (always the main thread) ends,
        // however the bench ends.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let spawned = Instant::now();
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {} member {id}", kind.name()))?;
        Ok(Proc {
            label: format!("{} member {id}", kind.name()),
            id,
            dir: dir.to_path_buf(),
            client: layout.client(id),
            child: Some(child),
            spawned,
        })
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub(super) fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// An error if the process has exited (it was not stopped by us).
    pub(super) fn check(&mut self) -> Result<()> {
        if let Some(child) = self.child.as_mut() {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                bail!(
                    "{} exited ({status}); {}/server.log ends:\n{}",
                    self.label,
                    self.dir.display(),
                    self.log_tail(30)
                );
            }
        }
        Ok(())
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub(super) fn stop(&mut self, grace: Duration) {
        if let Some(child) = self.child.take() {
            zooraft_kit::terminate(child, grace);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Every server of the run.
pub(super) struct Cluster {
    pub(super) layout: Layout,
    pub(super) work: PathBuf,
    pub(super) zooraft: PathBuf,
    pub(super) voters: Vec<Proc>,
    pub(super) observers: BTreeMap<u64, Proc>,
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
                    self.voters[0].log_tail(30)
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

    /// Starts observer `id` as `kind` in `work/<name>` (fresh unless it ran there before).
    pub(super) fn start_observer(&mut self, id: u64, kind: Kind, name: &str) -> Result<()> {
        let dir = self.work.join(name);
        let p = Proc::spawn(&self.layout, id, kind, &dir, &self.zooraft)?;
        progress!(
            self.t0,
            "started {} (pid {})",
            p.label,
            p.pid().unwrap_or(0)
        );
        self.observers.insert(id, p);
        Ok(())
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
                    p.log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Stops observer `id` (SIGTERM, then SIGKILL after `grace`) and forgets it.
    pub(super) fn stop_observer(&mut self, id: u64, grace: Duration) {
        if let Some(mut p) = self.observers.remove(&id) {
            p.stop(grace);
        }
    }
}
