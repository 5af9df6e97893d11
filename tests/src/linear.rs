//! A linearizability checker: is there an order of a concurrent history's operations, each
//! placed somewhere between its call and its return, in which a sequential model gives
//! every operation the outcome its client saw?
//!
//! The search is Wing and Gong's, with Lowe's memoization (the algorithm Knossos and
//! Porcupine use): walk the history's call and return events in time order; at a call, try
//! to place that operation next (the model must accept its outcome from the current state)
//! and start again from the first event left; at a return whose operation is not placed
//! yet, undo the last placement and try the next candidate. A pair (set of placed
//! operations, model state) seen before is not searched again, which keeps the search
//! polynomial on the histories a real system produces. The history is linearizable iff
//! every operation gets placed.
//!
//! An operation whose outcome the client never learned (a timeout, a lost connection) may
//! have taken effect at any time after its call, or never. It is given a return at the end
//! of time and an unknown outcome, which the model accepts whatever the state: placing it
//! after everything else is the same as it never having happened, because nothing after it
//! observes it. Reads with an unknown outcome have no effect and are best left out.
//!
//! A history is checked per object (linearizability is compositional, so each znode's
//! history is checked alone), and within a bound on search steps: a search that runs out
//! says so ([`Verdict::Unknown`]) rather than passing.
//!
//! [`Znode`] models one znode as ZooKeeper clients use it as a register: read (after
//! `sync`), write (`setData` at any version) and compare-and-set (`setData` at the version
//! last read), with the version Stat carries as part of what a read sees, so a write lost
//! without trace (not only an overwritten one) is found.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Instant;

/// A sequential specification of one object.
pub trait Model: Clone + Eq + Hash + Debug {
    type Input: Debug;
    type Output: Debug;

    /// The state after `input` takes effect in this state with the outcome `output` (`None`:
    /// the client never learned it), or `None` if this state cannot give that outcome. With
    /// an unknown outcome every input must be accepted: the checker relies on it.
    fn step(&self, input: &Self::Input, output: Option<&Self::Output>) -> Option<Self>;
}

/// One operation of a history. Times are nanoseconds on one monotonic clock shared by
/// every client (see [`History`]).
#[derive(Debug, Clone)]
pub struct Op<I, O> {
    /// Who ran it (for reports only).
    pub client: usize,
    /// Just before the request was sent.
    pub call: u64,
    /// Just after the outcome arrived; `None` if it never did.
    pub ret: Option<u64>,
    pub input: I,
    /// `None` if the client never learned it.
    pub output: Option<O>,
}

/// The checker's answer.
#[derive(Debug)]
pub enum Verdict {
    Linearizable,
    /// No order works. The report shows the furthest the search got: the operations it
    /// placed, the state they left, and the operations that could not come next.
    NotLinearizable(String),
    /// The search ran out of steps before it found an order or ruled them all out.
    Unknown {
        steps: u64,
    },
}

/// Where the search stands when a return event is reached before its operation was placed.
struct Deepest {
    placed: usize,
    report: String,
}

const NIL: usize = usize::MAX;
const HEAD: usize = 0;

/// The history's events as a doubly linked list (entry 0 is the head), so that placing an
/// operation unlinks its call and return and undoing it links them back, both in O(1).
struct Events {
    op: Vec<usize>,
    is_call: Vec<bool>,
    /// For a call, its return's entry (and the other way round).
    matched: Vec<usize>,
    prev: Vec<usize>,
    next: Vec<usize>,
}

