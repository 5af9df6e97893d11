//! Ensembles on loopback, for the Raft tests and for running the same failover scenarios
//! against Apache ZooKeeper: 3 or 5 members (optionally with observers), each with its own
//! data directory, `myid` and zoo.cfg, as an operator would set them up. Members can be
//! killed, restarted and compared (a digest of each member's tree, from the `hash`
//! four-letter word, zooraft only).
//!
//! A zooraft member has one peer port (Raft traffic); an Apache ZooKeeper 3.8 member
//! (`QuorumPeerMain`) has a quorum port and a leader-election port, both given in its
//! `server.N=127.0.0.1:quorum:election;127.0.0.1:client` lines. Both kinds get short ticks
//! (500 ms) so that an election after a kill takes about a second.

use std::time::{Duration, Instant};

use crate::proxy::Proxy;
use crate::{free_port, ServerKind, TestServer, TestServerBuilder};

/// How long an ensemble may take to elect a leader and serve.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Settings Apache ZooKeeper takes as JVM system properties rather than zoo.cfg keys.
const JVM_PROPERTIES: [&str; 1] = ["readonlymode.enabled"];

/// zoo.cfg settings for dynamic reconfiguration, the same for both kinds: ZooKeeper needs
/// `standaloneEnabled=false` too; `skipACL=yes` lets the tests reconfig without the super
/// user.
pub const RECONFIG: &[(&str, &str)] = &[
    ("reconfigEnabled", "true"),
    ("standaloneEnabled", "false"),
    ("skipACL", "yes"),
];

/// See the module docs.
pub struct TestEnsemble {
    members: Vec<TestServer>,
    kind: ServerKind,
    peer_ports: Vec<u16>,
    /// `links[i][j]`: the proxy member `i` reaches member `j` through (when partitionable).
    links: Vec<Vec<Option<Proxy>>>,
    /// The same for Apache ZooKeeper's leader-election ports.
    election_links: Vec<Vec<Option<Proxy>>>,
}

impl TestEnsemble {
    /// `voters` voting members and `observers` observers, all serving when this returns.
    /// `extra` lines go into every member's zoo.cfg.
    pub fn start(voters: usize, observers: usize, extra: &[(&str, &str)]) -> TestEnsemble {
        Self::launch(
            ServerKind::Zooraft,
            voters,
            observers,
            extra,
            false,
            &|_, b| b,
            true,
        )
    }

    /// Like [`start_kind`](Self::start_kind), with settings of each member's own besides
    /// (`each(i)` for member `i`: an admin port, say), waiting
    /// for every member to serve.
    pub fn start_each_serving(
        kind: ServerKind,
        voters: usize,
        extra: &[(&str, &str)],
        each: &dyn Fn(usize) -> Vec<(String, String)>,
    ) -> TestEnsemble {
        let mut e = Self::start_each(kind, voters, extra, each);
        e.wait_all_serving();
        e
    }

    /// Like [`start`](Self::start), with members of `kind`: an Apache ZooKeeper 3.8 ensemble
    /// (`QuorumPeerMain`, quorum and election ports per member) or a zooraft one.
    pub fn start_kind(
        kind: ServerKind,
        voters: usize,
        observers: usize,
        extra: &[(&str, &str)],
    ) -> TestEnsemble {
        Self::launch(kind, voters, observers, extra, false, &|_, b| b, true)
    }

    /// Like [`start`](Self::start) (zooraft), with each member's builder passed through
    /// `customize(index, builder)` first (a tmpfs data directory, an environment).
    pub fn start_with(
        voters: usize,
        extra: &[(&str, &str)],
        customize: &dyn Fn(usize, TestServerBuilder) -> TestServerBuilder,
    ) -> TestEnsemble {
        Self::launch(
            ServerKind::Zooraft,
            voters,
            0,
            extra,
            false,
            customize,
            true,
        )
    }

    /// Like [`start`](Self::start), with a proxy on every member-to-member link (one per
    /// direction), so that [`isolate`](Self::isolate) can cut a member off from the others
    /// while its clients still reach it.
    pub fn start_partitionable(
        voters: usize,
        observers: usize,
        extra: &[(&str, &str)],
    ) -> TestEnsemble {
        Self::start_partitionable_kind(ServerKind::Zooraft, voters, observers, extra)
    }

    /// [`start_partitionable`](Self::start_partitionable) for either kind: for Apache
    /// ZooKeeper its leader-election links get proxies too, cut with the quorum links.
    pub fn start_partitionable_kind(
        kind: ServerKind,
        voters: usize,
        observers: usize,
        extra: &[(&str, &str)],
    ) -> TestEnsemble {
        Self::launch(kind, voters, observers, extra, true, &|_, b| b, true)
    }

