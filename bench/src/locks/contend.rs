//! One measurement: N contenders of one system, the same critical section, one fault plan.
//!
//! Every contender loops: acquire (bounded by the run's hard deadline), enter the resource
//! with its token, do the short work, leave the resource, release. The resource times the
//! handoffs and counts what went wrong ([`super::resource`]). A run stops by itself: at
//! the end of its window, or once its fault has played out, and in any case at a hard
//! deadline; contenders that are still waiting then give up.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::faults::{hold_after_inject, pause_bound, FaultPlan};
use super::resource::{Resource, Tally, Token};
use super::system::{Contender, LockSystem};

/// What to run.
#[derive(Clone)]
pub struct Plan {
    pub contenders: usize,
    /// The measured window (extended by a fault until it has played out).
    pub duration: Duration,
    /// The critical section's work, between entering and leaving.
    pub work: Duration,
    /// Whether the resource refuses writes with a token lower than the highest seen.
    pub check_tokens: bool,
    pub fault: FaultPlan,
}

/// What one run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Measured {
    pub system: String,
    pub token: String,
    pub contenders: usize,
    pub fault: String,
    pub check_tokens: bool,
    pub elapsed_s: f64,
    /// Entries inside the measured window.
    pub acquisitions: u64,
    pub acquisitions_per_s: f64,
    pub tally: Tally,
    pub errors: BTreeMap<String, u64>,
    pub notes: Vec<String>,
}

