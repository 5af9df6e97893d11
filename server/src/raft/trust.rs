//! Members whose data directory may have forgotten what they acknowledged.
//!
//! Raft's safety rests on a voter never forgetting a vote or an entry it acknowledged. A
//! member restarted on a wiped directory, a new disk or an older copy of its directory
//! has forgotten some: if it votes, a member missing committed entries can lead with it
//! and acknowledged writes are lost; if its acknowledgements count, a deposed leader can
//! commit over them. So a store is *trusted* or not (`storage/identity.rs`), and:
//!
//! 1. **An untrusted member takes no part in quorums.** It grants no vote and never
//!    campaigns (its election timer does not run), and every member drops the
//!    acknowledgements (append and heartbeat responses) and votes an untrusted voter sends.
//!    Every member knows from the hello that opens each peer connection, before any Raft
//!    message on it, what the peer says of its store. It serves no clients either, so it
//!    never shows a client an older tree than the one it saw.
//! 2. **The leader demotes it to a learner**, with a conf change committed by a majority
//!    of the *other* voters (its own acknowledgements do not count), resets what it
//!    believed the member holds, copies the log (or a snapshot) to it, and once it has
//!    caught up **promotes it back** with a conf change that names the member's
//!    incarnation; the member is trusted from the moment it applies that entry. An
//!    untrusted observer is caught up and trusted the same way, without the demotion.
//! 3. **A new ensemble still forms from empty directories**: an empty untrusted member
//!    votes for an empty candidate (and campaigns itself) once it has heard from a quorum
//!    of the voters and every one it heard from is as empty as itself; or, when one of them
//!    holds a store an import or a restore wrote (a *seed*), it votes for that one only.
//!    A founding voter is trusted once it takes the first entries from the leader it
//!    voted for in that term (a vote for a candidate that lost leaves it untrusted); the
//!    seed stops being one once it has committed an entry with the others. A member with
//!    any log never votes for an empty candidate (Raft's own rule), so a wiped member can
//!    only ever form a new history with other empty ones.
//! 4. **A member that learns it lost entries it acknowledged** (a leader says entries up to
//!    an index are committed counting on it, and its log ends before) takes a new
//!    incarnation, untrusted, and goes through 2 with no operator step.
//!
//! Why this is safe in every order of restarts: an untrusted member counts in no election
//! and no commit, so every quorum is one of trusted members, each of which holds all it
//! ever acknowledged. The demotion commits only with a majority of the others; any later
//! election quorum (a majority of the voters without the demoted one) meets every earlier
//! commit quorum in a trusted member, since a commit quorum that counted the forgotten
//! member still has ⌊n/2⌋ others and ⌊n/2⌋ + ⌊(n-1)/2⌋ + 1 = n > n-1. So every later
//! leader holds every committed entry, and the member it promotes holds a copy of that
//! log. A member restarted with a trusted store (the ordinary restart) is not held back
//! at all. A member promoted back also waits until [`QUARANTINE_TIMEOUTS`] election
//! timeouts after its start before it grants a vote: any election its earlier life voted
//! in has ended by then.
//!
//! This file holds what this member knows of its own store and its peers' and the rules
//! that follow; `recovery.rs` acts on them in the Raft loop.
//!
//! What cannot be told apart: an ensemble whose every member is empty looks new (a
//! majority of wiped members whose only surviving copy is on members that are down forms
//! a new, empty history: the book says how to avoid and recover from it (docs/src/migration.md)); and a store
//! restored from an older copy is only caught once a leader's commit index shows the gap.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use raft::eraftpb::{Message, MessageType};

use super::input::PeerIdentity;
use super::storage::Identity;

/// A trusted member that started untrusted grants no vote until this many election
/// timeouts after its start (raft-rs randomizes a candidate's timeout below two of them).
pub(super) const QUARANTINE_TIMEOUTS: u32 = 4;
/// The context of the conf changes that demote and promote a recovering member.
const DEMOTE: &str = "zooraft-untrusted";
const PROMOTE: &str = "zooraft-trusted";