    /// `voters` members of `kind`; member `i` gets `extra` and then `each(i)` in its
    /// zoo.cfg (its own certificate, say). Returns as soon as the processes run, without
    /// waiting for them to serve (a member may be meant to stay out).
    pub fn start_each(
        kind: ServerKind,
        voters: usize,
        extra: &[(&str, &str)],
        each: &dyn Fn(usize) -> Vec<(String, String)>,
    ) -> TestEnsemble {
        Self::launch(
            kind,
            voters,
            0,
            extra,
            false,
            &|i, b| b.configs(each(i)),
            false,
        )
    }

    /// Like [`start_partitionable`](Self::start_partitionable), with every member's data
    /// directory on a lossy disk, for [`TestServer::power_loss`].
    pub fn start_lossy(voters: usize, extra: &[(&str, &str)]) -> TestEnsemble {
        Self::launch(
            ServerKind::Zooraft,
            voters,
            0,
            extra,
            true,
            &|_, b| b.lossy_disk(),
            true,
        )
    }

    /// Starts the members; each member's builder goes through `customize(index, builder)`
    /// last. `wait`: return only once every member serves.
    fn launch(
        kind: ServerKind,
        voters: usize,
        observers: usize,
        extra: &[(&str, &str)],
        proxies: bool,
        customize: &dyn Fn(usize, TestServerBuilder) -> TestServerBuilder,
        wait: bool,
    ) -> TestEnsemble {
        let n = voters + observers;
        let client_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let peer_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        // Apache ZooKeeper's leader election listens on a port of its own; zooraft does not
        // use it but writes it back in `/zookeeper/config`, so each gets a distinct one.
        let election_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        // Member i reaches member j's port at the proxy on that link, if there is one.
        let proxied = |ports: &[u16], on: bool| -> Vec<Vec<Option<Proxy>>> {
            (0..n)
                .map(|i| {
                    (0..n)
                        .map(|j| {
                            (on && i != j).then(|| {
                                Proxy::start_raw(std::net::SocketAddr::from((
                                    [127, 0, 0, 1],
                                    ports[j],
                                )))
                            })
                        })
                        .collect()
                })
                .collect()
        };
        let links = proxied(&peer_ports, proxies);
        let election_links = proxied(&election_ports, proxies && kind == ServerKind::Apache);
        let mut members = Vec::with_capacity(n);
        for i in 0..n {
            let mut b = TestServer::builder(kind)
                .port(client_ports[i])
                .myid(i as u64 + 1)
                .tick_time_ms(500)
                .config("4lw.commands.whitelist", "*")
                .no_wait();
            b = match kind {
                ServerKind::Zooraft => b.config("raftTickMs", "100"),
                // A follower has initLimit ticks to sync with a new leader and is dropped
                // after syncLimit ticks without one; QuorumPeerConfig demands both.
                ServerKind::Apache => {
                    let b = b.config("initLimit", "20").config("syncLimit", "4");
                    if i >= voters {
                        b.config("peerType", "observer")
                    } else {
                        b
                    }
                }
            };
            for j in 0..n {
                let role = if j >= voters { ":observer" } else { "" };
                let peer_port = links[i][j]
                    .as_ref()
                    .map_or(peer_ports[j], |p| p.addr().port());
                let election_port = election_links[i][j]
                    .as_ref()
                    .map_or(election_ports[j], |p| p.addr().port());
                b = b.config(
                    &format!("server.{}", j + 1),
                    &format!(
                        "127.0.0.1:{}:{}{role};127.0.0.1:{}",
                        peer_port, election_port, client_ports[j]
                    ),
                );
            }
            for (k, v) in extra {
                b = b.config(k, v);
                // ZooKeeper reads these as JVM properties, zooraft from zoo.cfg.
                if kind == ServerKind::Apache && JVM_PROPERTIES.contains(k) {
                    b = b.jvm_property(k, v);
                }
            }
            members.push(customize(i, b).start());
        }
        let mut e = TestEnsemble {
            kind,
            members,
            peer_ports,
            links,
            election_links,
        };
        if wait {
            e.wait_all_serving();
        }
        e
    }

    fn set_links(&self, member: usize, cut: bool) {
        for j in 0..self.members.len() {
            self.set_link(member, j, cut);
            self.set_link(j, member, cut);
        }
    }

    fn set_link(&self, from: usize, to: usize, cut: bool) {
        for proxy in [&self.links[from][to], &self.election_links[from][to]]
            .into_iter()
            .flatten()
        {
            proxy.refuse_connections(cut);
            proxy.blackhole(cut);
            if cut {
                proxy.cut_all();
            }
        }
    }

    /// Cuts (or restores) one direction between two members of a
    /// [`start_partitionable`](Self::start_partitionable) ensemble: member `from` can no
    /// longer dial member `to` (its connections to `to` are reset, new ones refused), while
    /// `to` may still dial `from`, and what flows over that connection flows both ways.
    pub fn cut_link(&self, from: usize, to: usize, cut: bool) {
        assert!(
            self.links[from][to].is_some(),
            "cutting one link needs a partitionable ensemble"
        );
        self.set_link(from, to, cut);
    }

