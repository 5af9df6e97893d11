//! `zooraft migrate status` and `zooraft migrate cutover`: the operator's side of a live
//! migration. Both start from one zooraft member's client address: the ensemble's members
//! come from its `/zookeeper/config`, and each says what it is through `srvr` (a zooraft
//! member's version names zooraft) and, for zooraft members, `mntr`'s migration figures.
//!
//! The cut-over's steps are ZooKeeper writes through that member (see `cutover.rs`):
//! prepare (`/zooraft-cutover` with the plan), wait until every zooraft member holds its
//! clients' writes with nothing left unanswered, commit (`/zooraft-cutover/commit`), then
//! a write through the new Raft ensemble (removing both nodes) ends the pause.

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::client::{four_letter_word, resolve, Client, ClientError};
use super::cutover::{Plan, COMMIT, ROOT};
use crate::config::parse_member;

const CALL: Duration = Duration::from_secs(10);

/// One member of the ensemble, as it describes itself.
#[derive(Debug, Clone)]
pub struct MemberView {
    pub id: u64,
    pub client: SocketAddr,
    pub zooraft: bool,
    /// `srvr`'s Mode (`None`: not serving, or not answering).
    pub mode: Option<String>,
    pub zxid: Option<i64>,
    pub connections: Option<u64>,
    /// zooraft's `mntr` migration figures: phase, lag, pending.
    pub phase: String,
    pub lag: u64,
    pub pending: u64,
}

impl MemberView {
    /// Client connections (ZooKeeper counts the connection that asks `srvr` among its
    /// own; zooraft does not).
    pub fn clients(&self) -> u64 {
        let n = self.connections.unwrap_or(0);
        if self.zooraft {
            n
        } else {
            n.saturating_sub(1)
        }
    }
}

fn line_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
}

fn describe(id: u64, client: SocketAddr) -> MemberView {
    let srvr = four_letter_word(client, "srvr", CALL).unwrap_or_default();
    let zooraft = line_value(&srvr, "Zookeeper version:").is_some_and(|v| v.contains("zooraft"));
    let mut m = MemberView {
        id,
        client,
        zooraft,
        mode: line_value(&srvr, "Mode:").map(str::to_string),
        zxid: line_value(&srvr, "Zxid: 0x").and_then(|h| i64::from_str_radix(h, 16).ok()),
        connections: line_value(&srvr, "Connections:").and_then(|c| c.parse().ok()),
        phase: String::new(),
        lag: 0,
        pending: 0,
    };
    if zooraft {
        let mntr = four_letter_word(client, "mntr", CALL).unwrap_or_default();
        let figure = |k: &str| {
            mntr.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix('\t').map(str::trim))
                .map(str::to_string)
        };
        m.phase = figure("zk_migration_phase").unwrap_or_default();
        m.lag = figure("zk_migration_lag")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        m.pending = figure("zk_migration_pending")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
    }
    m
}

/// Every member of the ensemble `server` belongs to, described.
pub fn members(server: &str) -> anyhow::Result<Vec<MemberView>> {
    Ok(ensemble(server)?.0)
}

/// [`members`], and `/zookeeper/config` as read.
fn ensemble(server: &str) -> anyhow::Result<(Vec<MemberView>, String)> {
    let addr = resolve(server)?;
    let mut c = Client::connect(addr, CALL)
        .with_context(|| format!("cannot open a session on {server}"))?;
    let (data, _) = c
        .get_data("/zookeeper/config")
        .with_context(|| format!("cannot read /zookeeper/config on {server}"))?;
    c.close();
    let text = String::from_utf8_lossy(data.as_deref().unwrap_or_default()).to_string();
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((key, spec)) = line.split_once('=') else {
            continue;
        };
        let Some(id) = key.strip_prefix("server.") else {
            continue;
        };
        let m = parse_member(id, spec).map_err(|e| anyhow::anyhow!("/zookeeper/config: {e}"))?;
        let Some(port) = m.client_port else {
            bail!(
                "/zookeeper/config: server.{} has no client port, so it cannot be asked what it is",
                m.id
            );
        };
        out.push(describe(m.id, resolve(&format!("{}:{port}", m.host))?));
    }
    if out.is_empty() {
        bail!("/zookeeper/config on {server} lists no members: {text:?}");
    }
    Ok((out, text))
}