/// This member's and its peers' trust (see the module docs).
pub(super) struct Trust {
    /// This store's identity, as last written.
    pub me: Identity,
    /// Votes wait until then (see [`QUARANTINE_TIMEOUTS`]).
    pub(super) votes_from: Instant,
    /// Where the quarantine of a member promoted in this run ends.
    pub(super) quarantine_until: Instant,
    /// When an untrusted member next says again what it is (see `recovery.rs`).
    pub(super) next_announce: Instant,
    /// What each peer last said of itself.
    pub(super) peers: HashMap<u64, PeerIdentity>,
    /// The incarnation a committed conf change promoted, by member.
    pub(super) promoted: HashMap<u64, u64>,
    /// When this member applied each peer's promotion (in this run): the peer grants no
    /// vote and takes no leadership until its quarantine is over.
    pub(super) promoted_at: HashMap<u64, Instant>,
    /// Leader: recovering learners whose progress it reset, by member and incarnation.
    pub(super) reset: HashSet<(u64, u64)>,
    /// Leader: when it first saw each untrusted voter, by member and incarnation. It
    /// demotes one an election timeout later: a founding voter's word that it is trusted
    /// follows the leader's first entries, and needs no demotion.
    pub(super) untrusted_since: HashMap<(u64, u64), Instant>,
    /// An election timeout.
    pub(super) election: Duration,
    /// The founding vote this untrusted member granted: term and candidate.
    pub(super) founding_vote: Option<(u64, u64)>,
    /// A seed's snapshot index: once the commit index passes it, it is a seed no more.
    pub(super) seed_index: u64,
    /// The last reason published (logged when it changes).
    pub(super) reason: Option<String>,
}

/// How an empty untrusted member may take part in forming an ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Founding {
    /// Every member it heard from is empty: it votes for an empty candidate, or campaigns.
    Empty,
    /// A seed is among them: it votes for a seed only, and never campaigns.
    OnSeed,
}

/// A conf change about one recovering member: its id and incarnation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Demote(u64, u64),
    Promote(u64, u64),
}

impl Verdict {
    fn text(&self) -> String {
        match self {
            Verdict::Demote(id, inc) => format!("{DEMOTE} {id} {inc:016x}"),
            Verdict::Promote(id, inc) => format!("{PROMOTE} {id} {inc:016x}"),
        }
    }

    /// The context of a conf change carrying these verdicts (one per line).
    pub fn context(verdicts: &[Verdict]) -> Vec<u8> {
        let lines: Vec<String> = verdicts.iter().map(Verdict::text).collect();
        lines.join("\n").into_bytes()
    }

    /// The verdicts of a conf change's context (none in another context).
    pub fn parse_all(context: &[u8]) -> Vec<Verdict> {
        std::str::from_utf8(context)
            .map(|text| text.lines().filter_map(Verdict::parse).collect())
            .unwrap_or_default()
    }

    fn parse(text: &str) -> Option<Verdict> {
        let mut words = text.split(' ');
        let kind = words.next()?;
        let id = words.next()?.parse().ok()?;
        let inc = u64::from_str_radix(words.next()?, 16).ok()?;
        match kind {
            DEMOTE => Some(Verdict::Demote(id, inc)),
            PROMOTE => Some(Verdict::Promote(id, inc)),
            _ => None,
        }
    }
}

impl Trust {
    pub fn new(me: Identity, now: Instant, election: Duration, seed_index: u64) -> Trust {
        Trust {
            me,
            votes_from: now,
            next_announce: now,
            quarantine_until: now + election * QUARANTINE_TIMEOUTS,
            peers: HashMap::new(),
            promoted: HashMap::new(),
            promoted_at: HashMap::new(),
            reset: HashSet::new(),
            untrusted_since: HashMap::new(),
            election,
            founding_vote: None,
            seed_index,
            reason: None,
        }
    }

    /// What a peer said of itself.
    pub fn heard(&mut self, from: u64, said: PeerIdentity) {
        self.peers.insert(from, said);
    }

    /// A peer's log reaches at least `index` (seen in a message from it).
    pub fn seen_log(&mut self, from: u64, index: u64) {
        if let Some(p) = self.peers.get_mut(&from) {
            p.last_index = p.last_index.max(index);
        }
    }

    /// The incarnation of `id` if the member is known to be untrusted.
    pub fn untrusted_peer(&self, id: u64) -> Option<u64> {
        let p = self.peers.get(&id)?;
        (p.incarnation != 0 && !p.trusted && self.promoted.get(&id) != Some(&p.incarnation))
            .then_some(p.incarnation)
    }

    /// Whether peer `id` could campaign now, as far as this member knows: not untrusted,
    /// and not promoted in this run less than a quarantine ago (its quarantine counts from
    /// its own start, which came before its promotion). A leader hands over to such a peer
    /// only: any other drops the `MsgTimeoutNow`.
    pub fn may_take_over(&self, id: u64, now: Instant) -> bool {
        let quarantined = self
            .promoted_at
            .get(&id)
            .is_some_and(|at| now < *at + self.election * QUARANTINE_TIMEOUTS);
        self.untrusted_peer(id).is_none() && !quarantined
    }

    /// How many peers are known to be untrusted.
    pub fn untrusted_count(&self) -> usize {
        self.peers
            .keys()
            .filter(|id| self.untrusted_peer(**id).is_some())
            .count()
    }