impl Events {
    fn new<I, O>(ops: &[Op<I, O>]) -> Events {
        // Calls sort before returns at the same instant: two operations that touch in time
        // are concurrent (the lenient reading; a clock tie proves no order).
        let mut order: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            order.push((op.call, false, i));
            order.push((op.ret.unwrap_or(u64::MAX).max(op.call), true, i));
        }
        order.sort_unstable();
        let n = order.len() + 1;
        let mut ev = Events {
            op: vec![NIL; n],
            is_call: vec![false; n],
            matched: vec![NIL; n],
            prev: vec![NIL; n],
            next: vec![NIL; n],
        };
        let mut call_entry = vec![NIL; ops.len()];
        for (k, (_, is_return, i)) in order.into_iter().enumerate() {
            let e = k + 1;
            ev.op[e] = i;
            ev.is_call[e] = !is_return;
            ev.prev[e] = e - 1;
            ev.next[e - 1] = e;
            if is_return {
                let c = call_entry[i];
                ev.matched[c] = e;
                ev.matched[e] = c;
            } else {
                call_entry[i] = e;
            }
        }
        ev
    }

    fn unlink(&mut self, e: usize) {
        let (p, n) = (self.prev[e], self.next[e]);
        self.next[p] = n;
        if n != NIL {
            self.prev[n] = p;
        }
    }

    fn relink(&mut self, e: usize) {
        let (p, n) = (self.prev[e], self.next[e]);
        self.next[p] = e;
        if n != NIL {
            self.prev[n] = e;
        }
    }

    /// Takes a call and its return out of the list.
    fn lift(&mut self, call: usize) {
        self.unlink(call);
        self.unlink(self.matched[call]);
    }

    /// Puts back what the last `lift` took out (undone in the reverse order).
    fn unlift(&mut self, call: usize) {
        self.relink(self.matched[call]);
        self.relink(call);
    }
}

/// A set of operation indices, hashable as a cache key.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Placed(Box<[u64]>);

