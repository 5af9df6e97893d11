//! Membership changes: ZooKeeper's reconfig carried out with raft-rs's conf changes.
//!
//! With `reconfigEnabled=true` the committed configuration is `/zookeeper/config`
//! (`state::reconfig`): the leader states the first one from zoo.cfg, and every reconfig
//! is an ordinary replicated command that replaces it, decided alike on every member
//! from what the leader stamped on it (whether a change is still under way, which members
//! are caught up). Raft's own membership then follows the committed configuration, driven
//! by whoever leads, one conf change at a time:
//!
//! 1. a member Raft does not know yet joins as a learner (it never votes while it catches
//!    up, so a slow or empty newcomer costs no availability); a server that dialled in to
//!    join before any reconfig names it is one already (`joiners.rs`), as ZooKeeper syncs
//!    a joining server before the reconfig;
//! 2. if the leader itself leaves the voters, it hands leadership to a remaining voter
//!    first (the new leader carries on);
//! 3. once every new voter has caught up, one `ConfChangeV2` promotes them, demotes new
//!    observers and removes the leaving members: joint consensus when more than one voter
//!    changes, left automatically (or by an empty change, if a leader died in between).
//!
//! The reply to a reconfig comes when its entry is applied, before Raft's membership has
//! followed it; ZooKeeper replies only once the new configuration is active, so a client
//! may send the next reconfig at once. So the leader holds a reconfig back until the
//! previous one is carried out (and the first configuration is committed), then stamps
//! and proposes it; one that waits longer than [`HOLD_LIMIT`] gets RECONFIGINPROGRESS.
//! Until the first configuration is committed, each member serves its own zoo.cfg's as
//! `/zookeeper/config` ([`reconfig::show_local`]).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use protobuf::Message as _;
use raft::eraftpb::{
    ConfChange, ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, Entry,
    EntryType,
};

use super::group::Group;
use super::joiners::Joiners;
use super::proposed::Proposals;
use super::recovery::Recovery;
use super::test_hooks;
use super::trust::{Trust, Verdict};
use crate::config::Config;
use crate::state::command::{ClientWrite, Command, ReconfigStamp};
use crate::state::reconfig::{self, DynamicConfig, ServerSpec, INITIAL_VERSION};

/// How far behind the leader's log a member may be and still count as caught up.
const CAUGHT_UP_SLACK: u64 = 64;
/// How long the leader waits for its first statement of the membership to commit before
/// proposing it again.
const RESTATE_AFTER: Duration = Duration::from_secs(5);
/// How long a reconfig waits for the previous one to be carried out before it is refused
/// with RECONFIGINPROGRESS.
const HOLD_LIMIT: Duration = Duration::from_secs(10);

/// The configuration zoo.cfg describes, as `/zookeeper/config` writes it: the election
/// port as zoo.cfg gives it (zooraft does not use it), the peer port in its place when a
/// line has none (or 0).
pub fn initial_config(config: &Config, version: i64) -> DynamicConfig {
    let servers = config.members.values().map(|m| {
        let spec = ServerSpec {
            id: m.id,
            host: m.host.clone(),
            quorum_port: m.peer_port,
            election_port: m.election_port.filter(|p| *p != 0).unwrap_or(m.peer_port),
            observer: m.observer,
            client: m
                .client_port
                .map(|p| (config.client_address.to_string(), p)),
        };
        (m.id, spec)
    });
    DynamicConfig {
        servers: servers.collect(),
        version,
    }
}

/// The leader's bookkeeping for membership changes, and what every member follows of the
/// committed configuration.
#[derive(Default)]
pub(super) struct MembershipWork {
    /// When `/zookeeper/config`'s first content was last proposed.
    stated_at: Option<Instant>,
    /// The configuration version the peer transport was last given.
    peers_version: Option<i64>,
    /// Reconfigs waiting for the previous one to be carried out, and since when.
    pub held: VecDeque<(ClientWrite, Instant)>,
    /// The log index of the last reconfig proposed (or of the last entry when this member
    /// took over): the next reconfig waits until it is applied.
    pub reconfig_index: u64,
    /// Servers syncing before a reconfig names them (`joiners.rs`).
    pub joiners: Joiners,
    /// Whether the configuration names this member an observer (None: it does not name it).
    listed_observer: Option<bool>,
}