    /// Untrusted peers, in id order.
    pub fn untrusted_peers(&self) -> BTreeMap<u64, u64> {
        self.peers
            .keys()
            .filter_map(|id| Some((*id, self.untrusted_peer(*id)?)))
            .collect()
    }

    /// Whether an empty untrusted member may help found a new ensemble: it has heard from
    /// enough of the other voters for a quorum with itself, and every one it heard from is
    /// empty and untrusted too, or a seed (then only a seed may be voted in).
    fn founding(&self, my_last: u64, me: u64, voters: &[u64]) -> Option<Founding> {
        if self.me.trusted || my_last != 0 || !voters.contains(&me) {
            return None;
        }
        let quorum = voters.len() / 2 + 1;
        let mut heard = 0;
        let mut seed = false;
        for v in voters.iter().filter(|v| **v != me) {
            match self.peers.get(v) {
                Some(p) if p.seed && p.incarnation != 0 => {
                    seed = true;
                    heard += 1;
                }
                Some(p) if p.last_index != 0 || p.trusted || p.incarnation == 0 => return None,
                Some(_) => heard += 1,
                None => {}
            }
        }
        (heard + 1 >= quorum).then_some(if seed {
            Founding::OnSeed
        } else {
            Founding::Empty
        })
    }

    /// Whether this member may grant a vote or campaign now.
    pub fn may_vote(&self, now: Instant, my_last: u64, me: u64, voters: &[u64]) -> bool {
        if self.me.trusted {
            now >= self.votes_from
        } else {
            self.founding(my_last, me, voters) == Some(Founding::Empty)
        }
    }

    /// Whether this member may grant a vote to the candidate of `m` now (it may vote, and
    /// an untrusted one votes only for the kind of candidate its founding allows).
    pub fn may_vote_for(
        &self,
        now: Instant,
        m: &Message,
        my_last: u64,
        me: u64,
        voters: &[u64],
    ) -> bool {
        if self.me.seed {
            // A restore on every member makes them all seeds, which vote for each other;
            // a seed among members with a history (a restore of an old backup on one of
            // them) must not vote a stale one in.
            return self.peers.get(&m.from).is_some_and(|p| p.seed);
        }
        if self.me.trusted {
            return now >= self.votes_from;
        }
        match self.founding(my_last, me, voters) {
            Some(Founding::Empty) => m.index == 0,
            Some(Founding::OnSeed) => self.peers.get(&m.from).is_some_and(|p| p.seed),
            None => false,
        }
    }

