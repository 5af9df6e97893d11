//! The write pause of a cut-over, as one member keeps it: prepared (its clients' writes
//! held, the coordinator's session still writing, until a deadline), then committed
//! (the zxid the Raft ensemble starts from). The rules only; the observer loop acts on
//! them (see `cutover.rs` for the protocol).

use std::time::{Duration, Instant};

use zkdata::txn::TxnHeader;

use super::cutover::{Plan, Step};
use crate::state::command::Command;
use crate::state::StateMachine;

/// A prepared cut-over.
struct Prepared {
    plan: Plan,
    /// The coordinator's session: its writes still go through.
    control: i64,
    until: Instant,
    held: Vec<Command>,
}

/// A committed cut-over: its zxid and time, the plan's members and timeout.
pub struct Committed {
    pub zxid: i64,
    pub time: i64,
    pub members: Vec<u64>,
    pub timeout: Duration,
    /// This member's tree is past the commit (it took a SNAP of a later tree after missing
    /// the cut-over): it joins the Raft ensemble empty, to be caught up by its leader.
    pub late: bool,
    /// The plan, for the membership statement.
    pub plan: Plan,
}

/// See the module docs.
#[derive(Default)]
pub struct Pause {
    prepared: Option<Prepared>,
    committed: Option<Committed>,
}

impl Pause {
    /// Takes a cut-over step applied by this member (`me`), with the plan the tree holds
    /// (for a commit): the step as it applies to this member (`None`: it leaves this
    /// member out). An abort is for the caller to [`release`](Self::release).
    pub fn step(
        &mut self,
        step: Step,
        t: &TxnHeader,
        me: u64,
        plan_in_tree: impl FnOnce() -> Option<Plan>,
    ) -> Option<Step> {
        match step {
            Step::Prepare(plan) if plan.members.contains(&me) => {
                tracing::info!(
                    zxid = format!("{:#x}", t.zxid),
                    plan = plan.summary(),
                    "cut-over prepared: clients' writes are held until it commits"
                );
                self.prepare(plan.clone(), t.client_id, Instant::now());
                Some(Step::Prepare(plan))
            }
            Step::Commit => match plan_in_tree() {
                Some(plan) if plan.members.contains(&me) => {
                    self.commit(Committed {
                        zxid: t.zxid,
                        time: t.time,
                        members: plan.members.clone(),
                        timeout: Duration::from_millis(plan.timeout_ms),
                        late: false,
                        plan,
                    });
                    Some(Step::Commit)
                }
                _ => {
                    tracing::warn!("a cut-over committed without this member; it keeps observing");
                    None
                }
            },
            Step::Prepare(plan) => {
                tracing::warn!(
                    plan = plan.summary(),
                    "a cut-over that leaves this member out; it keeps observing"
                );
                None
            }
            Step::Abort => Some(Step::Abort),
        }
    }

    /// The prepare step, written by the coordinator's `session`.
    fn prepare(&mut self, plan: Plan, session: i64, now: Instant) {
        let until = now + Duration::from_millis(plan.timeout_ms);
        self.prepared = Some(Prepared {
            plan,
            control: session,
            until,
            held: Vec::new(),
        });
    }

    /// Holds `c` if a cut-over is prepared and `c` is not the coordinator's; gives it back
    /// otherwise (to be forwarded).
    pub fn hold(&mut self, c: Command) -> Option<Command> {
        match &mut self.prepared {
            Some(p) if session_of(&c) != Some(p.control) => {
                p.held.push(c);
                None
            }
            _ => Some(c),
        }
    }

    pub fn held(&self) -> usize {
        self.prepared.as_ref().map_or(0, |p| p.held.len())
    }

    /// When a prepared cut-over gives up.
    pub fn deadline(&self) -> Option<Instant> {
        self.prepared.as_ref().map(|p| p.until)
    }

    /// Gives the prepared cut-over up: its plan and the held commands (to be forwarded to
    /// ZooKeeper after all).
    pub fn release(&mut self) -> Option<(Plan, Vec<Command>)> {
        self.prepared.take().map(|p| (p.plan, p.held))
    }

    /// The link to the leader broke: held commands have nowhere to go (their connections
    /// are closed), the cut-over stays prepared.
    pub fn drop_held(&mut self) {
        if let Some(p) = &mut self.prepared {
            p.held.clear();
        }
    }

    pub fn commit(&mut self, c: Committed) {
        self.committed = Some(c);
    }

    pub fn take_committed(&mut self) -> Option<Committed> {
        self.committed.take()
    }

    pub fn is_committed(&self) -> bool {
        self.committed.is_some()
    }

    /// The held commands, in order (the cut-over hands them to Raft).
    pub fn take_held(&mut self) -> Vec<Command> {
        self.prepared.take().map(|p| p.held).unwrap_or_default()
    }
}

/// A cut-over `state` holds (`/zooraft-cutover/commit`) that this member (`me`) has not
/// taken: it stopped right after applying the commit (before recording it), or it synced
/// by SNAP past it after missing it (`late`).
pub fn missed(state: &StateMachine, me: u64) -> Option<Committed> {
    let commit = state.tree.get(super::cutover::COMMIT)?.stat();
    let plan = super::cutover::plan_in(&state.tree)?;
    if !plan.members.contains(&me) {
        return None;
    }
    Some(Committed {
        zxid: commit.czxid,
        time: commit.ctime,
        members: plan.members.clone(),
        timeout: Duration::from_millis(plan.timeout_ms),
        late: state.last_zxid != commit.czxid,
        plan,
    })
}

/// The session a command belongs to.
fn session_of(c: &Command) -> Option<i64> {
    match c {
        Command::Write(w) | Command::Reconfig { write: w, .. } => Some(w.session),
        Command::CreateSession { session, .. } | Command::CloseSession { session, .. } => {
            Some(*session)
        }
        Command::DeleteNode { .. } | Command::SetConfig { .. } | Command::Restore { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::command::{CloseReason, Origin};

    fn close(session: i64) -> Command {
        Command::CloseSession {
            session,
            reason: CloseReason::Client {
                origin: Origin { member: 4, conn: 1 },
                xid: 1,
            },
        }
    }

    #[test]
    fn a_prepared_pause_holds_all_but_the_coordinators_writes_until_released() {
        let mut p = Pause::default();
        assert!(p.hold(close(1)).is_some(), "nothing held before a prepare");
        let plan = Plan {
            nonce: "n".into(),
            members: vec![4],
            timeout_ms: 1000,
            servers: String::new(),
        };
        let now = Instant::now();
        p.prepare(plan.clone(), 9, now);
        assert_eq!(p.deadline(), Some(now + Duration::from_millis(1000)));
        assert!(p.hold(close(1)).is_none());
        assert!(p.hold(close(2)).is_none());
        assert!(
            p.hold(close(9)).is_some(),
            "the coordinator's session goes through"
        );
        assert_eq!(p.held(), 2);
        let (back, held) = p.release().unwrap();
        assert_eq!(back, plan);
        assert!(matches!(held[0], Command::CloseSession { session: 1, .. }));
        assert!(p.hold(close(1)).is_some(), "released: nothing held");
        assert!(p.deadline().is_none());
    }
}
