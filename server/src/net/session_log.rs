//! What this member saw of each session, for the console's Sessions page: when it was
//! created, each connection to this member (from which address, new or resumed) and how it
//! ended, a resume refused, and how the session ended (closed by its client or expired,
//! with the zxid and the ephemerals that went with it).
//!
//! Bounded: a session keeps its last [`PER_SESSION`] events; all sessions together keep at
//! most [`TOTAL`] events (when more come, the session whose last event is the oldest is
//! forgotten first, live or not); a session that ended is forgotten [`RETAIN_MS`] after
//! its end. An event is about a hundred bytes (an ephemeral's path is kept up to
//! [`PATH_MAX`] bytes, [`PATHS_KEPT`] of them), so the log stays under a few megabytes
//! however many sessions come and go. Recording takes one short lock and never waits on
//! I/O: the apply loop records under the state's write lock, a connection as it starts and
//! ends.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::state::tree::Trigger;

/// Events kept per session (the oldest go first).
pub const PER_SESSION: usize = 16;
/// Events kept in all.
pub const TOTAL: usize = 20_000;
/// How long a session that ended is remembered (an hour).
pub const RETAIN_MS: i64 = 3_600_000;
/// Ephemeral paths kept per expiry or close (the count is always whole), and their length.
pub const PATHS_KEPT: usize = 8;
pub const PATH_MAX: usize = 200;

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// Applied: the session was created at `zxid` (on every member).
    Created { zxid: i64, timeout_ms: i32 },
    /// A client connected to this member with the session: new, or resumed (`resumed`).
    Connected {
        from: SocketAddr,
        resumed: bool,
        secure: bool,
    },
    /// A resume was refused here (the session had expired, or its password was wrong).
    Refused { why: &'static str },
    /// The connection to this member ended, and why.
    Disconnected { why: Box<str> },
    /// Applied: closing the session deleted `count` ephemerals (the first few named).
    EphemeralsDeleted {
        zxid: i64,
        count: usize,
        paths: Vec<Box<str>>,
    },
    /// Applied: the client closed the session, through member `by`.
    Closed { zxid: i64, by: u64 },
    /// Applied: the leader expired it (no sign of life for its timeout), or a restore did.
    Expired { zxid: i64 },
}

/// One event: when (milliseconds since the epoch) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub at_ms: i64,
    pub what: What,
}

struct Ring {
    events: VecDeque<Event>,
    /// When it ended (closed or expired), if it did.
    ended_ms: Option<i64>,
    /// Its place in [`Inner::by_age`].
    stamp: u64,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<i64, Ring>,
    /// Sessions by the stamp of their last event, oldest first.
    by_age: BTreeMap<u64, i64>,
    /// Ended sessions in the order they ended, for [`RETAIN_MS`].
    ended: VecDeque<(i64, i64)>,
    total: usize,
    next_stamp: u64,
}

/// See the module docs.
#[derive(Default)]
pub struct SessionLog {
    inner: Mutex<Inner>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn short(path: &str) -> Box<str> {
    if path.len() <= PATH_MAX {
        return path.into();
    }
    let mut end = PATH_MAX;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &path[..end]).into()
}

impl SessionLog {
    /// Records `what` for `session`, now.
    pub fn record(&self, session: i64, what: What) {
        self.record_at(session, what, now_ms());
    }

    /// The ephemerals a close deleted, from its triggers.
    pub fn deleted(&self, session: i64, zxid: i64, triggers: &[Trigger]) {
        let deleted = triggers.iter().filter_map(|t| match t {
            Trigger::Deleted(p) => Some(p.as_str()),
            _ => None,
        });
        let count = deleted.clone().count();
        if count == 0 {
            return;
        }
        let paths = deleted.take(PATHS_KEPT).map(short).collect();
        self.record(session, What::EphemeralsDeleted { zxid, count, paths });
    }

