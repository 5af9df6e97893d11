//! The invariants checked at the end of a scenario: identical trees on every member, the
//! lock's safety (from the contenders' log, the fenced resource and the counter), and the
//! ephemerals' fate (expired sessions leave nothing, live sessions lose nothing).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::clients::{connect, dump_tree, persistent, NodeView};
use crate::contender::{CsEntry, FenceServer};
use crate::util::{bounded, lock};
use crate::world::{World, COUNTER, LOCK_PATH};
use crate::{CONTENDER_SESSION, STEADY_SESSION, TOOL_SESSION, WAIT};

impl World {
    /// Every member holds the same tree (digest and node by node); every acknowledged
    /// create is there; a final write succeeds. Returns member 1's tree.
    pub(crate) fn check_convergence(&mut self) -> BTreeMap<String, NodeView> {
        let (zxid, digest) = self.ensemble.converged();
        self.event(&format!("converged: last zxid {zxid}, digest {digest}"));
        let trees: Vec<Result<BTreeMap<String, NodeView>, String>> = (0..self.ensemble.len())
            .map(|i| self.rt.block_on(dump_tree(&self.ensemble, i, "/chaos")))
            .collect();
        let mut first: Option<BTreeMap<String, NodeView>> = None;
        for (i, t) in trees.into_iter().enumerate() {
            match t {
                Err(e) => self.violation(e),
                Ok(t) => match &first {
                    None => first = Some(t),
                    Some(f) if *f != t => {
                        let diff: Vec<String> = f
                            .keys()
                            .chain(t.keys())
                            .collect::<BTreeSet<_>>()
                            .into_iter()
                            .filter(|k| f.get(*k) != t.get(*k))
                            .take(5)
                            .map(|k| format!("{k}: {:?} vs {:?}", f.get(k), t.get(k)))
                            .collect();
                        self.violation(format!(
                            "member {} holds a different tree than member 1: {diff:?}",
                            i + 1
                        ));
                    }
                    Some(_) => {}
                },
            }
        }
        let tree = first.unwrap_or_default();
        let acked = lock(&self.acked).clone();
        let missing: Vec<&(String, i64)> = acked
            .iter()
            .filter(|(p, czxid)| tree.get(p).map(|v| v.czxid) != Some(*czxid))
            .collect();
        if !missing.is_empty() {
            self.violation(format!(
                "{} acknowledged creates missing (or with another czxid), e.g. {:?}",
                missing.len(),
                &missing[..missing.len().min(5)]
            ));
        }
        // Zxids are never reused: the writer's creates were acknowledged one after the
        // other, so their zxids rise strictly (a member that lost a committed write and
        // took the zxid again would break this, or the czxid check above).
        if let Some(w) = acked.windows(2).find(|w| w[1].1 <= w[0].1) {
            self.violation(format!(
                "acknowledged creates out of zxid order (a zxid reused?): {} at {:#x}, then {} at {:#x}",
                w[0].0, w[0].1, w[1].0, w[1].1
            ));
        }
        let hosts = self.ensemble.connect_string();
        let final_write = self.rt.block_on(async {
            let c = connect(&hosts, TOOL_SESSION).await.ok_or("no session")?;
            bounded(WAIT, c.create("/chaos/final", b"", &persistent()))
                .await
                .ok_or("no answer")?
                .map_err(|e| e.to_string())
                .map(|_| ())
        });
        if let Err(e) = final_write {
            self.violation(format!("the final write failed: {e}"));
        }
        self.event(&format!(
            "trees identical on {} members ({} nodes under /chaos); {} acknowledged creates present",
            self.ensemble.len(),
            tree.len(),
            acked.len()
        ));
        tree
    }