    /// Cuts every link between `member` and the others (both directions). Its clients can
    /// still reach it. With [`start_partitionable`](Self::start_partitionable) the proxies
    /// on its links cut them; otherwise (zooraft only) the member's test hook does
    /// (`cut-peers` in its data directory, see the server's `raft/test_hooks.rs`): it
    /// neither sends to its peers nor takes what they send. That one works whatever
    /// addresses the members reach each other at, as with reconfig, where they come from
    /// the committed configuration and would route around the proxies.
    pub fn isolate(&self, member: usize) {
        if self.partitionable() {
            self.set_links(member, true);
        } else {
            assert_eq!(
                self.kind,
                ServerKind::Zooraft,
                "isolating a member needs proxies"
            );
            self.members[member].require_test_hooks();
            std::fs::write(self.cut_file(member), b"").expect("the cut-peers hook file");
        }
    }

    /// Restores the links [`isolate`](Self::isolate) cut.
    pub fn heal(&self, member: usize) {
        if self.partitionable() {
            self.set_links(member, false);
        } else if self.kind == ServerKind::Zooraft {
            let _ = std::fs::remove_file(self.cut_file(member));
        }
    }

    fn partitionable(&self) -> bool {
        self.links.iter().flatten().any(|l| l.is_some())
    }

    fn cut_file(&self, member: usize) -> std::path::PathBuf {
        self.members[member].data_dir().join("cut-peers")
    }

    /// Which server the members run.
    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn member(&self, i: usize) -> &TestServer {
        &self.members[i]
    }

    pub fn member_mut(&mut self, i: usize) -> &mut TestServer {
        &mut self.members[i]
    }

    pub fn peer_port(&self, i: usize) -> u16 {
        self.peer_ports[i]
    }

    /// Every running member's address, as a client connect string.
    pub fn connect_string(&self) -> String {
        self.members
            .iter()
            .filter(|m| m.is_running())
            .map(|m| m.connect_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Waits until every running member serves clients as part of the quorum: a member that
    /// answers in read-only mode (`readonlymode.enabled`, before it has found the others)
    /// is not there yet, and a write sent to it would be refused.
    pub fn wait_all_serving(&mut self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let mut waiting = Vec::new();
            for (i, m) in self.members.iter_mut().enumerate() {
                if !m.is_running() {
                    continue;
                }
                // A member that exited never serves: say so now, with its reason.
                if let Some(status) = m.exited() {
                    panic!(
                        "member {} exited ({status}) instead of serving; log:\n{}",
                        i + 1,
                        m.log_tail()
                    );
                }
                if m.mode().is_none_or(|mode| mode == "read-only") {
                    waiting.push(i);
                }
            }
            if waiting.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                panic!("{}", self.not_serving_report(&waiting));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Which members do not serve, with every running member's mode and log tail: the
    /// reason a member waits is often in another member's log.
    fn not_serving_report(&self, waiting: &[usize]) -> String {
        let names: Vec<String> = waiting.iter().map(|i| (i + 1).to_string()).collect();
        let mut report = format!(
            "member(s) {} do not serve within {READY_TIMEOUT:?}",
            names.join(", ")
        );
        for (i, m) in self.members.iter().enumerate() {
            if !m.is_running() {
                report.push_str(&format!("\n--- member {}: not running", i + 1));
                continue;
            }
            let mode = m.mode().unwrap_or_else(|| "no answer".to_owned());
            report.push_str(&format!(
                "\n--- member {} ({mode}), log:\n{}",
                i + 1,
                m.log_tail()
            ));
        }
        report
    }

    /// The index of the current leader (waits for one, bounded).
    pub fn leader(&self) -> usize {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            for (i, m) in self.members.iter().enumerate() {
                if m.is_running() && m.mode().as_deref() == Some("leader") {
                    return i;
                }
            }
            assert!(Instant::now() < deadline, "no leader elected");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `(last zxid, tree digest)` of a member, from its `hash` four-letter word.
    pub fn digest(&self, i: usize) -> Option<(String, String)> {
        let answer = self.members[i].four_letter_word("hash").ok()?;
        let (zxid, digest) = answer.trim().split_once(": ")?;
        Some((zxid.to_string(), digest.to_string()))
    }

    /// Waits (bounded) until every running member reports the same last zxid and tree
    /// digest, and returns it.
    pub fn converged(&self) -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let digests: Vec<Option<(String, String)>> = (0..self.members.len())
                .filter(|i| self.members[*i].is_running())
                .map(|i| self.digest(i))
                .collect();
            if let Some(Some(first)) = digests.first() {
                if digests.iter().all(|d| d.as_ref() == Some(first)) {
                    return first.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "members did not converge: {digests:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
