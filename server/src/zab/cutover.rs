//! The cut-over, as a member sees it: the coordinator (`zooraft migrate cutover`) writes its
//! steps into the ZooKeeper ensemble itself, and every observing member acts on them as it
//! applies them, so all of them act at the same zxid without talking to each other:
//!
//! 1. **prepare**: `/zooraft-cutover` is created, its data the [`Plan`] (the members of
//!    the Raft ensemble to be, a nonce, a timeout). A member that applies it holds its
//!    clients' new writes and session changes (they wait; they are not refused), so once
//!    what it had forwarded is answered, none of its clients' writes can reach ZooKeeper.
//!    Only the coordinator's own session still writes.
//! 2. **commit**: `/zooraft-cutover/commit` is created (data: the nonce). Its zxid Z is the
//!    last ZooKeeper zxid: every member stops following right after applying it, holding
//!    the same state. It writes that state as a new Raft store whose term is Z's epoch
//!    (so zooraft's zxids go on above Z), and starts Raft with the plan's members as
//!    voters, on their quorum ports. The held writes, and anything forwarded but not
//!    answered by Z (the ensemble did not commit it by Z, so zooraft never applied it),
//!    go to Raft first, in order. Connections, sessions and watches stay as they are.
//! 3. **abort**: `/zooraft-cutover` is deleted, or the plan's timeout passes without a
//!    commit: the held writes are forwarded to ZooKeeper, which stays in charge.
//!
//! `dataDir/zab/cutover` records the commit (zxid and members) before the Raft store is
//! written, so that a restarted member starts as the Raft member it became.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Context};
use zkdata::txn::{LoggedTxn, Txn};

use crate::config::Config;
use crate::raft::{self, Connections, Input, RaftStorage, Replica};
use crate::state::command::{Batch, Command};
use crate::state::reconfig::DynamicConfig;

/// The node whose creation prepares the cut-over and whose deletion aborts it.
pub const ROOT: &str = "/zooraft-cutover";
/// The node whose creation is the cut-over.
pub const COMMIT: &str = "/zooraft-cutover/commit";

/// What the coordinator decided: `/zooraft-cutover`'s data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub nonce: String,
    /// The Raft ensemble's members (every zooraft member of the ZooKeeper ensemble).
    pub members: Vec<u64>,
    /// How long members hold writes waiting for the commit before they give up.
    pub timeout_ms: u64,
    /// The Raft ensemble's `server.N` lines (participants), from the `/zookeeper/config`
    /// the coordinator read: every member states exactly these, so the first entry of
    /// their Raft logs is the same bytes everywhere. Empty: each member's own zoo.cfg.
    pub servers: String,
}

impl Plan {
    /// The node's data: the plan's words on the first line, the server lines after it.
    pub fn text(&self) -> String {
        let members: Vec<String> = self.members.iter().map(u64::to_string).collect();
        let mut text = format!(
            "zooraft-cutover nonce={} members={} timeout_ms={}",
            self.nonce,
            members.join(","),
            self.timeout_ms
        );
        if !self.servers.is_empty() {
            text.push('\n');
            text.push_str(&self.servers);
        }
        text
    }

    /// The first line of [`Plan::text`], for logs.
    pub fn summary(&self) -> String {
        let text = self.text();
        text.lines().next().unwrap_or_default().to_string()
    }

    /// The membership statement for the Raft ensemble formed at `zxid` (its version).
    pub fn membership(&self, zxid: i64) -> Result<String, String> {
        let mut c = DynamicConfig::parse(&self.servers)?;
        c.servers.retain(|id, _| self.members.contains(id));
        if c.servers.len() != self.members.len() {
            return Err(format!(
                "the plan's server lines do not name every member {:?}",
                self.members
            ));
        }
        for s in c.servers.values_mut() {
            s.observer = false;
        }
        c.version = zxid;
        Ok(c.text())
    }