    /// Whether a message from a peer may be stepped; `from_voter`: the sender is a voter
    /// of this member's configuration (either side of a joint one).
    pub fn admits_from_peer(&self, m: &Message, my_last: u64, from_voter: bool) -> bool {
        if !from_voter || self.untrusted_peer(m.from).is_none() {
            return true;
        }
        match m.get_msg_type() {
            // Its acknowledgements count toward nothing.
            MessageType::MsgAppendResponse | MessageType::MsgHeartbeatResponse => false,
            // Nor do its votes or candidacies, except among empty members founding an
            // ensemble (on an empty candidate or on a seed).
            MessageType::MsgRequestVoteResponse | MessageType::MsgRequestPreVoteResponse => {
                my_last == 0 || self.me.seed
            }
            MessageType::MsgRequestVote | MessageType::MsgRequestPreVote => {
                my_last == 0 && m.index == 0
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(incarnation: u64, trusted: bool, last_index: u64) -> PeerIdentity {
        PeerIdentity {
            incarnation,
            trusted,
            seed: false,
            last_index,
        }
    }

    fn trust(trusted: bool) -> (Trust, Instant) {
        let now = Instant::now();
        let me = Identity {
            incarnation: 7,
            trusted,
            seed: false,
        };
        (Trust::new(me, now, Duration::from_secs(1), 0), now)
    }

    fn msg(kind: MessageType, from: u64, index: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(kind);
        m.from = from;
        m.index = index;
        m
    }

    #[test]
    fn verdicts_read_back_from_their_context_and_other_contexts_have_none() {
        let all = vec![Verdict::Demote(3, 0xabc), Verdict::Promote(12, u64::MAX)];
        assert_eq!(Verdict::parse_all(&Verdict::context(&all)), all);
        assert_eq!(
            Verdict::parse_all(&Verdict::context(&all[1..])),
            vec![Verdict::Promote(12, u64::MAX)]
        );
        assert_eq!(Verdict::parse_all(b""), vec![]);
        assert_eq!(Verdict::parse_all(b"zooraft-trusted 3"), vec![]);
        assert_eq!(Verdict::parse_all(b"other 3 1"), vec![]);
        assert_eq!(Verdict::parse_all(&[0xff, 0xfe]), vec![]);
    }

    #[test]
    fn an_untrusted_member_votes_only_to_found_an_ensemble_of_empty_members() {
        let (mut t, now) = trust(false);
        let voters = [1, 2, 3];
        assert!(!t.may_vote(now, 0, 1, &voters), "heard from nobody yet");
        t.heard(2, said(5, false, 0));
        assert!(t.may_vote(now, 0, 1, &voters), "two empty of three");
        assert!(!t.may_vote(now, 4, 1, &voters), "its own log is not empty");
        t.heard(3, said(6, true, 20));
        assert!(!t.may_vote(now, 0, 1, &voters), "member 3 has history");
        t.heard(3, said(6, false, 0));
        t.seen_log(3, 9);
        assert!(!t.may_vote(now, 0, 1, &voters), "member 3 showed a log");
        let (mut t, now) = trust(false);
        t.heard(2, said(0, true, u64::MAX));
        assert!(!t.may_vote(now, 0, 1, &voters), "an earlier build's member");
    }

    #[test]
    fn with_a_seed_among_them_empty_members_vote_for_the_seed_only() {
        let (mut t, now) = trust(false);
        let voters = [1, 2, 3];
        t.heard(
            2,
            PeerIdentity {
                seed: true,
                ..said(5, true, 1)
            },
        );
        let mut from_seed = msg(MessageType::MsgRequestVote, 2, 1);
        let from_empty = msg(MessageType::MsgRequestVote, 3, 0);
        assert!(t.may_vote_for(now, &from_seed, 0, 1, &voters));
        assert!(!t.may_vote_for(now, &from_empty, 0, 1, &voters));
        assert!(!t.may_vote(now, 0, 1, &voters), "it does not campaign");
        // A seed votes for seeds only.
        let (mut s, now) = trust(true);
        s.me.seed = true;
        s.heard(3, said(8, true, 40));
        let from_member = msg(MessageType::MsgRequestVote, 3, 40);
        assert!(!s.may_vote_for(now, &from_member, 1, 1, &voters));
        s.heard(
            3,
            PeerIdentity {
                seed: true,
                ..said(8, true, 1)
            },
        );
        assert!(s.may_vote_for(now, &from_member, 1, 1, &voters));
        // Once the seed says it is one no more, nobody gets its vote.
        t.heard(2, said(5, true, 2));
        from_seed.index = 2;
        assert!(!t.may_vote_for(now, &from_seed, 0, 1, &voters));
    }

    #[test]
    fn a_trusted_member_votes_at_once_unless_promoted_back_in_this_run() {
        let (t, now) = trust(true);
        assert!(t.may_vote(now, 100, 1, &[1, 2, 3]));
        let (mut t, now) = trust(false);
        t.me.trusted = true;
        t.votes_from = t.quarantine_until;
        assert!(!t.may_vote(now, 100, 1, &[1, 2, 3]));
        let later = now + Duration::from_secs(QUARANTINE_TIMEOUTS as u64);
        assert!(t.may_vote(later, 100, 1, &[1, 2, 3]));
    }

    #[test]
    fn an_untrusted_voters_acknowledgements_and_votes_are_dropped_until_promoted() {
        let (mut t, _) = trust(true);
        t.heard(2, said(9, false, 0));
        for kind in [
            MessageType::MsgAppendResponse,
            MessageType::MsgHeartbeatResponse,
            MessageType::MsgRequestVoteResponse,
            MessageType::MsgRequestPreVoteResponse,
        ] {
            assert!(!t.admits_from_peer(&msg(kind, 2, 5), 10, true), "{kind:?}");
            assert!(t.admits_from_peer(&msg(kind, 2, 5), 10, false), "a learner");
            assert!(t.admits_from_peer(&msg(kind, 3, 5), 10, true), "member 3");
        }
        assert!(!t.admits_from_peer(&msg(MessageType::MsgRequestVote, 2, 5), 0, true));
        assert!(t.admits_from_peer(&msg(MessageType::MsgRequestVote, 2, 0), 0, true));
        assert!(t.admits_from_peer(&msg(MessageType::MsgRequestVoteResponse, 2, 0), 0, true));
        t.me.seed = true;
        assert!(t.admits_from_peer(&msg(MessageType::MsgRequestVoteResponse, 2, 0), 1, true));
        t.me.seed = false;
        assert!(t.admits_from_peer(&msg(MessageType::MsgReadIndex, 2, 0), 10, true));
        t.promoted.insert(2, 9);
        assert_eq!(t.untrusted_peer(2), None);
        assert!(t.admits_from_peer(&msg(MessageType::MsgAppendResponse, 2, 5), 10, true));
        // A later incarnation is untrusted again.
        t.heard(2, said(10, false, 0));
        assert_eq!(t.untrusted_peer(2), Some(10));
    }
}
