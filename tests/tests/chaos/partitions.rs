//! Partition shapes between members beyond an isolated member (Jepsen's nemeses): one-way
//! cuts, a bridge and random halves, each cut through the per-link proxies of a
//! partitionable ensemble, held for the given time, then healed.

use std::time::Duration;

use crate::world::World;

impl World {
    /// See [`crate::world::Fault::OneWayCuts`].
    pub(crate) fn one_way_cuts(&mut self, links: usize, time: Duration) {
        let n = self.ensemble.len();
        let mut all: Vec<(usize, usize)> = (0..n)
            .flat_map(|a| (0..n).filter(move |b| *b != a).map(move |b| (a, b)))
            .collect();
        self.rng.shuffle(&mut all);
        all.truncate(links.min(all.len()));
        let shown: Vec<String> = all
            .iter()
            .map(|(a, b)| format!("{}->{}", a + 1, b + 1))
            .collect();
        self.event(&format!("cut one way {} for {time:?}", shown.join(" ")));
        self.hold_cuts(&all, time);
    }

    /// See [`crate::world::Fault::Bridge`].
    pub(crate) fn bridge(&mut self, time: Duration) {
        let mut members: Vec<usize> = (0..self.ensemble.len()).collect();
        self.rng.shuffle(&mut members);
        let bridge = members[0];
        let rest = &members[1..];
        let (left, right) = rest.split_at(rest.len() / 2);
        self.event(&format!(
            "bridge: {} cut from {} both ways, member {} reaching both, for {time:?}",
            names(left),
            names(right),
            bridge + 1
        ));
        let cuts = between(left, right);
        self.hold_cuts(&cuts, time);
    }

    /// See [`crate::world::Fault::RandomHalves`].
    pub(crate) fn random_halves(&mut self, time: Duration) {
        let mut members: Vec<usize> = (0..self.ensemble.len()).collect();
        self.rng.shuffle(&mut members);
        let (minority, majority) = members.split_at((members.len() - 1) / 2);
        self.event(&format!(
            "halves: {} cut from {} both ways for {time:?}",
            names(minority),
            names(majority)
        ));
        let cuts = between(minority, majority);
        self.hold_cuts(&cuts, time);
    }

    /// Cuts these directed links, waits, and heals them.
    fn hold_cuts(&mut self, cuts: &[(usize, usize)], time: Duration) {
        for &(a, b) in cuts {
            self.ensemble.cut_link(a, b, true);
        }
        std::thread::sleep(time);
        for &(a, b) in cuts {
            self.ensemble.cut_link(a, b, false);
        }
    }
}

/// Every directed link between two groups, both ways.
fn between(left: &[usize], right: &[usize]) -> Vec<(usize, usize)> {
    left.iter()
        .flat_map(|&a| right.iter().flat_map(move |&b| [(a, b), (b, a)]))
        .collect()
}

fn names(members: &[usize]) -> String {
    let ids: Vec<String> = members.iter().map(|m| (m + 1).to_string()).collect();
    format!("members {{{}}}", ids.join(","))
}
