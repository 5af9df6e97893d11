//! The (parent, name) → id index, split into shards so that growing it never stalls the
//! Raft loop for long.
//!
//! A hash table grows by doubling: one insert moves every entry into a table twice the size.
//! Our index stores bare ids and hashes an entry by reading its slot's parent and name from
//! the arena, so a move costs two cache misses per entry: growing a single table at
//! 8.4 million znodes stopped the Raft loop for 3.3 s (every write and ping waited). Split
//! into [`SHARDS`] tables picked by hash bits that neither the bucket position nor
//! hashbrown's control byte uses, each shard grows alone and a doubling moves 1/[`SHARDS`] of
//! the entries: filling a server to 9.5 million znodes, the slowest create took 208 ms and
//! the Raft loop never reported a stall. The shards hold as many buckets in all as one table
//! would, so memory is the same.

use hashbrown::hash_table::{Entry, OccupiedEntry};
use hashbrown::HashTable;

/// A node id (the arena's `NodeId`; not imported, so that the arena can use this module).
type NodeId = u32;

/// Number of shards (a power of two).
pub const SHARDS: usize = 1024;

/// The hash bits that pick a shard: above the bucket bits a shard of up to 2^32 buckets
/// uses, below the 7 top bits hashbrown keeps in its control bytes.
const SHARD_SHIFT: u32 = 32;

/// Room for a share of `n` entries split `ways` ways at random: the share and a margin of
/// a few standard deviations of that binomial draw.
fn share_with_margin(n: usize, ways: usize) -> usize {
    let share = n / ways;
    share + 4 * (share as f64).sqrt() as usize + 8
}

/// Shards per group of [`Pending`] entries (a power of two).
const GROUP: usize = 16;

/// Index entries set aside while a big tree is loaded, grouped by the shards they go to.
///
/// Adding entries to the index one by one as nodes arrive costs a cache miss or two each
/// (the index is far larger than the caches, and each entry lands somewhere random in it):
/// at 10 million znodes most of a snapshot load. Set aside in groups of [`GROUP`] shards
/// and added a group at a time ([`Index::absorb`]), the entries land in a few hundred KiB of
/// tables that stay in cache. Each group's entries are two vectors, big enough that the
/// allocator maps them and gives them back when the group is done: loading holds about 12
/// bytes per node more until then.
#[derive(Debug)]
pub struct Pending {
    groups: Vec<(Vec<u64>, Vec<NodeId>)>,
}

impl Pending {
    /// Room for about `n` entries.
    pub fn with_capacity(n: usize) -> Pending {
        let each = share_with_margin(n, SHARDS / GROUP);
        Pending {
            groups: (0..SHARDS / GROUP)
                .map(|_| (Vec::with_capacity(each), Vec::with_capacity(each)))
                .collect(),
        }
    }

    pub fn push(&mut self, hash: u64, id: NodeId) {
        let (hashes, ids) = &mut self.groups[shard_of(hash) / GROUP];
        hashes.push(hash);
        ids.push(id);
    }
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Index {
    shards: Box<[HashTable<NodeId>]>,
}

fn shard_of(hash: u64) -> usize {
    (hash >> SHARD_SHIFT) as usize & (SHARDS - 1)
}

impl Index {
    pub fn new() -> Index {
        Index {
            shards: (0..SHARDS).map(|_| HashTable::new()).collect(),
        }
    }

    /// Room for about `n` more entries spread over the shards without growing any (a shard
    /// that gets more than its share still grows, alone).
    pub fn reserve(&mut self, n: usize, hasher: impl Fn(&NodeId) -> u64) {
        let each = share_with_margin(n, SHARDS);
        for shard in self.shards.iter_mut() {
            shard.reserve(each, &hasher);
        }
    }

    pub fn find(&self, hash: u64, eq: impl FnMut(&NodeId) -> bool) -> Option<&NodeId> {
        self.shards[shard_of(hash)].find(hash, eq)
    }

    pub fn entry(
        &mut self,
        hash: u64,
        eq: impl FnMut(&NodeId) -> bool,
        hasher: impl Fn(&NodeId) -> u64,
    ) -> Entry<'_, NodeId> {
        self.shards[shard_of(hash)].entry(hash, eq, hasher)
    }