impl Measured {
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

struct Shared {
    resource: Resource,
    start: Instant,
    /// The soft end, pushed back by a fault.
    end: Mutex<Instant>,
    hard_end: Instant,
    work: Duration,
    fault: FaultPlan,
    lease: Duration,
    fault_at: Instant,
    fault_taken: AtomicBool,
    fault_done: AtomicBool,
    counted: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
    notes: Mutex<Vec<String>>,
}

impl Shared {
    fn end(&self) -> Instant {
        *self.end.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push_end(&self, to: Instant) {
        let mut end = self.end.lock().unwrap_or_else(|p| p.into_inner());
        *end = (*end).max(to).min(self.hard_end);
    }

    fn finished(&self) -> bool {
        let now = Instant::now();
        if now >= self.hard_end {
            return true;
        }
        let fault_pending =
            !matches!(self.fault, FaultPlan::None) && !self.fault_done.load(Ordering::SeqCst);
        now >= self.end() && !fault_pending
    }

    fn error(&self, what: &str, e: &anyhow::Error) {
        // Keep the kind; the tail is ports and ids.
        let text: String = format!("{what}: {e:#}").chars().take(100).collect();
        *self
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(text)
            .or_default() += 1;
    }

    fn note(&self, n: String) {
        tracing::info!("{n}");
        self.notes.lock().unwrap_or_else(|p| p.into_inner()).push(n);
    }
}

/// Runs `plan` against `system`.
pub async fn measure(system: &dyn LockSystem, plan: &Plan) -> anyhow::Result<Measured> {
    let pause = matches!(plan.fault, FaultPlan::Pause);
    let mut contenders = Vec::with_capacity(plan.contenders);
    for id in 0..plan.contenders {
        contenders.push(system.contender(id, pause && id == 0).await?);
    }
    let start = Instant::now();
    let lease = system.lease();
    let bound = pause_bound(lease) + plan.duration * 3 + Duration::from_secs(20);
    let fault_at = match plan.fault {
        FaultPlan::Pause => start + plan.duration / 4,
        _ => start + plan.duration / 3,
    };
    let shared = Arc::new(Shared {
        resource: Resource::new(plan.check_tokens),
        start,
        end: Mutex::new(start + plan.duration),
        hard_end: start + bound,
        work: plan.work,
        fault: plan.fault.clone(),
        lease,
        fault_at,
        fault_taken: AtomicBool::new(false),
        fault_done: AtomicBool::new(false),
        counted: AtomicU64::new(0),
        errors: Mutex::new(BTreeMap::new()),
        notes: Mutex::new(Vec::new()),
    });
    let mut tasks = Vec::new();
    for (id, c) in contenders.into_iter().enumerate() {
        tasks.push(tokio::spawn(contend(id, c, shared.clone())));
    }
    for t in tasks {
        if let Err(e) = t.await {
            shared.error("contender task", &anyhow::anyhow!("{e}"));
        }
    }
    let measured_until = shared.end().min(Instant::now());
    let elapsed = measured_until.duration_since(start);
    let acquisitions = shared.counted.load(Ordering::SeqCst);
    if !matches!(plan.fault, FaultPlan::None) && !shared.fault_done.load(Ordering::SeqCst) {
        shared.note("the fault was never injected (no holder reached it in time)".into());
    }
    let errors = shared
        .errors
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let notes = shared
        .notes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(Measured {
        system: system.name(),
        token: system.token_kind().to_string(),
        contenders: plan.contenders,
        fault: plan.fault.name(),
        check_tokens: plan.check_tokens,
        elapsed_s: elapsed.as_secs_f64(),
        acquisitions,
        acquisitions_per_s: acquisitions as f64 / elapsed.as_secs_f64().max(1e-9),
        tally: shared.resource.tally(),
        errors,
        notes,
    })
}

fn token_text(t: Token) -> String {
    match t {
        Token::Monotonic(t) => t.to_string(),
        Token::Opaque(t) => format!("{t:x} (random)"),
    }
}

/// Errors in a row after which a contender gives up (its system is gone).
const MAX_ERRORS_IN_A_ROW: u32 = 500;

async fn contend(id: usize, mut c: Box<dyn Contender>, s: Arc<Shared>) {
    let mut failures = 0u32;
    while !s.finished() {
        let token = match c.acquire(s.hard_end).await {
            Ok(Some(t)) => t,
            Ok(None) => break,
            Err(e) => {
                s.error("acquire", &e);
                failures += 1;
                if failures > MAX_ERRORS_IN_A_ROW {
                    s.note(format!(
                        "contender {id} gave up after {failures} errors in a row"
                    ));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        failures = 0;
        let entry = s.resource.enter(id, token);
        let entered = Instant::now();
        if Instant::now() < s.end() {
            s.counted.fetch_add(1, Ordering::SeqCst);
        }
        if s.work.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(s.work).await;
        }
        let mut stop_after = false;
        let due = Instant::now() >= s.fault_at && !s.fault_taken.load(Ordering::SeqCst);
        match &s.fault {
            FaultPlan::Pause if id == 0 && due => {
                s.fault_taken.store(true, Ordering::SeqCst);
                c.pause();
                let paused = Instant::now();
                // Wakes the moment another holder is in (or at the bound), so that every
                // system is judged on the same single overlap, however fast it hands off.
                s.resource
                    .someone_entered_after(entry, pause_bound(s.lease))
                    .await;
                let others = s.resource.entries_after(entry);
                let (_, newest) = s.resource.tokens();
                let accepted = s.resource.write(entry);
                s.note(format!(
                    "contender 0 paused (in-process: no heartbeat or renewal) for {:.2} s \
                     (lease {:.1} s); {others} entr{} by others meanwhile; its write on \
                     waking (token {}, newest holder's {}) was {}",
                    paused.elapsed().as_secs_f64(),
                    s.lease.as_secs_f64(),
                    if others == 1 { "y" } else { "ies" },
                    token_text(entry.token),
                    newest.map_or("none".into(), |t| t.to_string()),
                    if accepted { "accepted" } else { "refused" },
                ));
                s.fault_done.store(true, Ordering::SeqCst);
                stop_after = true;
            }
            FaultPlan::Inject(injector)
                if due
                    && s.fault_taken
                        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok() =>
            {
                let at = Instant::now();
                match injector.inject().await {
                    Ok(what) => s.note(format!(
                        "{:.2} s into the run, contender {id} holding (for {:.1} ms): {what}",
                        at.duration_since(s.start).as_secs_f64(),
                        at.duration_since(entered).as_secs_f64() * 1e3,
                    )),
                    Err(e) => s.error("inject", &e),
                }
                // Holds on (well within its TTL or session) until someone else gets in.
                let hold = hold_after_inject(s.lease);
                let held = Instant::now();
                s.resource.someone_entered_after(entry, hold).await;
                let others = s.resource.entries_after(entry);
                let accepted = s.resource.write(entry);
                s.note(format!(
                    "the holder during the fault held on {:.2} s more (at most {:.1} s): \
                     {others} entr{} by others meanwhile; its last write was {}",
                    held.elapsed().as_secs_f64(),
                    hold.as_secs_f64(),
                    if others == 1 { "y" } else { "ies" },
                    if accepted { "accepted" } else { "refused" },
                ));
                // A full window after the fault, to see the system recover.
                s.push_end(Instant::now() + s.end().duration_since(s.start));
                s.fault_done.store(true, Ordering::SeqCst);
            }
            _ => {}
        }
        s.resource.leave(entry);
        if let Err(e) = c.release().await {
            if stop_after {
                s.note(format!("the paused holder's release failed: {e:#}"));
            } else {
                s.error("release", &e);
            }
        }
        if stop_after {
            break;
        }
    }
    c.close().await;
}
