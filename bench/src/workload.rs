//! What a workload does: its name, the operations it issues and in which proportions.
//!
//! Kept apart from the I/O so that the choice of the next operation (the op mix) is a pure
//! function of a random draw and can be unit-tested for its proportions.

use std::fmt;
use std::str::FromStr;

/// A named workload. Each run of a workload is one row of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Persistent creates of fresh znodes carrying `data_size` bytes.
    Create,
    /// setData (version -1) on pre-created znodes.
    Set,
    /// getData on pre-created znodes.
    Get,
    /// exists on pre-created znodes.
    Exists,
    /// `read_pct`% getData, the rest setData, on pre-created znodes.
    Mixed,
    /// The lock recipe's write pattern, one cycle per op: create an ephemeral-sequential
    /// child under a shared parent (Curator's protected name), getChildren of the parent,
    /// delete the child.
    Lock,
    /// Session churn, one cycle per op: TCP connect, handshake (createSession), closeSession.
    Connect,
}

impl Workload {
    /// Every workload, in the order `all` runs them. `create` comes last because it is the
    /// one that leaves a big tree behind (hundreds of thousands of znodes), which would
    /// make every later workload's snapshots heavier.
    pub const ALL: [Workload; 7] = [
        Workload::Set,
        Workload::Get,
        Workload::Exists,
        Workload::Mixed,
        Workload::Lock,
        Workload::Connect,
        Workload::Create,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Create => "create",
            Workload::Set => "set",
            Workload::Get => "get",
            Workload::Exists => "exists",
            Workload::Mixed => "mixed",
            Workload::Lock => "lock",
            Workload::Connect => "connect",
        }
    }

    /// Whether the workload reads and writes a fixed set of pre-created keys.
    pub fn needs_keys(self) -> bool {
        matches!(
            self,
            Workload::Set | Workload::Get | Workload::Exists | Workload::Mixed
        )
    }

    /// The op mix for this workload (`read_pct` only matters for `mixed`).
    pub fn mix(self, read_pct: u32) -> Mix {
        match self {
            Workload::Create => Mix::single(Op::Create),
            Workload::Set => Mix::single(Op::SetData),
            Workload::Get => Mix::single(Op::GetData),
            Workload::Exists => Mix::single(Op::Exists),
            Workload::Mixed => {
                let read = read_pct.min(100);
                Mix::new(&[(Op::GetData, read), (Op::SetData, 100 - read)])
            }
            Workload::Lock => Mix::single(Op::LockCycle),
            Workload::Connect => Mix::single(Op::ConnectCycle),
        }
    }

    /// What one counted "op" of this workload is, for the report.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Lock => "cycles (create+getChildren+delete)",
            Workload::Connect => "sessions (connect+close)",
            _ => "requests",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Workload::ALL
            .into_iter()
            .find(|w| w.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
                format!("unknown workload {s:?} (known: {}, all)", names.join(", "))
            })
    }
}

/// Parses a comma-separated workload list; `all` stands for every workload, `none` for an
/// empty list.
pub fn parse_workloads(s: &str) -> Result<Vec<Workload>, String> {
    let mut out = Vec::new();
    let mut none = false;
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if part.eq_ignore_ascii_case("none") {
            none = true;
        } else if part.eq_ignore_ascii_case("all") {
            for w in Workload::ALL {
                if !out.contains(&w) {
                    out.push(w);
                }
            }
        } else {
            let w: Workload = part.parse()?;
            if !out.contains(&w) {
                out.push(w);
            }
        }
    }
    if out.is_empty() && !none {
        return Err("no workload given".into());
    }
    Ok(out)
}

/// One unit of work a connection starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Create,
    SetData,
    GetData,
    Exists,
    LockCycle,
    ConnectCycle,
}

/// A weighted choice of operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    /// Cumulative weights: an op is chosen when the draw is below its bound.
    bounds: Vec<(u32, Op)>,
    total: u32,
}

impl Mix {
    /// A mix of ops with integer weights; zero-weight ops are never chosen.
    /// At least one weight must be positive.
    pub fn new(weights: &[(Op, u32)]) -> Mix {
        let mut total = 0u32;
        let mut bounds = Vec::new();
        for &(op, w) in weights {
            if w > 0 {
                total += w;
                bounds.push((total, op));
            }
        }
        assert!(total > 0, "an op mix needs a positive weight");
        Mix { bounds, total }
    }

    pub fn single(op: Op) -> Mix {
        Mix::new(&[(op, 1)])
    }

    /// The range a draw must come from: `0..total()`.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// The op for a draw in `0..total()` (larger draws are reduced modulo the total).
    pub fn pick_with(&self, draw: u32) -> Op {
        let d = draw % self.total;
        for &(bound, op) in &self.bounds {
            if d < bound {
                return op;
            }
        }
        // Unreachable: the last bound equals `total` and `d < total`.
        self.bounds[self.bounds.len() - 1].1
    }

    /// Draws the next op.
    pub fn pick(&self, rng: &mut fastrand::Rng) -> Op {
        if self.bounds.len() == 1 {
            return self.bounds[0].1;
        }
        self.pick_with(rng.u32(0..self.total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_is_eighty_twenty_by_default() {
        let mix = Workload::Mixed.mix(80);
        let mut rng = fastrand::Rng::with_seed(42);
        let n = 100_000;
        let reads = (0..n).filter(|_| mix.pick(&mut rng) == Op::GetData).count();
        // Binomial(100000, 0.8): standard deviation ~126, so +-1000 is ~8 sigma, and the
        // seed is fixed anyway.
        assert!((79_000..=81_000).contains(&reads), "reads = {reads}");
    }

    #[test]
    fn pick_with_covers_the_weights_exactly() {
        let mix = Mix::new(&[(Op::GetData, 3), (Op::SetData, 0), (Op::Exists, 1)]);
        assert_eq!(mix.total(), 4);
        let picks: Vec<Op> = (0..4).map(|d| mix.pick_with(d)).collect();
        assert_eq!(
            picks,
            vec![Op::GetData, Op::GetData, Op::GetData, Op::Exists]
        );
        assert_eq!(mix.pick_with(4), Op::GetData, "draws wrap around");
    }

    #[test]
    fn degenerate_mixes_pick_one_op() {
        let mut rng = fastrand::Rng::with_seed(7);
        let all_reads = Workload::Mixed.mix(100);
        let all_writes = Workload::Mixed.mix(0);
        let over = Workload::Mixed.mix(250);
        for _ in 0..1000 {
            assert_eq!(all_reads.pick(&mut rng), Op::GetData);
            assert_eq!(all_writes.pick(&mut rng), Op::SetData);
            assert_eq!(over.pick(&mut rng), Op::GetData);
        }
        assert_eq!(Workload::Lock.mix(80).pick(&mut rng), Op::LockCycle);
    }

    #[test]
    fn workload_lists_parse() {
        assert_eq!(
            parse_workloads("get, set").unwrap(),
            vec![Workload::Get, Workload::Set]
        );
        assert_eq!(parse_workloads("all").unwrap(), Workload::ALL.to_vec());
        assert_eq!(
            parse_workloads("lock,all").unwrap()[0],
            Workload::Lock,
            "order of first mention is kept"
        );
        assert_eq!(parse_workloads("all").unwrap().len(), 7);
        assert!(parse_workloads("gett")
            .unwrap_err()
            .contains("unknown workload"));
        assert!(parse_workloads(" , ").is_err());
        assert!(parse_workloads("none").unwrap().is_empty());
    }
}