impl MembershipWork {
    /// Leader: takes the reconfigs out of `commands` (they wait in line, see
    /// [`release_reconfig`](Self::release_reconfig)) and returns the rest.
    pub fn hold_reconfigs(&mut self, commands: Vec<Command>, now: Instant) -> Vec<Command> {
        let mut rest = Vec::with_capacity(commands.len());
        for c in commands {
            match c {
                Command::Write(w) if w.op == jute::OpCode::Reconfig as i32 => {
                    self.held.push_back((w, now));
                }
                other => rest.push(other),
            }
        }
        rest
    }

    /// Leader: the first reconfig in line, stamped, once the previous one is carried out
    /// (refused as in progress if it waited [`HOLD_LIMIT`]).
    pub fn release_reconfig(&mut self, g: &Group, now: Instant) -> Option<Command> {
        let (_, since) = self.held.front()?;
        let busy = self.reconfig_busy(g);
        if busy && now.saturating_duration_since(*since) < HOLD_LIMIT {
            return None;
        }
        let (write, _) = self.held.pop_front()?;
        let mut stamp = self.reconfig_stamp(g);
        stamp.in_progress = busy;
        Some(Command::Reconfig { write, stamp })
    }

    /// A member that stops leading hands the reconfigs in line back to the commands it
    /// forwards to whoever leads.
    pub fn unhold_reconfigs(&mut self, proposals: &mut Proposals, now: Instant) {
        for (w, _) in std::mem::take(&mut self.held) {
            proposals.push(Command::Write(w), now);
        }
    }

    /// Whether a reconfig must wait: the first configuration is not committed, the last
    /// reconfig proposed is not applied, or Raft's membership has not followed it yet.
    fn reconfig_busy(&self, g: &Group) -> bool {
        let settings = g.replica.config();
        settings.reconfig_enabled
            && !g.member.standalone
            && (self.reconfig_index > g.applied.index
                || target(g).is_none()
                || self.change_under_way(g))
    }

    fn reconfig_stamp(&self, g: &Group) -> ReconfigStamp {
        let settings = g.replica.config();
        let raft = &g.node.raft;
        let committed = raft.raft_log.committed;
        let mut synced: Vec<u64> = raft
            .prs()
            .iter()
            .filter(|(id, pr)| {
                **id == g.member.me
                    || (pr.recent_active && pr.matched + CAUGHT_UP_SLACK >= committed)
            })
            .map(|(id, _)| *id)
            .collect();
        synced.sort_unstable();
        ReconfigStamp {
            enabled: settings.reconfig_enabled && !g.member.standalone,
            standalone: settings.reconfig_enabled && g.member.standalone,
            skip_acl: settings.skip_acl,
            in_progress: self.change_under_way(g),
            synced,
        }
    }

    /// Whether a membership change is being carried out: Raft is in a joint configuration
    /// or has a conf change not applied yet, or members the committed configuration
    /// removes or demotes are still voters. (A new voter that has not caught up is not
    /// waited for: it may never start, and the operator must be able to remove it.)
    fn change_under_way(&self, g: &Group) -> bool {
        let (voters, learners, joint) = current(g);
        let known: BTreeSet<u64> = voters.union(&learners).copied().collect();
        let joiners = &self.joiners;
        joint
            || g.node.raft.pending_conf_index > g.applied.index
            || target(g).is_some_and(|(tv, tl)| {
                voters.iter().any(|id| !tv.contains(id))
                    || known
                        .iter()
                        .any(|id| !tv.contains(id) && !tl.contains(id) && !joiners.contains(*id))
                    || tv.union(&tl).any(|id| !known.contains(id))
            })
    }