impl Placed {
    fn new(n: usize) -> Placed {
        Placed(vec![0; n.div_ceil(64)].into_boxed_slice())
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// Checks one object's history against `model` (its initial state), searching at most
/// `budget` steps.
///
/// Two refinements of the plain search keep operations in doubt (no return) from making it
/// exponential, and neither loses a linearization: at each point the operations whose
/// outcome is known are tried before those in doubt (an operation in doubt is placed only
/// when nothing else fits, which is when something observed it); one in doubt that would not
/// change the state is not placed (it may as well go last); and once every operation with a
/// known outcome is placed the rest can go last, so the search stops there.
pub fn check<M: Model>(model: &M, ops: &[Op<M::Input, M::Output>], budget: u64) -> Verdict {
    let mut ev = Events::new(ops);
    let doubt: Vec<bool> = ops.iter().map(|op| op.ret.is_none()).collect();
    let mut known_left = doubt.iter().filter(|d| !**d).count();
    let mut placed = Placed::new(ops.len());
    let mut seen: HashSet<(Placed, M)> = HashSet::new();
    // Each placement: its call entry, the state before it, and which pass chose it.
    let mut stack: Vec<(usize, M, bool)> = Vec::new();
    let mut state = model.clone();
    let mut deepest: Option<Deepest> = None;
    // The pass over the candidates: those with a known outcome first, then those in doubt.
    let mut in_doubt = false;
    let mut entry = ev.next[HEAD];
    let mut steps = 0u64;
    while known_left > 0 {
        steps += 1;
        if steps > budget {
            return Verdict::Unknown { steps: budget };
        }
        let i = ev.op[entry];
        if ev.is_call[entry] {
            if doubt[i] == in_doubt {
                if let Some(after) = state.step(&ops[i].input, ops[i].output.as_ref()) {
                    if !(in_doubt && after == state) {
                        placed.set(i);
                        if seen.insert((placed.clone(), after.clone())) {
                            stack.push((entry, std::mem::replace(&mut state, after), in_doubt));
                            ev.lift(entry);
                            known_left -= usize::from(!doubt[i]);
                            in_doubt = false;
                            entry = ev.next[HEAD];
                            continue;
                        }
                        placed.clear(i);
                    }
                }
            }
            entry = ev.next[entry];
        } else if !in_doubt {
            in_doubt = true;
            entry = ev.next[HEAD];
        } else {
            let deeper = match &deepest {
                Some(d) => stack.len() > d.placed,
                None => true,
            };
            if deeper {
                deepest = Some(Deepest {
                    placed: stack.len(),
                    report: stuck_report(&ev, ops, &state, &stack, entry),
                });
            }
            let Some((call, before, pass)) = stack.pop() else {
                let report = deepest.map(|d| d.report).unwrap_or_default();
                return Verdict::NotLinearizable(report);
            };
            let i = ev.op[call];
            state = before;
            placed.clear(i);
            ev.unlift(call);
            known_left += usize::from(!doubt[i]);
            in_doubt = pass;
            entry = ev.next[call];
        }
    }
    Verdict::Linearizable
}

/// What the search saw when it got stuck at the return `blocked`: the last placements, the
/// state, and every operation that could have come next (the calls before `blocked`).
fn stuck_report<M: Model>(
    ev: &Events,
    ops: &[Op<M::Input, M::Output>],
    state: &M,
    stack: &[(usize, M, bool)],
    blocked: usize,
) -> String {
    let show = |i: usize| {
        let op = &ops[i];
        format!(
            "client {} {:?} -> {:?} [{:.3}s..{}]",
            op.client,
            op.input,
            op.output,
            op.call as f64 / 1e9,
            op.ret
                .map(|r| format!("{:.3}s", r as f64 / 1e9))
                .unwrap_or_else(|| "never".into())
        )
    };
    let mut lines = vec![format!("{} operations placed; the last ones:", stack.len())];
    for (call, _, _) in stack.iter().rev().take(5).rev() {
        lines.push(format!("  {}", show(ev.op[*call])));
    }
    lines.push(format!("state then: {state:?}"));
    lines.push(format!(
        "none of these fits next, and the first must have taken effect by its return: {}",
        show(ev.op[blocked])
    ));
    let mut e = ev.next[HEAD];
    while e != NIL && e != blocked {
        if ev.is_call[e] {
            lines.push(format!("  candidate {}", show(ev.op[e])));
        }
        e = ev.next[e];
    }
    lines.join("\n")
}

/// A history being recorded by concurrent clients: one clock and one list.
pub struct History<I, O> {
    t0: Instant,
    ops: Mutex<Vec<(u64, Op<I, O>)>>,
}

impl<I, O> Default for History<I, O> {
    fn default() -> Self {
        History {
            t0: Instant::now(),
            ops: Mutex::new(Vec::new()),
        }
    }
}

impl<I: Clone, O: Clone> History<I, O> {
    /// Nanoseconds since the history began.
    pub fn now(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    /// Records a finished (or abandoned) operation on object `object`.
    pub fn record(&self, object: u64, op: Op<I, O>) {
        self.ops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((object, op));
    }

    /// The operations on `object`, in the order they were recorded.
    pub fn of(&self, object: u64) -> Vec<Op<I, O>> {
        self.ops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(o, _)| *o == object)
            .map(|(_, op)| op.clone())
            .collect()
    }
}

/// One znode used as a register: its data (a number) and its data version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Znode {
    pub data: u64,
    pub version: i32,
}

/// What a client does to a [`Znode`].
#[derive(Debug, Clone)]
pub enum ZnodeOp {
    /// `sync`, then `getData`.
    Read,
    /// `setData` at any version (-1).
    Write(u64),
    /// `setData` at `version`.
    Cas { version: i32, data: u64 },
}

/// What a client saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZnodeOut {
    Read {
        data: u64,
        version: i32,
    },
    /// The new Stat's version.
    Written {
        version: i32,
    },
    /// `BADVERSION`: the compare failed and nothing changed.
    BadVersion,
}

impl Model for Znode {
    type Input = ZnodeOp;
    type Output = ZnodeOut;