    pub fn find_entry(
        &mut self,
        hash: u64,
        eq: impl FnMut(&NodeId) -> bool,
    ) -> Option<OccupiedEntry<'_, NodeId>> {
        self.shards[shard_of(hash)].find_entry(hash, eq).ok()
    }

    /// Adds the entries set aside in `pending`, a group of shards at a time. `same(a, b)`:
    /// whether ids `a` and `b` have the same key; an entry whose key is already in is the
    /// error (its id), the entries before it added and the rest not.
    pub fn absorb(
        &mut self,
        pending: Pending,
        same: impl Fn(NodeId, NodeId) -> bool,
        hasher: impl Fn(&NodeId) -> u64,
    ) -> Result<(), NodeId> {
        for (g, (hashes, ids)) in pending.groups.into_iter().enumerate() {
            let shards = &mut self.shards[g * GROUP..(g + 1) * GROUP];
            let mut counts = [0usize; GROUP];
            for &h in &hashes {
                counts[shard_of(h) % GROUP] += 1;
            }
            for (shard, &n) in shards.iter_mut().zip(&counts) {
                shard.reserve(n, &hasher);
            }
            for (&h, &id) in hashes.iter().zip(&ids) {
                match shards[shard_of(h) % GROUP].entry(h, |&other| same(other, id), &hasher) {
                    Entry::Vacant(v) => {
                        v.insert(id);
                    }
                    Entry::Occupied(_) => return Err(id),
                }
            }
        }
        Ok(())
    }

    /// Entries in all shards.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shards.iter().map(HashTable::len).sum()
    }

    /// Buckets in all shards (what the index's memory is proportional to).
    #[cfg(test)]
    pub fn buckets(&self) -> usize {
        // hashbrown's capacity is 7/8 of the buckets once past the smallest tables.
        self.shards.iter().map(|s| s.capacity() * 8 / 7).sum()
    }

    /// Entries of the fullest shard.
    #[cfg(test)]
    pub fn largest_shard(&self) -> usize {
        self.shards.iter().map(HashTable::len).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(id: NodeId) -> u64 {
        ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(id)
    }

    #[test]
    fn entries_spread_over_the_shards_and_are_found_again() {
        let mut index = Index::new();
        let n = 200_000u32;
        for id in 0..n {
            match index.entry(mix(id), |&i| i == id, |&i| mix(i)) {
                Entry::Vacant(v) => {
                    v.insert(id);
                }
                Entry::Occupied(_) => panic!("id {id} inserted twice"),
            }
        }
        assert_eq!(index.len(), n as usize);
        // About 195 per shard: no shard should hold more than twice its share.
        assert!(index.largest_shard() < 2 * n as usize / SHARDS);
        for id in (0..n).step_by(7) {
            assert_eq!(index.find(mix(id), |&i| i == id), Some(&id));
        }
        assert!(index.find(mix(n + 1), |&i| i == n + 1).is_none());
        for id in (0..n).step_by(2) {
            let Some(e) = index.find_entry(mix(id), |&i| i == id) else {
                panic!("id {id} not found for removal");
            };
            e.remove();
        }
        assert_eq!(index.len(), n as usize / 2);
        assert!(index.find(mix(2), |&i| i == 2).is_none());
        assert_eq!(index.find(mix(3), |&i| i == 3), Some(&3));
    }

    #[test]
    fn reserve_makes_room_in_every_shard() {
        let mut index = Index::new();
        let n = 100_000;
        index.reserve(n, |&i| mix(i));
        let before = index.buckets();
        for id in 0..n as u32 {
            if let Entry::Vacant(v) = index.entry(mix(id), |&i| i == id, |&i| mix(i)) {
                v.insert(id);
            }
        }
        assert_eq!(index.buckets(), before, "a shard grew after the reserve");
        // As much memory as one table would take: one table reserves the next power of two
        // above n * 8/7 buckets.
        let one_table = (n * 8 / 7).next_power_of_two();
        assert!(
            index.buckets() <= 2 * one_table,
            "{} buckets",
            index.buckets()
        );
    }
}