    /// Every member: the peer transport follows the committed configuration.
    fn follow_peers(&mut self, g: &Group) {
        let committed = {
            let state = g.replica.state.read();
            reconfig::committed(&state.tree)
        };
        let Some(c) = committed else { return };
        if self.peers_version == Some(c.version) {
            return;
        }
        self.peers_version = Some(c.version);
        self.listed_observer = c.servers.get(&g.member.me).map(|s| s.observer);
        let settings = g.replica.config();
        if let Some(file) = settings
            .config_file
            .as_ref()
            .filter(|_| settings.reconfig_enabled)
        {
            match super::dynamic_file::persist(file, &c) {
                Ok(path) => tracing::info!(
                    "configuration {:x} written to {}",
                    c.version,
                    path.display()
                ),
                Err(e) => tracing::warn!("cannot write the dynamic configuration file: {e}"),
            }
        }
        let Some(peers) = &g.peers else { return };
        let addrs: HashMap<u64, SocketAddr> = c
            .servers
            .values()
            .filter_map(|s| {
                let addr = (s.host.as_str(), s.quorum_port)
                    .to_socket_addrs()
                    .ok()?
                    .next();
                if addr.is_none() {
                    tracing::warn!("cannot resolve {}:{}", s.host, s.quorum_port);
                }
                Some((s.id, addr?))
            })
            .collect();
        peers.set_members(&addrs);
    }

    /// The membership duties, run with the session round: every member's transport follows
    /// the committed configuration; the leader moves Raft's membership toward it.
    pub fn membership_round(
        &mut self,
        g: &mut Group,
        trust: &Trust,
        proposals: &mut Proposals,
        now: Instant,
    ) {
        self.follow_peers(g);
        if !g.leads() || g.transferring() || g.member.standalone {
            return;
        }
        let Some((tv, tl)) = target(g) else {
            self.state_first_config(g, proposals, now);
            return;
        };
        if g.node.raft.pending_conf_index > g.applied.index {
            return;
        }
        let (cv, cl, joint) = current(g);
        if joint {
            // A leader that entered the joint configuration died before leaving it (or a
            // test holds it there).
            if !g.hooks.hold(test_hooks::IN_JOINT, g.member.me) {
                propose_change(g, Vec::new(), Vec::new(), "leave the joint configuration");
            }
            return;
        }
        let known: BTreeSet<u64> = cv.union(&cl).copied().collect();
        if let Some(new) = tv.union(&tl).find(|id| !known.contains(id)) {
            let change = single(ConfChangeType::AddLearnerNode, *new);
            propose_change(
                g,
                vec![change],
                Vec::new(),
                "a new member joins as a learner",
            );
            return;
        }
        let joiners = &mut self.joiners;
        joiners.prune(|id| tv.contains(&id) || tl.contains(&id), now);
        let joiner = joiners.ids().find(|id| !known.contains(id));
        if let Some(joiner) = joiner {
            let change = single(ConfChangeType::AddLearnerNode, joiner);
            let why = "a server that wants to join syncs as a learner before a reconfig adds it";
            propose_change(g, vec![change], Vec::new(), why);
            return;
        }
        let me = g.member.me;
        if !tv.contains(&me) {
            let to = tv
                .iter()
                .filter(|id| cv.contains(id))
                .filter_map(|id| g.node.raft.prs().get(*id).map(|pr| (*id, pr.matched)))
                .max_by_key(|(_, matched)| *matched);
            if let Some((to, _)) = to {
                tracing::info!(member = me, "leaving the voters: leadership goes to {to}");
                g.node.transfer_leader(to);
            }
            return;
        }
        let last = g.node.raft.raft_log.last_index();
        let caught_up = |id: &u64| {
            g.node
                .raft
                .prs()
                .get(*id)
                .is_some_and(|pr| pr.recent_active && pr.matched + CAUGHT_UP_SLACK >= last)
        };
        // Learners are promoted once caught up; one that never catches up (a member that
        // never started) stays a learner and holds nothing else back.
        // A member whose store is untrusted is promoted only once the leader has reset what
        // it believed the member holds and the member caught up from there (`recovery.rs`);
        // the change names its incarnation, so that it knows it counts again.
        let ready = |id: &u64| match trust.untrusted_peer(*id) {
            None => true,
            Some(inc) => trust.reset.contains(&(*id, inc)),
        };
        let promote: Vec<u64> = tv
            .difference(&cv)
            .copied()
            .filter(caught_up)
            .filter(ready)
            .collect();
        let verdicts: Vec<Verdict> = promote
            .iter()
            .filter_map(|id| Some(Verdict::Promote(*id, trust.untrusted_peer(*id)?)))
            .collect();
        let mut changes: Vec<ConfChangeSingle> = promote
            .iter()
            .map(|id| single(ConfChangeType::AddNode, *id))
            .collect();
        changes.extend(
            tl.intersection(&cv)
                .map(|id| single(ConfChangeType::AddLearnerNode, *id)),
        );
        let joiners = &self.joiners;
        changes.extend(
            known
                .iter()
                .filter(|id| !tv.contains(id) && !tl.contains(id) && !joiners.contains(**id))
                .map(|id| single(ConfChangeType::RemoveNode, *id)),
        );
        let voters_after = cv.iter().filter(|id| tv.contains(id)).count() + promote.len();
        if voters_after == 0 {
            return;
        }
        if !promote.is_empty() && g.hooks.hold(test_hooks::BEFORE_JOINT, me) {
            return;
        }
        if !changes.is_empty() {
            propose_change(
                g,
                changes,
                Verdict::context(&verdicts),
                "Raft's membership follows the committed configuration",
            );
        }
    }

