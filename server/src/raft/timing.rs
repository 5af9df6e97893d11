//! raft-rs's timing: the tick counts of elections and heartbeats, and the election timeout
//! every other timeout of zooraft's (waiting for a session grant, for a sync, for a leader,
//! the grace period before dropping clients) is counted in.

use std::time::{Duration, Instant};

/// raft-rs elects after this many ticks without hearing from a leader (randomized up to
/// twice as many).
pub const ELECTION_TICKS: usize = 10;
/// A leader sends heartbeats every this many ticks.
pub const HEARTBEAT_TICKS: usize = 2;

/// raft-rs's base election timeout for a tick length.
pub fn election_timeout(tick: Duration) -> Duration {
    tick * ELECTION_TICKS as u32
}

/// The loop's timers. All deadlines are on the driver's clock.
/// (The tick length itself is the group's, `Group::tick`.)
pub(super) struct Timers {
    /// How often session activity is collected and the status published.
    pub touch_interval: Duration,
    pub next_tick: Instant,
    pub next_touch: Instant,
    pub next_cleanup: Instant,
    /// When the timers last ran: a long gap means this member was stalled (SIGSTOP, a VM
    /// pause, swapping) and saw no sign of life from anyone meanwhile.
    pub last_run: Instant,
    /// A takeover's designated member campaigns every tick until a leader is known, up to
    /// this (its first campaign may reach members that have not started Raft yet).
    pub campaign_until: Option<Instant>,
}

impl Timers {
    pub(super) fn next_deadline(&self) -> Instant {
        self.next_tick.min(self.next_touch)
    }

    /// Whether to campaign again at `now` (see [`Timers::campaign_until`]).
    pub(super) fn campaign_again(&mut self, now: Instant, leader_known: bool) -> bool {
        match self.campaign_until {
            Some(until) if !leader_known && now < until => true,
            Some(_) => {
                self.campaign_until = None;
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_takeover_campaigns_until_a_leader_is_known_or_its_grace_ends() {
        let now = Instant::now();
        let mut t = Timers {
            touch_interval: Duration::from_millis(500),
            next_tick: now,
            next_touch: now,
            next_cleanup: now,
            last_run: now,
            campaign_until: None,
        };
        assert!(!t.campaign_again(now, false), "no takeover: never");
        t.campaign_until = Some(now + Duration::from_secs(1));
        assert!(t.campaign_again(now, false));
        assert!(t.campaign_again(now + Duration::from_millis(900), false));
        assert!(
            !t.campaign_again(now + Duration::from_millis(900), true),
            "a leader: done"
        );
        assert!(!t.campaign_again(now, false), "and for good");
        t.campaign_until = Some(now);
        assert!(
            !t.campaign_again(now + Duration::from_millis(1), false),
            "grace over"
        );
    }
}
