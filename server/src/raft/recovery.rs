//! The Raft loop's side of `trust.rs`: screening peers' messages, announcing this member's
//! word on its store, and the leader's demotion, catch-up and promotion of recovering
//! members (see `trust.rs` for why this is safe).

use std::sync::atomic::Ordering;

use raft::eraftpb::{ConfChangeSingle, ConfChangeType, ConfChangeV2, Message, MessageType};
use raft::StateRole;

use super::group::Group;
use super::input::PeerIdentity;
use super::joiners::Joiners;
use super::storage::Identity;
use super::trust::{Trust, Verdict};

/// How far behind the leader's log a recovering member may be and still be promoted.
const CAUGHT_UP_SLACK: u64 = 64;
/// How often an untrusted member tells its peers again what its store is.
const ANNOUNCE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The Raft loop's side of this member's and its peers' trust (see the module docs).
pub(super) struct Recovery {
    pub trust: Trust,
}

impl Recovery {
    /// Whether this member may vote or campaign now.
    pub fn may_vote(&self, g: &Group) -> bool {
        let now = g.clock.now();
        if self.trust.me.trusted && now >= self.trust.votes_from {
            return true;
        }
        self.trust
            .may_vote(now, g.last_index(), g.member.me, &g.voter_ids())
    }

    /// Screens a Raft message before it is stepped (see the module docs); false: drop it.
    pub fn screen(&mut self, g: &mut Group, m: &mut Message) -> bool {
        let my_last = g.last_index();
        match m.get_msg_type() {
            MessageType::MsgRequestVote | MessageType::MsgRequestPreVote => {
                self.trust.seen_log(m.from, m.index);
            }
            MessageType::MsgAppend => {
                self.trust
                    .seen_log(m.from, m.index + m.entries.len() as u64);
            }
            _ => {}
        }
        let from_voter = g.node.raft.prs().conf().voters().contains(m.from);
        if !self.trust.admits_from_peer(m, my_last, from_voter) {
            tracing::debug!(
                from = m.from,
                kind = ?m.get_msg_type(),
                "dropped: the sender's data directory is untrusted"
            );
            return false;
        }
        let now = g.clock.now();
        let me = g.member.me;
        match m.get_msg_type() {
            MessageType::MsgRequestVote | MessageType::MsgRequestPreVote => {
                let grant = self.trust.may_vote_for(now, m, my_last, me, &g.voter_ids());
                if !grant {
                    tracing::debug!(from = m.from, kind = ?m.get_msg_type(), "not voting yet");
                }
                grant
            }
            MessageType::MsgTimeoutNow if !self.may_vote(g) => false,
            MessageType::MsgAppend
                if !self.trust.me.trusted && self.trust.founding_vote == Some((m.term, m.from)) =>
            {
                // The candidate it voted for won: the ensemble's history starts from that
                // leader's log, which it is about to copy.
                tracing::info!(
                    member = me,
                    leader = m.from,
                    "founding an ensemble under leader {}: this data directory is trusted \
                     from now on",
                    m.from
                );
                self.set_identity(
                    g,
                    Identity {
                        trusted: true,
                        ..self.trust.me
                    },
                );
                true
            }
            MessageType::MsgHeartbeat if m.term >= g.node.raft.term && m.commit > my_last => {
                if self.trust.me.trusted {
                    self.lost_entries(g, m.from, m.commit, my_last);
                }
                // Until the leader resets what it believes we hold, commit what we have.
                m.commit = my_last;
                true
            }
            _ => true,
        }
    }

    /// After an untrusted member stepped a message (its kind, sender and term): a founding
    /// vote granted is remembered (the store is trusted once that candidate's first entries
    /// arrive), and a founding election won makes the store trusted (written before the
    /// leader's first messages leave, which happens when the turn's `Ready` is handled).
    pub fn after_step(&mut self, g: &Group, (kind, from, term): (MessageType, u64, u64)) {
        let raft = &g.node.raft;
        if kind == MessageType::MsgRequestVote && raft.term == term && raft.vote == from {
            self.trust.founding_vote = Some((term, from));
        }
        if raft.state == StateRole::Leader {
            tracing::info!(
                member = g.member.me,
                "founding a new ensemble with members as empty as this one: this data \
                 directory is trusted from now on"
            );
            self.set_identity(
                g,
                Identity {
                    trusted: true,
                    ..self.trust.me
                },
            );
        }
    }

    /// A seed whose commit index passed its snapshot has formed the ensemble with others:
    /// empty members must not vote it in any more.
    fn seed_round(&mut self, g: &Group) {
        if self.trust.me.seed && g.node.raft.raft_log.committed > self.trust.seed_index {
            tracing::info!(
                member = g.member.me,
                "the ensemble formed from this member's imported or restored state"
            );
            self.set_identity(
                g,
                Identity {
                    seed: false,
                    ..self.trust.me
                },
            );
        }
    }