    fn step(&self, input: &ZnodeOp, output: Option<&ZnodeOut>) -> Option<Znode> {
        let written = |data: u64| {
            let next = Znode {
                data,
                version: self.version + 1,
            };
            match output {
                None => Some(next),
                Some(ZnodeOut::Written { version }) if *version == next.version => Some(next),
                Some(_) => None,
            }
        };
        match input {
            ZnodeOp::Read => match output {
                None => Some(self.clone()),
                Some(ZnodeOut::Read { data, version })
                    if *data == self.data && *version == self.version =>
                {
                    Some(self.clone())
                }
                Some(_) => None,
            },
            ZnodeOp::Write(data) => written(*data),
            ZnodeOp::Cas { version, data } if *version == self.version => written(*data),
            ZnodeOp::Cas { .. } => match output {
                None | Some(ZnodeOut::BadVersion) => Some(self.clone()),
                Some(_) => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: u64 = 1_000_000;

    fn op(
        client: usize,
        call: u64,
        ret: Option<u64>,
        input: ZnodeOp,
        output: Option<ZnodeOut>,
    ) -> Op<ZnodeOp, ZnodeOut> {
        Op {
            client,
            call,
            ret,
            input,
            output,
        }
    }

    fn read(client: usize, call: u64, ret: u64, data: u64, version: i32) -> Op<ZnodeOp, ZnodeOut> {
        op(
            client,
            call,
            Some(ret),
            ZnodeOp::Read,
            Some(ZnodeOut::Read { data, version }),
        )
    }

    fn write(
        client: usize,
        call: u64,
        ret: Option<u64>,
        data: u64,
        version: i32,
    ) -> Op<ZnodeOp, ZnodeOut> {
        let out = ret.map(|_| ZnodeOut::Written { version });
        op(client, call, ret, ZnodeOp::Write(data), out)
    }

    fn init() -> Znode {
        Znode {
            data: 0,
            version: 0,
        }
    }

    fn verdict(ops: &[Op<ZnodeOp, ZnodeOut>]) -> Verdict {
        check(&init(), ops, BUDGET)
    }

    fn linearizable(ops: &[Op<ZnodeOp, ZnodeOut>]) -> bool {
        match verdict(ops) {
            Verdict::Linearizable => true,
            Verdict::NotLinearizable(_) => false,
            Verdict::Unknown { steps } => panic!("undecided after {steps} steps"),
        }
    }

    #[test]
    fn a_sequential_history_is_linearizable() {
        assert!(linearizable(&[
            write(0, 1, Some(2), 5, 1),
            read(1, 3, 4, 5, 1),
            write(1, 5, Some(6), 7, 2),
            read(0, 7, 8, 7, 2),
        ]));
        assert!(linearizable(&[]));
    }

    #[test]
    fn a_stale_read_after_a_finished_write_is_not() {
        let v = verdict(&[write(0, 1, Some(2), 5, 1), read(1, 3, 4, 0, 0)]);
        let Verdict::NotLinearizable(report) = v else {
            panic!("a stale read passed: {v:?}");
        };
        assert!(report.contains("Read"), "{report}");
    }

    #[test]
    fn a_read_concurrent_with_a_write_may_see_either() {
        for seen in [(0, 0), (5, 1)] {
            assert!(linearizable(&[
                write(0, 1, Some(10), 5, 1),
                read(1, 2, 9, seen.0, seen.1)
            ]));
        }
    }

    #[test]
    fn reads_cannot_go_back_once_a_read_saw_the_new_value() {
        // Both reads overlap the write, but the first finished before the second began.
        assert!(!linearizable(&[
            write(0, 1, Some(20), 5, 1),
            read(1, 2, 5, 5, 1),
            read(2, 6, 9, 0, 0),
        ]));
    }

    #[test]
    fn an_acknowledged_write_cannot_vanish() {
        // A later write's version says an earlier one was lost.
        assert!(!linearizable(&[
            write(0, 1, Some(2), 5, 1),
            write(1, 3, Some(4), 6, 1)
        ]));
        assert!(!linearizable(&[
            write(0, 1, Some(2), 5, 1),
            read(1, 3, 4, 5, 1),
            read(1, 5, 6, 0, 0)
        ]));
    }

    #[test]
    fn an_unacknowledged_write_may_take_effect_late_or_never() {
        // Never: nothing saw it.
        assert!(linearizable(&[
            write(0, 1, None, 5, 0),
            read(1, 10, 11, 0, 0)
        ]));
        // Late: seen long after its client gave up, after another write.
        assert!(linearizable(&[
            write(0, 1, None, 5, 0),
            write(1, 10, Some(11), 6, 1),
            read(1, 20, 21, 5, 2),
        ]));
        // But not before its call.
        assert!(!linearizable(&[
            read(1, 1, 2, 5, 1),
            write(0, 3, None, 5, 0)
        ]));
    }

    #[test]
    fn compare_and_set_follows_the_version() {
        let cas = |client, call, ret, version, data, out| {
            op(
                client,
                call,
                Some(ret),
                ZnodeOp::Cas { version, data },
                Some(out),
            )
        };
        assert!(linearizable(&[
            cas(0, 1, 2, 0, 5, ZnodeOut::Written { version: 1 }),
            cas(1, 3, 4, 0, 6, ZnodeOut::BadVersion),
            read(1, 5, 6, 5, 1),
        ]));
        // Two compares at the same version cannot both succeed.
        assert!(!linearizable(&[
            cas(0, 1, 5, 0, 5, ZnodeOut::Written { version: 1 }),
            cas(1, 2, 6, 0, 6, ZnodeOut::Written { version: 1 }),
        ]));
        // A compare cannot fail when nothing changed the version.
        assert!(!linearizable(&[cas(0, 1, 2, 0, 5, ZnodeOut::BadVersion)]));
    }

    #[test]
    fn a_long_concurrent_history_is_decided_quickly() {
        let ops = long_history(2_000, 97, None);
        match check(&init(), &ops, 5_000_000) {
            Verdict::Linearizable => {}
            v => panic!("{v:?}"),
        }
    }

    /// `steps` steps of four clients, overlapping writes and reads, each read seeing the
    /// latest write finished before it, with writes in doubt sprinkled in (every
    /// `doubt_every`-th step); the one at `observed` (if any) is seen by the next read and
    /// write.
    fn long_history(
        steps: u64,
        doubt_every: u64,
        observed: Option<u64>,
    ) -> Vec<Op<ZnodeOp, ZnodeOut>> {
        let mut ops = Vec::new();
        let (mut data, mut version) = (0u64, 0i32);
        for k in 0..steps {
            let t = k * 10;
            if k % 3 == 0 {
                ops.push(read((k % 4) as usize, t, t + 25, data, version));
            } else {
                data = k;
                version += 1;
                ops.push(write((k % 4) as usize, t, Some(t + 5), data, version));
            }
            if k % doubt_every == 0 {
                ops.push(write(9, t + 1, None, 1_000_000 + k, 0));
                if observed == Some(k) {
                    data = 1_000_000 + k;
                    version += 1;
                }
            }
        }
        ops
    }

    #[test]
    fn a_write_in_doubt_is_placed_where_a_later_operation_saw_it() {
        let ops = long_history(2_000, 97, Some(97 * 7));
        assert!(matches!(
            check(&init(), &ops, 5_000_000),
            Verdict::Linearizable
        ));
    }

    /// A history that is not linearizable must be searched through: with writes in doubt
    /// that grows fast, which is why the workload keeps each znode's history short (about
    /// 100 operations, a few in doubt), as here.
    #[test]
    fn a_stale_read_is_found_among_writes_in_doubt() {
        let mut ops = long_history(150, 30, None);
        // A read long after the first writes, seeing the initial state.
        ops.push(read(5, 1_000, 1_001, 0, 0));
        match check(&init(), &ops, 5_000_000) {
            Verdict::NotLinearizable(report) => {
                assert!(report.contains("client 5"), "{report}");
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn the_budget_is_reported_not_passed() {
        let ops = [write(0, 1, Some(2), 5, 1), read(1, 3, 4, 5, 1)];
        assert!(matches!(
            check(&init(), &ops, 1),
            Verdict::Unknown { steps: 1 }
        ));
    }

    #[test]
    fn a_history_records_objects_apart() {
        let h: History<ZnodeOp, ZnodeOut> = History::default();
        let t = h.now();
        h.record(1, write(0, t, Some(h.now()), 5, 1));
        h.record(2, read(0, t, h.now(), 0, 0));
        assert_eq!(h.of(1).len(), 1);
        assert_eq!(h.of(2).len(), 1);
        assert!(h.of(3).is_empty());
    }
}