    /// The lock invariants, from the contenders' log, the resource's record and the counter.
    pub(crate) fn check_locks(&mut self, tree: &BTreeMap<String, NodeView>) {
        let sections = self.sections();
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let by_cs: HashMap<&str, &CsEntry> = sections.iter().map(|e| (e.cs.as_str(), e)).collect();
        let mut v: Vec<String> = Vec::new();

        // One acquisition, one node, one token.
        let mut token_of_node: HashMap<&str, u64> = HashMap::new();
        let mut cs_of_token: HashMap<u64, &str> = HashMap::new();
        for e in &sections {
            if let Some(t) = token_of_node.insert(&e.node, e.token) {
                v.push(format!(
                    "lock node {} granted twice (tokens {t:#x}, {:#x})",
                    e.node, e.token
                ));
            }
            if let Some(other) = cs_of_token.insert(e.token, &e.cs) {
                v.push(format!(
                    "token {:#x} given to two critical sections: {other} and {}",
                    e.token, e.cs
                ));
            }
        }

        // The counter: each applied increment is read by the next one, so the chain of
        // writers is known exactly; its length is the final value and the data version.
        let Some(counter) = tree.get(COUNTER) else {
            self.violation("the counter is missing".into());
            return;
        };
        let text = String::from_utf8_lossy(&counter.data).to_string();
        let mut parts = text.split_whitespace();
        let final_n: u64 = parts
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(u64::MAX);
        let last = parts.next().unwrap_or("").to_string();
        let mut applied: BTreeSet<String> = sections
            .iter()
            .filter_map(|e| e.read.as_ref())
            .filter(|(n, _, _)| *n >= 1)
            .map(|(_, prev, _)| prev.clone())
            .collect();
        if final_n >= 1 {
            applied.insert(last.clone());
        }
        if final_n != counter.version as u64 {
            v.push(format!(
                "counter value {final_n} but data version {}: an increment was lost or doubled",
                counter.version
            ));
        }
        if applied.len() as u64 != final_n {
            v.push(format!(
                "counter value {final_n} but {} distinct increments in its chain",
                applied.len()
            ));
        }
        for a in &applied {
            if !by_cs.contains_key(a.as_str()) {
                v.push(format!(
                    "increment by {a} applied, but no such critical section was logged"
                ));
            }
        }
        for e in &sections {
            match e.commit.as_str() {
                "ok" if !applied.contains(&e.cs) => v.push(format!(
                    "acknowledged increment of {} is not in the counter",
                    e.cs
                )),
                "lost" | "badversion" if applied.contains(&e.cs) => {
                    v.push(format!("refused increment of {} was applied", e.cs))
                }
                "badversion" => v.push(format!(
                    "{}: the counter changed under a held lock (fenced write got BadVersion) {e:?}",
                    e.cs
                )),
                _ => {}
            }
        }

        // Committed critical sections (their fenced write applied, so the lock node existed
        // when it was applied) never overlap in time, come in token order, and their fenced
        // writes come in token order.
        let mut committed: Vec<&CsEntry> = sections
            .iter()
            .filter(|e| e.commit == "ok" || (e.commit == "unknown" && applied.contains(&e.cs)))
            .collect();
        committed.sort_by_key(|e| e.token);
        for w in committed.windows(2) {
            let (a, b) = (w[0], w[1]);
            if a.end >= b.start {
                v.push(format!(
                    "critical sections overlap or run out of token order: {} (token {:#x}, {}..{}) and {} (token {:#x}, {}..{})",
                    a.cs, a.token, a.start, a.end, b.cs, b.token, b.start, b.end
                ));
            }
            if a.mzxid != 0 && b.mzxid != 0 && a.mzxid >= b.mzxid {
                v.push(format!(
                    "fenced writes out of token order: {} at zxid {:#x}, {} at zxid {:#x}",
                    a.cs, a.mzxid, b.cs, b.mzxid
                ));
            }
        }
        // A committed section was never refused by the fence: had the fence seen a later
        // token, that holder's grant would have deleted our node before our increment.
        for e in &committed {
            if e.rejected_by_fence() {
                v.push(format!(
                    "{}: the fence refused a write of a committed critical section {e:?}",
                    e.cs
                ));
            }
        }
        // Every refused holder learnt that it had lost the lock.
        let refused: Vec<&CsEntry> = sections
            .iter()
            .filter(|e| e.commit == "lost" || e.rejected_by_fence())
            .collect();
        for e in &refused {
            if e.lost == "never" || e.lost == "none" {
                v.push(format!(
                    "{}: writes refused but lost() did not fire: {e:?}",
                    e.cs
                ));
            }
        }

        // The resource: accepted tokens never go down; each accepted write carries the token
        // of the critical section it names.
        let records = self
            .fence
            .as_ref()
            .map(FenceServer::records)
            .unwrap_or_default();
        let mut highest = 0u64;
        for r in &records {
            if r.accepted {
                if r.token < highest {
                    v.push(format!(
                        "the fence accepted token {:#x} after {highest:#x}",
                        r.token
                    ));
                }
                highest = highest.max(r.token);
            }
            match by_cs.get(r.cs.as_str()) {
                Some(e) if e.token != r.token => v.push(format!(
                    "{} wrote with token {:#x} but holds {:#x}",
                    r.cs, r.token, e.token
                )),
                None => v.push(format!(
                    "fence write from unlogged critical section {}",
                    r.cs
                )),
                _ => {}
            }
        }

        // The paused holders: woken after their session expired and a successor wrote, both
        // of their remaining writes are refused, and they are told.
        for p in &self.pauses {
            match by_cs.get(p.cs.as_str()) {
                None => v.push(format!("paused critical section {} was never logged", p.cs)),
                Some(e) => {
                    if e.pid != p.pid
                        || e.ext2 != "REJ"
                        || committed.iter().any(|c| c.cs == e.cs)
                        || e.lost == "never"
                    {
                        v.push(format!(
                            "paused holder {} (contender {}): its late writes were not all refused: {e:?}",
                            p.cs, p.contender
                        ));
                    }
                }
            }
        }

        // Contenders cut off past their timeout saw their session expire.
        let exits: HashMap<usize, (u32, u64, u64)> = log
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 5 && f[0] == "EXIT").then(|| {
                    Some((
                        f[1].parse().ok()?,
                        (f[2].parse().ok()?, f[3].parse().ok()?, f[4].parse().ok()?),
                    ))
                })?
            })
            .collect();
        let mut sessions_expired = 0;
        for c in &self.contenders {
            match exits.get(&c.id) {
                None => v.push(format!("contender {} did not log its exit", c.id)),
                Some((_, epoch, _)) => {
                    sessions_expired += epoch;
                    let cuts = self.long_cuts.get(&c.id).copied().unwrap_or(0);
                    if *epoch < cuts {
                        v.push(format!(
                            "contender {} was cut off past its session {cuts} time(s) but saw {epoch} expiries",
                            c.id
                        ));
                    }
                }
            }
        }

        // No lock node is left behind once every contender is gone.
        let hosts = self.ensemble.connect_string();
        let leftover = self.rt.block_on(async {
            let c = connect(&hosts, TOOL_SESSION).await?;
            let deadline = Instant::now() + CONTENDER_SESSION * 3;
            loop {
                let kids = bounded(WAIT, c.list_children(LOCK_PATH)).await?.ok()?;
                if kids.is_empty() || Instant::now() > deadline {
                    return Some(kids);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        match leftover {
            Some(k) if k.is_empty() => {}
            other => v.push(format!("lock nodes left behind: {other:?}")),
        }

        let zk_refused = sections.iter().filter(|e| e.commit == "lost").count();
        let fence_refused = records.iter().filter(|r| !r.accepted).count();
        self.event(&format!(
            "locks: {} critical sections, {} committed ({} acknowledged), counter {final_n}; \
             refused: {zk_refused} fenced increments, {fence_refused} resource writes; \
             lost() fired for {} refused holders; {} holders paused; contender sessions expired: {sessions_expired}",
            sections.len(),
            committed.len(),
            sections.iter().filter(|e| e.commit == "ok").count(),
            refused.len(),
            self.pauses.len(),
        ));
        if sections.len() < 10 {
            v.push(format!("only {} critical sections ran", sections.len()));
        }
        for x in v {
            self.violation(x);
        }
    }

    /// The ephemeral invariants: an expired session's ephemeral is gone everywhere; a live
    /// session's ephemeral is everywhere; no steady session expired.
    pub(crate) fn check_ephemerals(&mut self, tree: &BTreeMap<String, NodeView>) {
        let mut v: Vec<String> = Vec::new();
        let mut live: HashMap<i64, String> = HashMap::new();
        for o in self.steady.iter().chain(&self.fragile) {
            let state = lock(&o.state);
            v.extend(state.violations.iter().cloned());
            for (idx, r) in state.sessions.iter().enumerate() {
                let current = idx + 1 == state.sessions.len();
                if r.expired {
                    self.counts.expiries_seen += 1;
                    if tree.contains_key(&r.node) {
                        v.push(format!(
                            "{}: {} of expired session {:#x} survives",
                            o.name, r.node, r.id
                        ));
                    }
                    if o.timeout == STEADY_SESSION {
                        let at = r
                            .expired_at
                            .map(|t| t.saturating_duration_since(self.t0).as_secs_f64());
                        let last_write = r.last_ok.saturating_duration_since(self.t0).as_secs_f64();
                        v.push(format!(
                            "{}: steady session {:#x} (timeout {:?}) expired (seen at {at:.2?}s, its last write at {last_write:.2}s); no fault lasted that long for it",
                            o.name, r.id, o.timeout
                        ));
                    }
                } else if current {
                    live.insert(r.id, r.node.clone());
                    match tree.get(&r.node) {
                        Some(n) if n.ephemeral_owner == r.id => {}
                        other => v.push(format!(
                            "{}: live session {:#x} lost its ephemeral {}: {other:?}",
                            o.name, r.id, r.node
                        )),
                    }
                }
            }
        }
        for (name, id, node) in &self.doomed {
            if tree.contains_key(node) {
                v.push(format!(
                    "{name}: {node} of session {id:#x}, cut off past its timeout, survives"
                ));
            }
        }
        for (path, n) in tree.iter().filter(|(p, _)| p.starts_with("/chaos/eph/")) {
            if n.ephemeral_owner == 0 {
                v.push(format!("{path} is not ephemeral"));
            } else if !live.contains_key(&n.ephemeral_owner) {
                v.push(format!(
                    "{path} belongs to session {:#x}, which no client holds any more",
                    n.ephemeral_owner
                ));
            }
        }
        let writes: u64 = self
            .steady
            .iter()
            .chain(&self.fragile)
            .map(|o| lock(&o.state).writes)
            .sum();
        self.event(&format!(
            "ephemerals: {} live sessions hold their nodes; {} expiries seen by clients ({} caused on purpose); \
             {} short cuts survived; {} sessions resumed across a failover; {writes} owner writes",
            live.len(),
            self.counts.expiries_seen,
            self.doomed.len(),
            self.counts.survived_short_cuts,
            self.counts.rearm_survived
        ));
        for x in v {
            self.violation(x);
        }
    }
}