    /// A leader counts on entries up to `commit` we no longer have: this store forgot
    /// what it acknowledged. Take a new incarnation, untrusted, and be caught up again.
    fn lost_entries(&mut self, g: &Group, leader: u64, commit: u64, last: u64) {
        tracing::error!(
            member = g.member.me,
            leader,
            "leader {leader} says entries up to index {commit} are committed counting on this \
             member's acknowledgement, but its log ends at {last}: entries it acknowledged \
             are gone from its data directory (a disk that lost fsynced writes, or a \
             directory restored from an older copy). It stops voting and counting toward \
             commits until the leader has caught it up again"
        );
        self.set_identity(g, Identity::fresh(false));
    }

    /// Writes this store's identity, then tells the peers.
    fn set_identity(&mut self, g: &Group, identity: Identity) {
        if let Err(e) = g.storage.set_identity(identity) {
            crate::critical::fatal(format_args!("cannot record this store's identity: {e}"));
        }
        self.trust.me = identity;
        self.announce(g, true);
    }

    /// Keeps what the hellos say of this member current (`tell_now`: tell every peer).
    pub fn announce(&self, g: &Group, tell_now: bool) {
        if let Some(peers) = &g.peers {
            peers.announce(
                PeerIdentity {
                    incarnation: self.trust.me.incarnation,
                    trusted: self.trust.me.trusted,
                    seed: self.trust.me.seed,
                    last_index: g.last_index(),
                },
                tell_now,
            );
        }
    }

    /// A peer said what its store is.
    pub fn peer_identity(&mut self, g: &Group, from: u64, said: PeerIdentity) {
        let was = self.trust.untrusted_peer(from);
        self.trust.heard(from, said);
        let now = self.trust.untrusted_peer(from);
        if now.is_some() && now != was {
            tracing::warn!(
                member = g.member.me,
                peer = from,
                incarnation = format!("{:016x}", said.incarnation),
                "member {from}'s data directory is untrusted (new, or it lost entries): it \
                 counts toward no quorum until it is caught up"
            );
        }
    }

    /// Every member, applying a committed conf change: a promotion of this incarnation
    /// makes this store trusted; every member remembers whom it promoted.
    pub fn applied_verdict(&mut self, g: &Group, context: &[u8]) {
        for verdict in Verdict::parse_all(context) {
            tracing::info!(member = g.member.me, "applied {verdict:?}");
            let Verdict::Promote(id, inc) = verdict else {
                continue;
            };
            self.trust.promoted.insert(id, inc);
            self.trust.promoted_at.insert(id, g.clock.now());
            if id == g.member.me && inc == self.trust.me.incarnation && !self.trust.me.trusted {
                tracing::info!(
                    member = id,
                    "caught up and promoted: this data directory is trusted from now on"
                );
                // Its votes wait until any election its earlier life voted in is over.
                self.trust.votes_from = self.trust.quarantine_until;
                self.set_identity(
                    g,
                    Identity {
                        trusted: true,
                        ..self.trust.me
                    },
                );
            }
        }
    }