    /// A peer said who it is: one with a new (untrusted) store that the committed
    /// configuration does not name wants to join (`joiners.rs`).
    pub fn maybe_joiner(&mut self, g: &Group, trust: &Trust, from: u64) {
        if !g.replica.config().reconfig_enabled
            || g.member.standalone
            || trust.untrusted_peer(from).is_none()
        {
            return;
        }
        let named = {
            let state = g.replica.state.read();
            reconfig::committed(&state.tree).map(|c| c.servers.contains_key(&from))
        };
        if named == Some(false) {
            self.joiners.heard(from);
        }
    }

    /// Whether `srvr` calls this member an observer: a Raft learner that the configuration
    /// (the committed one, or zoo.cfg's before one is) names an observer. A learner named a
    /// participant (caught up before its promotion) or not named yet (a joiner) reports
    /// itself a follower, as ZooKeeper's does.
    pub fn reports_observer(&self, g: &Group) -> bool {
        let listed = self.listed_observer.unwrap_or_else(|| {
            let members = &g.replica.config().members;
            members.get(&g.member.me).is_some_and(|m| m.observer)
        });
        g.member.observer && listed
    }

    /// [`state_first_config`](Self::state_first_config) unless there is a configuration.
    pub fn state_first_config_if_none(
        &mut self,
        g: &Group,
        proposals: &mut Proposals,
        now: Instant,
    ) {
        if g.replica.config().reconfig_enabled && !g.member.standalone && target(g).is_none() {
            self.state_first_config(g, proposals, now);
        }
    }

    /// Proposes `/zookeeper/config`'s first content, from zoo.cfg (reconfigEnabled only).
    fn state_first_config(&mut self, g: &Group, proposals: &mut Proposals, now: Instant) {
        if !g.replica.config().reconfig_enabled
            || self
                .stated_at
                .is_some_and(|t| now.saturating_duration_since(t) < RESTATE_AFTER)
        {
            return;
        }
        self.stated_at = Some(now);
        let text = initial_config(g.replica.config(), INITIAL_VERSION).text();
        proposals.push(Command::SetConfig { text }, now);
    }
}

