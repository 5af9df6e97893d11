//! A running Apache ZooKeeper 3.8 ensemble with zooraft members that join it as observers
//! (`migrateFromZooKeeper=true`), as an operator sets one up for a live migration: every
//! member's zoo.cfg has the same `server.N` lines, the zooraft members' marked `:observer`.
//!
//! ZooKeeper's voters are started first and serve; the observers are started (and killed,
//! restarted) by the test. Both kinds run with the same superDigest and extended types, so
//! [`crate::tree_dump`] compares them node by node.

use std::time::{Duration, Instant};

use crate::tree_dump::SUPER_DIGEST;
use crate::{free_port, ServerKind, TestServer, TestServerBuilder};

const READY: Duration = Duration::from_secs(90);

/// ZooKeeper voters `1..=voters`, zooraft observers after them.
pub struct LiveMigration {
    /// ZooKeeper's members (index i is `server.{i+1}`).
    pub zookeeper: Vec<TestServer>,
    /// The zooraft observers (index i is `server.{voters+i+1}`), once started.
    pub zooraft: Vec<Option<TestServer>>,
    lines: Vec<(String, String)>,
    client_ports: Vec<u16>,
    /// ZooKeeper runs with `reconfigEnabled` and knows only its voters at first: observers
    /// join through `reconfig -add` ([`LiveMigration::reconfig_add`]).
    reconfig: bool,
    /// More settings (see [`Extra`]).
    extra: Extra,
}

/// Settings beyond the defaults: zoo.cfg keys for every member, JVM properties for
/// ZooKeeper's, zoo.cfg keys and environment variables (e.g. `KRB5_CONFIG`) for zooraft's
/// only.
#[derive(Debug, Clone, Default)]
pub struct Extra {
    pub both: Vec<(String, String)>,
    pub zookeeper_jvm: Vec<(String, String)>,
    pub zooraft: Vec<(String, String)>,
    pub zooraft_env: Vec<(String, String)>,
}