    fn record_at(&self, session: i64, what: What, at_ms: i64) {
        let ends = matches!(what, What::Closed { .. } | What::Expired { .. });
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let stamp = inner.next_stamp;
        inner.next_stamp += 1;
        let ring = inner.sessions.entry(session).or_insert_with(|| Ring {
            events: VecDeque::new(),
            ended_ms: None,
            stamp,
        });
        inner.by_age.remove(&ring.stamp);
        ring.stamp = stamp;
        inner.by_age.insert(stamp, session);
        if ring.events.len() == PER_SESSION {
            ring.events.pop_front();
            inner.total -= 1;
        }
        ring.events.push_back(Event { at_ms, what });
        inner.total += 1;
        if ends && ring.ended_ms.is_none() {
            ring.ended_ms = Some(at_ms);
            inner.ended.push_back((at_ms, session));
        }
        inner.prune(at_ms);
    }

    /// What this member saw of `session`, oldest first (empty when nothing, or forgotten).
    pub fn of(&self, session: i64) -> Vec<Event> {
        let inner = self.inner.lock();
        inner
            .sessions
            .get(&session)
            .map(|r| r.events.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Sessions with a log, and events kept in all.
    pub fn size(&self) -> (usize, usize) {
        let inner = self.inner.lock();
        (inner.sessions.len(), inner.total)
    }
}

impl Inner {
    fn forget(&mut self, session: i64) {
        if let Some(r) = self.sessions.remove(&session) {
            self.by_age.remove(&r.stamp);
            self.total -= r.events.len();
        }
    }

    fn prune(&mut self, now_ms: i64) {
        while let Some(&(at, session)) = self.ended.front() {
            if at > now_ms - RETAIN_MS && self.ended.len() <= TOTAL {
                break;
            }
            self.ended.pop_front();
            // Only if it is still the ended session that was queued (not forgotten and
            // seen again since).
            if self
                .sessions
                .get(&session)
                .is_some_and(|r| r.ended_ms == Some(at))
            {
                self.forget(session);
            }
        }
        while self.total > TOTAL {
            let Some((_, session)) = self.by_age.pop_first() else {
                break;
            };
            self.forget(session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connected() -> What {
        What::Connected {
            from: "127.0.0.1:5000".parse().expect("an address"),
            resumed: false,
            secure: false,
        }
    }

    #[test]
    fn a_session_keeps_its_last_events_and_its_end_for_an_hour() {
        let log = SessionLog::default();
        log.record_at(
            1,
            What::Created {
                zxid: 5,
                timeout_ms: 4000,
            },
            0,
        );
        for i in 0..PER_SESSION as i64 {
            log.record_at(1, connected(), 10 + i);
        }
        let deleted = [
            Trigger::Deleted("/a/e1".into()),
            Trigger::ChildrenChanged("/a".into()),
            Trigger::Deleted("/a/e2".into()),
        ];
        log.deleted(1, 9, &deleted);
        log.record_at(1, What::Expired { zxid: 9 }, 100);
        let events = log.of(1);
        assert_eq!(events.len(), PER_SESSION);
        assert_eq!(events[PER_SESSION - 1].what, What::Expired { zxid: 9 });
        assert!(matches!(
            &events[PER_SESSION - 2].what,
            What::EphemeralsDeleted { count: 2, paths, .. } if paths.len() == 2
        ));
        // Another session's event an hour later forgets the ended one.
        log.record_at(2, connected(), 100 + RETAIN_MS - 1);
        assert_eq!(log.of(1).len(), PER_SESSION);
        log.record_at(2, connected(), 101 + RETAIN_MS);
        assert!(log.of(1).is_empty());
        assert_eq!(log.size(), (1, 2));
    }

    #[test]
    fn all_sessions_together_stay_under_the_total() {
        let log = SessionLog::default();
        for s in 0..(TOTAL as i64 + 500) {
            log.record_at(s, connected(), s);
        }
        let (sessions, events) = log.size();
        assert_eq!((sessions, events), (TOTAL, TOTAL));
        // The oldest went first.
        assert!(log.of(0).is_empty());
        assert_eq!(log.of(TOTAL as i64 + 499).len(), 1);
        let long = "/x".repeat(PATH_MAX);
        log.deleted(7, 1, &[Trigger::Deleted(long)]);
        let events = log.of(7);
        let What::EphemeralsDeleted { paths, .. } = &events[0].what else {
            panic!("not a deletion: {events:?}");
        };
        assert!(paths[0].len() <= PATH_MAX + '…'.len_utf8());
    }
}