    pub fn parse(text: &str) -> Result<Plan, String> {
        let (head, servers) = text.split_once('\n').unwrap_or((text, ""));
        let mut words = head.split_whitespace();
        if words.next() != Some("zooraft-cutover") {
            return Err(format!("not a cut-over plan: {text:?}"));
        }
        let (mut nonce, mut members, mut timeout_ms) = (None, None, None);
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| format!("a cut-over plan's word without '=': {w:?}"))?;
            match k {
                "nonce" => nonce = Some(v.to_string()),
                "members" => {
                    let ids: Result<Vec<u64>, _> = v.split(',').map(str::parse).collect();
                    members = Some(ids.map_err(|_| format!("bad member ids {v:?}"))?);
                }
                "timeout_ms" => {
                    timeout_ms = Some(v.parse().map_err(|_| format!("bad timeout {v:?}"))?)
                }
                _ => {}
            }
        }
        match (nonce, members, timeout_ms) {
            (Some(nonce), Some(members), Some(timeout_ms)) if !members.is_empty() => {
                let plan = Plan {
                    nonce,
                    members,
                    timeout_ms,
                    servers: servers.trim().to_string(),
                };
                if !plan.servers.is_empty() {
                    plan.membership(0)?;
                }
                Ok(plan)
            }
            _ => Err(format!("an incomplete cut-over plan: {text:?}")),
        }
    }
}

/// What an applied transaction means to a cut-over.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    Prepare(Plan),
    Commit,
    Abort,
}

/// The cut-over step `t` is, if any.
pub fn step_of(t: &LoggedTxn) -> Option<Step> {
    match &t.txn {
        Txn::Create { path, data, .. } if path == ROOT => {
            let text = String::from_utf8_lossy(data.as_deref().unwrap_or_default());
            match Plan::parse(&text) {
                Ok(plan) => Some(Step::Prepare(plan)),
                Err(e) => {
                    tracing::warn!(error = %e, "{ROOT} was created without a valid plan; ignored");
                    None
                }
            }
        }
        Txn::Create { path, .. } if path == COMMIT => Some(Step::Commit),
        Txn::Delete { path } if path == ROOT => Some(Step::Abort),
        _ => None,
    }
}

/// The configuration Raft runs with after the cut-over: the plan's members only, every
/// one a voter, on the quorum ports of their `server.N` lines.
pub fn raft_config(config: &Config, members: &[u64]) -> Config {
    let mut c = config.clone();
    c.members.retain(|id, _| members.contains(id));
    for m in c.members.values_mut() {
        m.observer = false;
    }
    c.migrate_from_zookeeper = false;
    c
}

/// `dataDir/zab/cutover` (for tests elsewhere in this layer).
#[cfg(test)]
pub fn journal_record_path(config: &Config) -> PathBuf {
    record_path(config)
}

fn record_path(config: &Config) -> PathBuf {
    super::journal_dir(config).join("cutover")
}

/// What `dataDir/zab/cutover` records of a cut-over this member took.
pub struct Record {
    pub zxid: i64,
    /// The Raft ensemble's members.
    pub members: Vec<u64>,
    /// It missed the cut-over and joined empty.
    pub late: bool,
}

/// The cut-over this member took, if it did.
pub fn read_record(config: &Config) -> anyhow::Result<Option<Record>> {
    let path = record_path(config);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let field = |k: &str| text.split_whitespace().find_map(|w| w.strip_prefix(k));
    let members = field("members=").map(|v| {
        v.split(',')
            .map(str::parse)
            .collect::<Result<Vec<u64>, _>>()
    });
    let zxid = field("zxid=0x").and_then(|z| i64::from_str_radix(z, 16).ok());
    match (members, zxid) {
        (Some(Ok(members)), Some(zxid)) if !members.is_empty() => Ok(Some(Record {
            zxid,
            members,
            late: field("late=") == Some("1"),
        })),
        _ => bail!("{} is not a cut-over record: {text:?}", path.display()),
    }
}

/// The members of the Raft ensemble this member cut over to, if it did.
pub fn cut_over_members(config: &Config) -> anyhow::Result<Option<Vec<u64>>> {
    Ok(read_record(config)?.map(|r| r.members))
}