/// `zooraft migrate status`.
pub fn status(server: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let members = members(server)?;
    for m in &members {
        writeln!(
            out,
            "server.{} {} {} mode={} zxid={} clients={}{}",
            m.id,
            m.client,
            if m.zooraft { "zooraft" } else { "zookeeper" },
            m.mode.as_deref().unwrap_or("not-serving"),
            m.zxid.map_or("?".to_string(), |z| format!("0x{z:x}")),
            m.connections
                .map_or("?".to_string(), |_| m.clients().to_string()),
            if m.zooraft {
                format!(" phase={} lag={} pending={}", m.phase, m.lag, m.pending)
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}

/// What `zooraft migrate cutover` is told.
#[derive(Debug, Clone)]
pub struct CutoverOptions {
    /// Cut over even though ZooKeeper members still have clients (their later writes are
    /// not in zooraft).
    pub force: bool,
    /// How long members hold writes waiting for the commit.
    pub timeout: Duration,
    /// How far behind the ZooKeeper leader a zooraft member may be (transactions).
    pub max_lag: u64,
}

/// `zooraft migrate cutover`.
pub fn cutover(server: &str, opts: &CutoverOptions, out: &mut dyn Write) -> anyhow::Result<()> {
    let (members, config) = ensemble(server)?;
    let (zooraft, zookeeper): (Vec<_>, Vec<_>) = members.iter().partition(|m| m.zooraft);
    if zooraft.is_empty() {
        bail!("no zooraft member in the ensemble of {server}");
    }
    for m in &zooraft {
        if m.phase != "following" || m.mode.as_deref() != Some("observer") {
            bail!(
                "server.{} ({}) is not following ZooKeeper (mode {}, phase {:?}): nothing was changed",
                m.id,
                m.client,
                m.mode.as_deref().unwrap_or("not serving"),
                m.phase
            );
        }
        if m.lag > opts.max_lag {
            bail!(
                "server.{} ({}) is {} transactions behind ZooKeeper's leader (at most {} allowed): nothing was changed",
                m.id,
                m.client,
                m.lag,
                opts.max_lag
            );
        }
    }
    let busy: Vec<String> = zookeeper
        .iter()
        .filter(|m| m.clients() > 0)
        .map(|m| {
            format!(
                "server.{} ({}): {} client connection(s)",
                m.id,
                m.client,
                m.clients()
            )
        })
        .collect();
    if !busy.is_empty() {
        if !opts.force {
            bail!(
                "ZooKeeper members still have clients; a write they accept after the cut-over would not be in zooraft. \
                 Move these clients to zooraft members first (or use --force):\n  {}",
                busy.join("\n  ")
            );
        }
        writeln!(
            out,
            "warning: cutting over with clients still on ZooKeeper (--force):\n  {}",
            busy.join("\n  ")
        )?;
    }
    let ids: Vec<u64> = zooraft.iter().map(|m| m.id).collect();
    // The zooraft members' lines as /zookeeper/config has them, for every member to state.
    let servers: Vec<&str> = config
        .lines()
        .filter(|l| {
            l.split_once('=')
                .and_then(|(k, _)| k.strip_prefix("server.")?.parse::<u64>().ok())
                .is_some_and(|id| ids.contains(&id))
        })
        .collect();
    let plan = Plan {
        nonce: format!("{:016x}", rand::random::<u64>()),
        members: ids,
        timeout_ms: opts.timeout.as_millis() as u64,
        servers: servers.join("\n"),
    };
    plan.membership(0)
        .map_err(|e| anyhow::anyhow!("/zookeeper/config: {e}"))?;
    let addr = resolve(server)?;
    // The session lives on through the cut-over: its last write goes through Raft.
    let mut c = Client::connect(addr, opts.timeout.max(CALL))
        .with_context(|| format!("cannot open a session on {server}"))?;
    match c.get_data(COMMIT) {
        Ok((_, stat)) => bail!(
            "this ensemble already cut over (at zxid 0x{:x})",
            stat.czxid
        ),
        Err(ClientError::Keeper(jute::ErrorCode::NoNode)) => {}
        Err(e) => return Err(e).context("cannot look for an earlier cut-over"),
    }
    match c.delete_tree(ROOT) {
        Ok(()) => writeln!(out, "removed {ROOT} left by an interrupted cut-over")?,
        Err(ClientError::Keeper(jute::ErrorCode::NoNode)) => {}
        Err(e) => return Err(e).context("cannot remove an earlier cut-over's node"),
    }
    writeln!(out, "prepare: {}", plan.summary())?;
    let prepared_at = c
        .create(ROOT, plan.text().as_bytes())
        .context("cannot write the prepare step")?;
    let paused = Instant::now();
    let abort = |c: &mut Client, why: String| -> anyhow::Error {
        let undone = c.delete(ROOT);
        anyhow::anyhow!(
            "{why}; the cut-over was aborted{} and ZooKeeper stays in charge",
            if undone.is_ok() {
                ""
            } else {
                " (members give it up after the timeout)"
            }
        )
    };
    // Every member holds its clients' writes, with nothing still on its way to ZooKeeper.
    let deadline = paused + opts.timeout / 2;
    for m in &zooraft {
        loop {
            let now = describe(m.id, m.client);
            if now.phase == "prepared" && now.pending == 0 {
                break;
            }
            if Instant::now() > deadline {
                return Err(abort(
                    &mut c,
                    format!(
                        "server.{} did not get ready (phase {:?}, {} writes unanswered)",
                        m.id, now.phase, now.pending
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let zxid = match c.create(COMMIT, plan.nonce.as_bytes()) {
        Ok(z) => z,
        Err(e) => {
            bail!(
                "the commit step failed ({e}): whether it was applied is unknown; run `zooraft migrate status --server {server}`"
            )
        }
    };
    writeln!(
        out,
        "commit at zxid 0x{zxid:x} (prepared at 0x{prepared_at:x}); waiting for Raft"
    )?;
    // The first write through the Raft ensemble ends the pause.
    loop {
        match c.delete(COMMIT) {
            // (NONODE is an answer from Raft too.)
            Ok(()) | Err(ClientError::Keeper(jute::ErrorCode::NoNode)) => break,
            Err(ClientError::Keeper(_)) if paused.elapsed() < opts.timeout * 3 => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => bail!(
                "no write went through Raft after the commit ({e}); run `zooraft migrate status --server {server}`"
            ),
        }
    }
    let pause = paused.elapsed();
    let _ = c.delete(ROOT);
    c.close();
    let ids: Vec<String> = plan.members.iter().map(u64::to_string).collect();
    writeln!(
        out,
        "cutover: zxid=0x{zxid:x} pause_ms={} members={}",
        pause.as_millis(),
        ids.join(",")
    )?;
    Ok(())
}