    /// Leader: moves each untrusted member one step on (demote, reset, promote), one
    /// conf change at a time. Run with the session round.
    pub fn recovery_round(&mut self, g: &mut Group, joiners: &Joiners) {
        self.seed_round(g);
        let now = g.clock.now();
        if !self.trust.me.trusted && now >= self.trust.next_announce {
            // An untrusted member has nothing else to send: say it again every second, so
            // a peer that restarted meanwhile (or refuses our certificate) hears of it.
            self.trust.next_announce = now + ANNOUNCE_EVERY;
            self.announce(g, true);
        }
        if !g.leads() || g.transferring() || g.member.standalone {
            return;
        }
        let raft = &g.node.raft;
        if raft.pending_conf_index > g.applied.index {
            return;
        }
        let cs = raft.prs().conf().to_conf_state();
        if !cs.voters_outgoing.is_empty() {
            return;
        }
        let last = raft.raft_log.last_index();
        let caught_up = |g: &Group, id: u64| {
            g.node
                .raft
                .prs()
                .get(id)
                .is_some_and(|pr| pr.recent_active && pr.matched + CAUGHT_UP_SLACK >= last)
        };
        // A member demoted while untrusted that became trusted meanwhile (a founding voter
        // whose word came after the leader's first round): a voter again once caught up.
        // (With reconfig, `membership.rs` promotes such a member.)
        let governed = {
            let state = g.replica.state.read();
            crate::state::reconfig::committed(&state.tree).is_some()
        };
        if !governed {
            for id in cs.learners.iter().copied() {
                let trusted = self.trust.untrusted_peer(id).is_none();
                if trusted && wanted_voter(g, id) == Some(true) && caught_up(g, id) {
                    let inc = self.trust.peers.get(&id).map_or(0, |p| p.incarnation);
                    propose_verdict(g, Verdict::Promote(id, inc), ConfChangeType::AddNode);
                    return;
                }
            }
        }

        for (id, inc) in self.trust.untrusted_peers() {
            if cs.voters.contains(&id) {
                let election = self.trust.election;
                let since = *self.trust.untrusted_since.entry((id, inc)).or_insert(now);
                if now.saturating_duration_since(since) >= election {
                    propose_verdict(g, Verdict::Demote(id, inc), ConfChangeType::AddLearnerNode);
                    return;
                }
                continue;
            }
            if !cs.learners.contains(&id) {
                continue;
            }
            // A joiner is caught up and trusted as an observer is, until a reconfig names it.
            let voter = match wanted_voter(g, id) {
                Some(voter) => voter,
                None if joiners.contains(id) => false,
                None => continue,
            };
            if self.trust.reset.insert((id, inc)) {
                if let Some(pr) = g.node.raft.mut_prs().get_mut(id) {
                    // What it held before is gone: find out what it holds now.
                    pr.matched = 0;
                    pr.become_probe();
                    pr.next_idx = last + 1;
                }
                tracing::info!(member = id, "catching up recovering member {id}");
                continue;
            }
            if caught_up(g, id) {
                if voter && governed {
                    // `membership.rs` promotes it with the committed configuration's other
                    // changes, naming its incarnation.
                    continue;
                }
                let change = if voter {
                    ConfChangeType::AddNode
                } else {
                    ConfChangeType::AddLearnerNode
                };
                propose_verdict(g, Verdict::Promote(id, inc), change);
                return;
            }
        }
    }

    /// Why this member does not serve, as far as trust explains it (`srvr`, `mntr`, the
    /// log), published with the status.
    pub fn publish_trust(&mut self, g: &Group, serving: bool) {
        let me = g.member.me;
        let reason = if !self.trust.me.trusted {
            let leader = g.leadership.leader;
            // (No progress figures: the reason is logged whenever it changes.)
            let step = if leader == 0 {
                "waiting for a leader, which needs a quorum of the other voters".to_string()
            } else {
                format!("catching up from leader {leader}")
            };
            Some(format!(
                "this member's data directory is new or lost entries it had acknowledged \
                 (incarnation {:016x}): it does not vote, count toward commits or serve until \
                 a leader elected without it has caught it up; {step}",
                self.trust.me.incarnation
            ))
        } else if !serving && g.leadership.role != StateRole::Leader {
            let voters = g.voter_ids();
            let untrusted: Vec<u64> = voters
                .iter()
                .copied()
                .filter(|id| self.trust.untrusted_peer(*id).is_some())
                .collect();
            (!untrusted.is_empty()).then(|| {
                format!(
                    "no quorum without member(s) {untrusted:?}, whose data directories are \
                     new or lost entries (they vote only once caught up by a leader): a leader \
                     needs {} of the {} voters and {} can vote",
                    voters.len() / 2 + 1,
                    voters.len(),
                    voters.len() - untrusted.len()
                )
            })
        } else {
            None
        };
        if reason != self.trust.reason {
            if let Some(r) = &reason {
                tracing::warn!(member = me, "{r}");
            }
            self.trust.reason = reason.clone();
            *g.replica.status.held_back.lock() = reason;
        }
        let status = &g.replica.status;
        status
            .data_trusted
            .store(self.trust.me.trusted, Ordering::Relaxed);
        status
            .untrusted_peers
            .store(self.trust.untrusted_count() as u64, Ordering::Relaxed);
    }
}

/// Whether `id` belongs among the voters (the committed configuration's, or zoo.cfg's
/// without reconfig); `None` if it is no member at all.
fn wanted_voter(g: &Group, id: u64) -> Option<bool> {
    let state = g.replica.state.read();
    if let Some(c) = crate::state::reconfig::committed(&state.tree) {
        return c.servers.get(&id).map(|s| !s.observer);
    }
    g.replica.config().members.get(&id).map(|m| !m.observer)
}

fn propose_verdict(g: &mut Group, verdict: Verdict, change: ConfChangeType) {
    let id = match verdict {
        Verdict::Demote(id, _) | Verdict::Promote(id, _) => id,
    };
    let mut single = ConfChangeSingle::default();
    single.set_change_type(change);
    single.node_id = id;
    let mut cc = ConfChangeV2::default();
    cc.set_changes(vec![single].into());
    cc.context = Verdict::context(&[verdict]).into();
    tracing::info!(member = g.member.me, "proposing {verdict:?}");
    if let Err(e) = g.node.propose_conf_change(Vec::new(), cc) {
        tracing::warn!("{verdict:?} not proposed: {e}");
    }
}