/// The committed configuration's voters and observers, if there is one.
fn target(g: &Group) -> Option<(BTreeSet<u64>, BTreeSet<u64>)> {
    let state = g.replica.state.read();
    let c = reconfig::committed(&state.tree)?;
    Some((c.voters(), c.observers()))
}

/// Raft's voters and learners, and whether it is in a joint configuration.
fn current(g: &Group) -> (BTreeSet<u64>, BTreeSet<u64>, bool) {
    let cs = g.node.raft.prs().conf().to_conf_state();
    let joint = !cs.voters_outgoing.is_empty();
    (
        cs.voters.into_iter().collect(),
        cs.learners.into_iter().chain(cs.learners_next).collect(),
        joint,
    )
}

/// Tells the console's timeline (`changes.rs`) Raft's membership after the entry at
/// `index` (0: as the member starts).
pub(super) fn note_membership(g: &Group, index: u64) {
    let cs = g.node.raft.prs().conf().to_conf_state();
    let voters: Vec<u64> = cs
        .voters
        .iter()
        .chain(&cs.voters_outgoing)
        .copied()
        .collect();
    g.replica.changes.membership(&voters, &cs.learners, index);
}

/// Until the first configuration is committed, `/zookeeper/config` shows zoo.cfg's. At
/// start, also the membership the console's timeline starts from.
pub(super) fn show_local_config(g: &Group) {
    note_membership(g, 0);
    if g.replica.config().reconfig_enabled && !g.member.standalone {
        let text = initial_config(g.replica.config(), reconfig::LOCAL_VERSION).text();
        reconfig::show_local(&mut g.replica.state.write().tree, &text);
    }
}

fn propose_change(g: &mut Group, changes: Vec<ConfChangeSingle>, context: Vec<u8>, why: &str) {
    let mut cc = ConfChangeV2 {
        context: context.into(),
        ..Default::default()
    };
    if !changes.is_empty() && g.hooks.armed(test_hooks::IN_JOINT) {
        cc.set_transition(ConfChangeTransition::Explicit);
    }
    cc.set_changes(changes.into());
    tracing::info!(member = g.member.me, "proposing {cc:?}: {why}");
    if let Err(e) = g.node.propose_conf_change(Vec::new(), cc) {
        tracing::warn!("membership change not proposed: {e}");
    }
}

/// Applies a committed conf change entry to raft-rs (every member, in log order).
pub(super) fn apply_conf_change(g: &mut Group, recovery: &mut Recovery, e: &Entry) {
    let mut context = None;
    let result = match e.get_entry_type() {
        EntryType::EntryConfChangeV2 => ConfChangeV2::parse_from_bytes(&e.data)
            .map_err(|err| err.to_string())
            .and_then(|cc| {
                context = Some(cc.context.clone());
                g.node.apply_conf_change(&cc).map_err(|err| err.to_string())
            }),
        _ => ConfChange::parse_from_bytes(&e.data)
            .map_err(|err| err.to_string())
            .and_then(|cc| g.node.apply_conf_change(&cc).map_err(|err| err.to_string())),
    };
    match result {
        Ok(cs) => {
            tracing::info!(
                member = g.member.me,
                index = e.index,
                "membership is now voters {:?} (outgoing {:?}), learners {:?}",
                cs.voters,
                cs.voters_outgoing,
                cs.learners
            );
            g.member.observer = cs.learners.contains(&g.member.me);
            note_membership(g, e.index);
            if let Some(context) = context {
                recovery.applied_verdict(g, &context);
            }
        }
        Err(err) => tracing::error!(index = e.index, "membership change not applied: {err}"),
    }
}

fn single(change_type: ConfChangeType, node_id: u64) -> ConfChangeSingle {
    let mut c = ConfChangeSingle::default();
    c.set_change_type(change_type);
    c.node_id = node_id;
    c
}