/// `(key, value)` pairs as the owned strings [`Extra`] holds.
pub fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl LiveMigration {
    /// Starts `voters` ZooKeeper members and waits until they serve; `observers` zooraft
    /// members are configured, not started.
    pub fn start(voters: usize, observers: usize) -> LiveMigration {
        Self::launch(voters, observers, false, Extra::default())
    }

    /// [`start`](Self::start) with more settings (quorum TLS, quorum SASL, ...).
    pub fn start_with(voters: usize, observers: usize, extra: Extra) -> LiveMigration {
        Self::launch(voters, observers, false, extra)
    }

    /// [`start`](Self::start), with ZooKeeper's `reconfigEnabled=true` and only the voters
    /// in its configuration: each observer is added with `reconfig -add`.
    pub fn start_reconfigurable(voters: usize, observers: usize) -> LiveMigration {
        Self::launch(voters, observers, true, Extra::default())
    }

    fn launch(voters: usize, observers: usize, reconfig: bool, extra: Extra) -> LiveMigration {
        let n = voters + observers;
        let client_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let lines: Vec<(String, String)> = (0..n)
            .map(|i| {
                let role = if i >= voters { ":observer" } else { "" };
                (
                    format!("server.{}", i + 1),
                    format!(
                        "127.0.0.1:{}:{}{role};127.0.0.1:{}",
                        free_port(),
                        free_port(),
                        client_ports[i]
                    ),
                )
            })
            .collect();
        let mut m = LiveMigration {
            zookeeper: Vec::new(),
            zooraft: (0..observers).map(|_| None).collect(),
            lines,
            client_ports,
            reconfig,
            extra,
        };
        for i in 0..voters {
            let mut b = TestServer::builder(ServerKind::Apache)
                .jvm_property(
                    "zookeeper.DigestAuthenticationProvider.superDigest",
                    SUPER_DIGEST,
                )
                .config("initLimit", "20")
                .config("syncLimit", "4");
            if reconfig {
                b = b
                    .config("reconfigEnabled", "true")
                    .config("standaloneEnabled", "false");
            }
            for (k, v) in &m.extra.zookeeper_jvm {
                b = b.jvm_property(k, v);
            }
            let b = m.common(b, i, if reconfig { voters } else { n });
            m.zookeeper.push(b.start());
        }
        for z in &m.zookeeper {
            wait_serving(z);
        }
        m
    }

    /// What every member's zoo.cfg has: the first `lines` server lines, short ticks, every
    /// 4lw.
    fn common(&self, b: TestServerBuilder, i: usize, lines: usize) -> TestServerBuilder {
        let mut b = b
            .port(self.client_ports[i])
            .myid(i as u64 + 1)
            .tick_time_ms(500)
            .config("4lw.commands.whitelist", "*")
            .config("extendedTypesEnabled", "true")
            .no_wait();
        for (k, v) in self.lines[..lines].iter().chain(&self.extra.both) {
            b = b.config(k, v);
        }
        b
    }

    /// Adds observer `i` to ZooKeeper's configuration with `reconfig -add` (as the super
    /// user), through ZooKeeper's first member.
    pub fn reconfig_add(&self, i: usize) -> Vec<String> {
        assert!(
            self.reconfig,
            "ZooKeeper was started without reconfigEnabled"
        );
        let (key, spec) = &self.lines[self.zookeeper.len() + i];
        let mut cli = crate::zkcli::ZkCli::start("reconfig", &self.zookeeper[0]);
        cli.run("addauth digest super:secret");
        let out = cli.run(&format!("reconfig -add {key}={spec}"));
        cli.quit();
        out
    }

    /// Starts observer `i` (zooraft) and waits until it has synced and serves.
    pub fn start_observer(&mut self, i: usize) -> &TestServer {
        self.spawn_observer(i, &[]);
        wait_serving(self.observer(i));
        self.observer(i)
    }

    /// Starts observer `i` (zooraft) without waiting for it, its zooraft settings
    /// ([`Extra::zooraft`]) replaced by `settings` where they name the same key.
    pub fn spawn_observer(&mut self, i: usize, settings: &[(&str, &str)]) -> &mut TestServer {
        let id = self.zookeeper.len() + i;
        let mut b = TestServer::builder(ServerKind::Zooraft);
        for (k, v) in &self.extra.zooraft {
            if !settings.iter().any(|(key, _)| key == k) {
                b = b.config(k, v);
            }
        }
        for (k, v) in settings {
            b = b.config(k, v);
        }
        for (k, v) in &self.extra.zooraft_env {
            b = b.env(k, v);
        }
        let b = b
            .config("migrateFromZooKeeper", "true")
            .config("initLimit", "20")
            .config("syncLimit", "4")
            .config("DigestAuthenticationProvider.superDigest", SUPER_DIGEST);
        self.zooraft[i] = Some(self.common(b, id, self.lines.len()).start());
        self.observer_mut(i)
    }

    /// Observer slot `i` run by Apache ZooKeeper instead (`peerType=observer`), with
    /// ZooKeeper's settings: what ZooKeeper's own observers do there. Waits until it
    /// serves.
    pub fn start_zookeeper_observer(&self, i: usize) -> TestServer {
        let mut b = TestServer::builder(ServerKind::Apache)
            .jvm_property(
                "zookeeper.DigestAuthenticationProvider.superDigest",
                SUPER_DIGEST,
            )
            .config("initLimit", "20")
            .config("syncLimit", "4")
            .config("peerType", "observer");
        for (k, v) in &self.extra.zookeeper_jvm {
            b = b.jvm_property(k, v);
        }
        let server = self
            .common(b, self.zookeeper.len() + i, self.lines.len())
            .start();
        wait_serving(&server);
        server
    }

    /// Observer `i`, started.
    pub fn observer(&self, i: usize) -> &TestServer {
        self.zooraft[i].as_ref().expect("the observer was started")
    }

    pub fn observer_mut(&mut self, i: usize) -> &mut TestServer {
        self.zooraft[i].as_mut().expect("the observer was started")
    }

    /// The ZooKeeper members' connect string (the running ones).
    pub fn zookeeper_hosts(&self) -> String {
        self.zookeeper
            .iter()
            .filter(|z| z.is_running())
            .map(TestServer::connect_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The index of ZooKeeper's leader (waits for one, bounded).
    pub fn leader(&self) -> usize {
        let deadline = Instant::now() + READY;
        loop {
            for (i, z) in self.zookeeper.iter().enumerate() {
                if z.is_running() && z.mode().as_deref() == Some("leader") {
                    return i;
                }
            }
            assert!(Instant::now() < deadline, "ZooKeeper elected no leader");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `srvr`'s `Zxid:` line.
pub fn zxid_of(server: &TestServer) -> Option<i64> {
    let text = server.four_letter_word("srvr").ok()?;
    let hex = text.lines().find_map(|l| l.strip_prefix("Zxid: 0x"))?;
    i64::from_str_radix(hex.trim(), 16).ok()
}

/// Waits (bounded) until `server` serves, with its log in the panic otherwise.
pub fn wait_serving(server: &TestServer) {
    let deadline = Instant::now() + READY;
    while !server.is_serving() {
        assert!(
            Instant::now() < deadline,
            "{} on port {} does not serve; log:\n{}",
            server.kind().name(),
            server.port(),
            server.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