fn write_record(path: &Path, zxid: i64, members: &[u64], late: bool) -> std::io::Result<()> {
    let members: Vec<String> = members.iter().map(u64::to_string).collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(
        &tmp,
        format!(
            "zxid=0x{zxid:x} members={} late={}\n",
            members.join(","),
            late as u8
        ),
    )?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Everything the Raft thread takes over from the observer loop.
pub struct Handover {
    pub zxid: i64,
    /// The commit step's time (every member's, from the transaction).
    pub time: i64,
    pub members: Vec<u64>,
    /// How long clients are kept while Raft forms (the plan's timeout).
    pub keep_clients_for: std::time::Duration,
    /// The member missed the cut-over and holds a later tree: it starts Raft empty.
    pub late: bool,
    /// The cut-over's plan (the membership statement the Raft log starts with).
    pub plan: Plan,
    /// The connections' inbox.
    pub inbox: Receiver<Input>,
    /// What reached the member and was not done yet, oldest first.
    pub backlog: Vec<Input>,
}

/// Turns this member into a Raft member at `h.zxid`: records the cut-over, writes the state
/// as a new Raft store, switches the configuration, starts the peer transport and the Raft
/// thread (which handles the backlog first). Returns the Raft thread.
pub fn form_raft(
    replica: &Arc<Replica>,
    connections: Arc<dyn Connections>,
    h: Handover,
    runtime: &tokio::runtime::Handle,
) -> anyhow::Result<JoinHandle<()>> {
    let config = raft_config(replica.config(), &h.members);
    write_record(&record_path(&config), h.zxid, &h.members, h.late)
        .context("cannot record the cut-over in dataDir/zab")?;
    let storage = if h.late {
        // What it holds is ZooKeeper's tree after the cut-over, which zooraft never had:
        // it must serve none of it. It starts as a new, empty member, which Raft's leader
        // catches up (see raft/trust.rs).
        tracing::warn!(
            zxid = format!("{:#x}", h.zxid),
            "this member missed the cut-over and holds a later ZooKeeper tree: it joins the \
             Raft ensemble empty"
        );
        {
            let mut state = replica.state.write();
            *state = crate::state::StateMachine::new(state.tree.options);
            replica.set_last_zxid(0);
        }
        connections.stop_serving();
        let dir = crate::migrate::store_dir(&config);
        RaftStorage::open(&dir, raft::initial_membership(&config))
            .with_context(|| format!("cannot open a new Raft store in {}", dir.display()))?
    } else {
        // The state at the cut-over is this member's copy of the ensemble, durable in
        // dataDir/zab; the store starts with one entry on top of it, the membership
        // statement, the same on every member: writing it takes the same time whatever
        // the tree's size. A snapshot is taken soon after, in the background.
        let term = ((h.zxid >> 32) as u64).max(1) + 1;
        let first = Batch {
            time: h.time,
            commands: vec![Command::SetConfig {
                text: if h.plan.servers.is_empty() {
                    raft::initial_config(&config, h.zxid).text()
                } else {
                    h.plan.membership(h.zxid).map_err(anyhow::Error::msg)?
                },
            }],
        }
        .encode();
        let storage = crate::migrate::write_takeover_store(&config, term, first)
            .context("cannot write the Raft store for the cut-over")?;
        storage.want_snapshot();
        storage
    };
    let transport = runtime
        .block_on(raft::start_transport(&config, &storage, replica.inbox()))
        .context("cannot start the peer transport")?;
    if !replica.replace_config(config) {
        anyhow::bail!("this member's configuration was already replaced by a cut-over");
    }
    let peers = transport.map(|t| Arc::new(t) as Arc<dyn raft::Peers>);
    // The lowest id campaigns at once; the others wait for it.
    let campaign = !h.late && h.members.iter().min() == Some(&replica.me);
    let takeover = raft::Takeover {
        backlog: h.backlog,
        keep_clients_for: h.keep_clients_for,
        campaign,
    };
    let thread = raft::start(
        replica.clone(),
        connections,
        storage,
        h.inbox,
        Some(takeover),
        peers,
    )
    .context("cannot start Raft")?;
    Ok(thread)
}

/// The thread that observed ZooKeeper becomes the Raft member's: [`form_raft`], then it
/// waits for the Raft thread (so that stopping the member still waits for it).
pub fn take_over(
    replica: &Arc<Replica>,
    connections: Arc<dyn Connections>,
    h: Handover,
    runtime: &tokio::runtime::Handle,
) {
    let zxid = h.zxid;
    match form_raft(replica, connections, h, runtime) {
        Ok(raft) => {
            let m = &replica.status.migration;
            m.phase.store(raft::Migration::CUT_OVER, Ordering::Release);
            m.cutover_zxid.store(zxid, Ordering::Release);
            m.held.store(0, Ordering::Relaxed);
            m.pending.store(0, Ordering::Relaxed);
            tracing::info!(
                zxid = format!("{zxid:#x}"),
                "cut over: this member is a Raft member now"
            );
            let _ = raft.join();
        }
        // The ensemble has moved on without ZooKeeper: there is no going back to following
        // it. A restart joins the Raft ensemble (dataDir/zab/cutover).
        Err(e) => crate::critical::fatal(format_args!("the cut-over failed: {e:#}")),
    }
}

/// The plan in `tree` (`/zooraft-cutover`'s data), if it holds a valid one.
pub fn plan_in(tree: &crate::state::tree::DataTree) -> Option<Plan> {
    let data = tree.get(ROOT)?.data()?;
    Plan::parse(&String::from_utf8_lossy(data)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_round_trip_and_bad_ones_are_named() {
        let p = Plan {
            nonce: "ab12".into(),
            members: vec![4, 5, 6],
            timeout_ms: 10_000,
            servers: String::new(),
        };
        assert_eq!(Plan::parse(&p.text()), Ok(p.clone()));
        // With the server lines: the membership names exactly the members, as voters.
        let with = Plan {
            servers: "server.1=h1:1:2:participant;h1:3\nserver.4=h4:4:5:observer;h4:6\n\
                      server.5=h5:4:5:observer;h5:6\nserver.6=h6:4:5:observer;h6:6"
                .into(),
            ..p
        };
        let back = Plan::parse(&with.text()).unwrap();
        assert_eq!(back, with);
        let m = back.membership(0x1_0000_00ff).unwrap();
        assert!(!m.contains("server.1=") && !m.contains("observer"), "{m}");
        assert!(m.contains("server.4=h4:4:5:participant;h4:6"), "{m}");
        assert!(m.ends_with("version=1000000ff"), "{m}");
        let short = Plan {
            members: vec![4, 7],
            ..back
        };
        assert!(short.membership(1).is_err());
        assert!(Plan::parse("zooraft-cutover nonce=x timeout_ms=1").is_err());
        assert!(Plan::parse("something else").is_err());
        assert!(Plan::parse("zooraft-cutover nonce=x members=4,y timeout_ms=1").is_err());
    }

    #[test]
    fn the_raft_configuration_keeps_only_the_plans_members_as_voters() {
        let mut c = Config::default();
        for (id, observer) in [(1, false), (2, false), (3, false), (4, true), (5, true)] {
            let m = crate::config::parse_member(
                &id.to_string(),
                &format!(
                    "127.0.0.1:{}:{}{};127.0.0.1:{}",
                    2000 + id,
                    3000 + id,
                    if observer { ":observer" } else { "" },
                    4000 + id
                ),
            )
            .unwrap();
            assert_eq!(m.observer, observer);
            c.members.insert(id, m);
        }
        c.migrate_from_zookeeper = true;
        let r = raft_config(&c, &[4, 5]);
        assert_eq!(r.members.keys().copied().collect::<Vec<_>>(), vec![4, 5]);
        assert!(r.members.values().all(|m| !m.observer));
        assert!(!r.migrate_from_zookeeper);
        assert_eq!(r.members[&4].peer_port, 2004, "Raft on the quorum port");
    }
}
