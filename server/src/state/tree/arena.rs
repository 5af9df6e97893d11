//! Where the znodes live: compact slots in an arena, addressed by `u32` ids, and one index
//! from (parent id, child name) to id.
//!
//! A million znodes as separately allocated nodes keyed by their full paths cost several
//! allocations each (the path key, the node, a children set, a name per child). Here a
//! znode is one fixed-size [`Slot`] (its Stat, an interned ACL id, its links to parent and
//! siblings) plus one blob holding its kind, owner (ephemerals and TTL nodes only), name
//! (last path segment) and data (their layout is `slot.rs`'s). Children are a doubly
//! linked list through the slots (O(1) unlink), and the only
//! lookup structure is an [`Index`] of ids hashing (parent, name) read from the arena, so no
//! path is stored anywhere: a path lookup walks its segments.
//!
//! Most znodes of a big tree are leaves, and a leaf that never had a child has nothing to
//! say about children: its pzxid is its czxid, its cversion and child count are zero. What
//! only a parent needs (first child, child count, pzxid, cversion) is a [`Dir`] in a table
//! of its own, given to a node when it first needs one (its first child, or a snapshot that
//! says so). That keeps a leaf's slot at 64 bytes instead of 80: 16 bytes per znode.
//!
//! Slots and dirs are grouped in chunks of [`CHUNK`], each behind an `Arc`. Capturing the
//! arena for a snapshot ([`Arena::capture`]) copies one pointer per chunk; a write to a chunk
//! a capture still holds copies that chunk only (`Arc::make_mut`; the name/data allocations
//! are shared by reference count, not copied). Freed ids go on free lists for reuse.

use std::sync::{Arc, OnceLock};

use hashbrown::hash_table::Entry;

use super::index::{Index, Pending};
use super::slot::{ChildStat, Dir, NodeId, Slot, NONE};

/// The root's id.
pub const ROOT: NodeId = 0;

/// Slots per chunk: the unit of copy-on-write while a snapshot holds the arena.
pub const CHUNK: usize = 512;

/// A frozen copy of the arena's slots and dirs (pointer copies of their chunks).
#[derive(Debug, Clone)]
pub struct Slots {
    chunks: Vec<Arc<Vec<Slot>>>,
    dirs: Vec<Arc<Vec<Dir>>>,
}

/// Element `i` of a chunked table.
fn chunked<T>(chunks: &[Arc<Vec<T>>], i: u32) -> Option<&T> {
    chunks.get(i as usize / CHUNK)?.get(i as usize % CHUNK)
}

/// Element `i` of a chunked table, to change (its chunk copied first if a capture still
/// holds it).
fn chunked_mut<T: Clone>(chunks: &mut [Arc<Vec<T>>], i: u32) -> Option<&mut T> {
    let chunk = chunks.get_mut(i as usize / CHUNK)?;
    Arc::make_mut(chunk).get_mut(i as usize % CHUNK)
}

/// Puts `value` in a chunked table, at an index from `free` (one given back) or at the end:
/// its index.
fn chunked_take<T: Clone>(chunks: &mut Vec<Arc<Vec<T>>>, free: &mut Vec<u32>, value: T) -> u32 {
    if let Some(i) = free.pop() {
        if let Some(reused) = chunked_mut(chunks, i) {
            *reused = value;
            return i;
        }
    }
    if chunks.last().is_none_or(|c| c.len() == CHUNK) {
        chunks.push(Arc::new(Vec::with_capacity(CHUNK)));
    }
    let n = chunks.len();
    let chunk = Arc::make_mut(&mut chunks[n - 1]);
    chunk.push(value);
    ((n - 1) * CHUNK + chunk.len() - 1) as u32
}

impl Slots {
    pub fn get(&self, id: NodeId) -> Option<&Slot> {
        chunked(&self.chunks, id).filter(|s| s.is_live())
    }

    /// A live slot to change (its chunk copied first if a capture still holds it).
    fn get_mut(&mut self, id: NodeId) -> Option<&mut Slot> {
        chunked_mut(&mut self.chunks, id).filter(|s| s.is_live())
    }

    /// The parent side of `slot`'s Stat (a leaf's when it has no dir).
    pub fn dir_of(&self, slot: &Slot) -> Dir {
        match slot.dir {
            NONE => Dir::leaf(slot.czxid),
            d => chunked(&self.dirs, d)
                .copied()
                .unwrap_or(Dir::leaf(slot.czxid)),
        }
    }

    /// The dir of `id`, given one first if it has none (its chunk copied first if a capture
    /// still holds it).
    fn dir_mut(&mut self, free_dirs: &mut Vec<u32>, id: NodeId) -> Option<&mut Dir> {
        let slot = self.get(id)?;
        let (mut d, czxid) = (slot.dir, slot.czxid);
        if d == NONE {
            d = chunked_take(&mut self.dirs, free_dirs, Dir::leaf(czxid));
            self.get_mut(id)?.dir = d;
        }
        chunked_mut(&mut self.dirs, d)
    }

    /// The children of `id`, newest first.
    pub fn children(&self, id: NodeId) -> impl Iterator<Item = (NodeId, &Slot)> {
        let mut next = self.get(id).map_or(NONE, |s| self.dir_of(s).first_child);
        std::iter::from_fn(move || {
            let slot = self.get(next)?;
            let id = next;
            next = slot.next;
            Some((id, slot))
        })
    }

    /// Every node with its full path, parents before their children (depth first from the
    /// root).
    pub fn walk(&self, mut visit: impl FnMut(&str, NodeId, &Slot)) {
        let mut path = String::new();
        let mut stack: Vec<(NodeId, usize)> = vec![(ROOT, 0)];
        while let Some((id, parent_len)) = stack.pop() {
            let Some(slot) = self.get(id) else { continue };
            path.truncate(parent_len);
            if id == ROOT {
                path.push('/');
            } else {
                if parent_len > 1 {
                    path.push('/');
                }
                path.push_str(&String::from_utf8_lossy(slot.name()));
            }
            visit(&path, id, slot);
            let len = path.len();
            stack.extend(self.children(id).map(|(c, _)| (c, len)));
        }
    }
}

/// The hasher of the (parent, name) index: ahash keyed once per process, so clients cannot
/// choose names that collide.
fn keys() -> &'static ahash::RandomState {
    static KEYS: OnceLock<ahash::RandomState> = OnceLock::new();
    KEYS.get_or_init(ahash::RandomState::new)
}

fn hash_of(parent: NodeId, name: &[u8]) -> u64 {
    keys().hash_one((parent, name))
}

/// The slots and dirs, their free lists and the (parent, name) index.
#[derive(Debug, Clone)]
pub struct Arena {
    slots: Slots,
    free: Vec<NodeId>,
    free_dirs: Vec<u32>,
    index: Index,
    live: usize,
}

impl Arena {
    pub fn new() -> Arena {
        Arena {
            slots: Slots {
                chunks: Vec::new(),
                dirs: Vec::new(),
            },
            free: Vec::new(),
            free_dirs: Vec::new(),
            index: Index::new(),
            live: 0,
        }
    }

    /// Room for `n` more nodes without growing the index.
    pub fn reserve(&mut self, n: usize) {
        let slots = &self.slots;
        self.index.reserve(n, |&id| hash_in(slots, id));
        self.slots.chunks.reserve(n / CHUNK + 1);
    }

    /// Live nodes.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn slots(&self) -> &Slots {
        &self.slots
    }

    /// A snapshot's view: one pointer copy per chunk.
    pub fn capture(&self) -> Slots {
        self.slots.clone()
    }

    pub fn get(&self, id: NodeId) -> Option<&Slot> {
        self.slots.get(id)
    }

    /// A slot to change (its chunk copied first if a capture still holds it).
    pub fn get_mut(&mut self, id: NodeId) -> Option<&mut Slot> {
        self.slots.get_mut(id)
    }

    /// The parent side of `id`'s Stat.
    pub fn dir(&self, id: NodeId) -> Option<Dir> {
        self.get(id).map(|s| self.slots.dir_of(s))
    }

    /// `id`'s pzxid and cversion become `stat`'s (a dir is given only when they differ from
    /// a childless new node's).
    pub fn set_child_stat(&mut self, id: NodeId, stat: ChildStat) {
        let Some(now) = self.dir(id) else { return };
        if (now.pzxid, now.cversion) == (stat.pzxid, stat.cversion) {
            return;
        }
        if let Some(dir) = self.slots.dir_mut(&mut self.free_dirs, id) {
            (dir.pzxid, dir.cversion) = (stat.pzxid, stat.cversion);
        }
    }

    /// Puts `slot` in `id`'s place, keeping that place in the tree (its parent, siblings,
    /// children and dir): the slot replaced.
    pub fn replace(&mut self, id: NodeId, mut slot: Slot) -> Option<Slot> {
        let old = self.get_mut(id)?;
        (slot.parent, slot.next, slot.prev, slot.dir) = (old.parent, old.next, old.prev, old.dir);
        Some(std::mem::replace(old, slot))
    }

    /// `id`'s pzxid becomes `pzxid` (its cversion stays).
    pub fn set_pzxid(&mut self, id: NodeId, pzxid: i64) {
        if let Some(dir) = self.dir(id) {
            let stat = ChildStat {
                pzxid,
                cversion: dir.cversion,
            };
            self.set_child_stat(id, stat);
        }
    }

    /// The child of `parent` called `name`.
    pub fn child(&self, parent: NodeId, name: &[u8]) -> Option<NodeId> {
        let slots = &self.slots;
        self.index
            .find(hash_of(parent, name), |&id| {
                slots
                    .get(id)
                    .is_some_and(|s| s.parent == parent && s.name() == name)
            })
            .copied()
    }

    /// The path of a node, from its ancestors' names (for messages).
    pub fn path_of(&self, mut id: NodeId) -> String {
        let mut names = Vec::new();
        while let Some(slot) = self.get(id).filter(|_| id != ROOT) {
            names.push(slot.name());
            id = slot.parent;
        }
        let mut path = String::new();
        for name in names.iter().rev() {
            path.push('/');
            path.push_str(&String::from_utf8_lossy(name));
        }
        if path.is_empty() {
            path.push('/');
        }
        path
    }

    /// The id of a path (`""` and `"/"` are the root); None unless every segment exists.
    pub fn lookup(&self, path: &str) -> Option<NodeId> {
        if path.is_empty() || path == "/" {
            return self.get(ROOT).map(|_| ROOT);
        }
        let rest = path.strip_prefix('/')?;
        let mut id = ROOT;
        for seg in rest.split('/') {
            id = self.child(id, seg.as_bytes())?;
        }
        Some(id)
    }

    /// Places a node (its blob, Stat, kind, ACL set by the caller; links are set here, and
    /// it starts without a dir: see [`set_child_stat`](Self::set_child_stat)) under
    /// `parent` (NONE for the root, which must be the first node placed). Newest children
    /// come first in the sibling list. If `parent` already has a child of that name, nothing
    /// changes and that child's id is the error, with the slot given back (one index probe
    /// for both).
    pub fn insert(&mut self, parent: NodeId, slot: Slot) -> Result<NodeId, (NodeId, Slot)> {
        if parent == NONE {
            return Ok(self.place(parent, slot));
        }
        let Arena {
            slots,
            free,
            free_dirs,
            index,
            live,
        } = self;
        let name = slot.name();
        let same = |&i: &NodeId| {
            slots
                .get(i)
                .is_some_and(|s| s.parent == parent && s.name() == name)
        };
        let vacant = match index.entry(hash_of(parent, name), same, |&i| hash_in(slots, i)) {
            Entry::Occupied(e) => return Err((*e.get(), slot)),
            Entry::Vacant(v) => v,
        };
        let id = place(slots, free, free_dirs, live, parent, slot);
        vacant.insert(id);
        Ok(id)
    }

    /// Places a node as [`insert`](Self::insert) does without looking at the index: its
    /// entry goes to `pending`, for [`absorb`](Self::absorb) once the whole tree is placed.
    /// A loader that knows each parent (a depth-first snapshot) builds a big tree this way
    /// without a cache miss into the index per node. Until then the node cannot be looked
    /// up, and whether its name is taken is not checked.
    pub fn place_unindexed(&mut self, parent: NodeId, slot: Slot, pending: &mut Pending) -> NodeId {
        let hash = hash_of(parent, slot.name());
        let id = self.place(parent, slot);
        pending.push(hash, id);
        id
    }

    /// Adds the entries of nodes placed with [`place_unindexed`](Self::place_unindexed) to
    /// the index. A node whose parent already has a child of its name is the error (the
    /// entries before it are in; the index is not usable for the rest).
    pub fn absorb(&mut self, pending: Pending) -> Result<(), NodeId> {
        let slots = &self.slots;
        let key = |id: NodeId| slots.get(id).map(|s| (s.parent, s.name()));
        self.index.absorb(
            pending,
            |a, b| key(a).is_some_and(|k| key(b) == Some(k)),
            |&i| hash_in(slots, i),
        )
    }

    /// Removes a node (unlinking it from its parent) and returns its slot and child-side
    /// Stat. Its children, if any, are not removed: callers only remove childless nodes.
    pub fn remove(&mut self, id: NodeId) -> Option<(Slot, ChildStat)> {
        let slot = self.get(id)?;
        let (parent, prev, next) = (slot.parent, slot.prev, slot.next);
        let own = self.slots.dir_of(slot);
        let own_dir = slot.dir;
        let hash = hash_of(parent, slot.name());
        if let Some(e) = self.index.find_entry(hash, |&i| i == id) {
            e.remove();
        }
        if prev != NONE {
            if let Some(p) = self.get_mut(prev) {
                p.next = next;
            }
        }
        if next != NONE {
            if let Some(n) = self.get_mut(next) {
                n.prev = prev;
            }
        }
        if let Some(p) = self.slots.dir_mut(&mut self.free_dirs, parent) {
            if prev == NONE {
                p.first_child = next;
            }
            p.children = p.children.saturating_sub(1);
        }
        if own_dir != NONE {
            self.free_dirs.push(own_dir);
        }
        let mut slot = std::mem::replace(self.get_mut(id)?, Slot::FREE);
        slot.dir = NONE;
        self.free.push(id);
        self.live -= 1;
        let stat = ChildStat {
            pzxid: own.pzxid,
            cversion: own.cversion,
        };
        Some((slot, stat))
    }

    /// [`place`] on this arena's parts.
    fn place(&mut self, parent: NodeId, slot: Slot) -> NodeId {
        let Arena {
            slots,
            free,
            free_dirs,
            live,
            ..
        } = self;
        place(slots, free, free_dirs, live, parent, slot)
    }
}

/// Takes a free id (or a new one) for `slot` and links it first among `parent`'s children.
fn place(
    slots: &mut Slots,
    free: &mut Vec<NodeId>,
    free_dirs: &mut Vec<u32>,
    live: &mut usize,
    parent: NodeId,
    mut slot: Slot,
) -> NodeId {
    // (A placeholder until the links are known: they need the id.)
    let id = chunked_take(&mut slots.chunks, free, Slot::FREE);
    slot.parent = parent;
    slot.prev = NONE;
    slot.next = NONE;
    slot.dir = NONE;
    if parent != NONE {
        if let Some(p) = slots.dir_mut(free_dirs, parent) {
            slot.next = p.first_child;
            p.first_child = id;
            p.children += 1;
        }
        if let Some(n) = slots.get_mut(slot.next) {
            n.prev = id;
        }
    }
    if let Some(free) = chunked_mut(&mut slots.chunks, id) {
        *free = slot;
    }
    *live += 1;
    id
}

fn hash_in(slots: &Slots, id: NodeId) -> u64 {
    slots.get(id).map_or(0, |s| hash_of(s.parent, s.name()))
}

#[cfg(test)]
mod tests {
    use super::super::kind::NodeKind;
    use super::super::slot::new_slot;
    use super::*;

    fn node(a: &mut Arena, parent: NodeId, name: &str) -> NodeId {
        a.insert(
            parent,
            new_slot(NodeKind::Persistent, 0, name.as_bytes(), Some(b"d")),
        )
        .unwrap()
    }

    #[test]
    fn links_lookup_remove_and_reuse() {
        let mut a = Arena::new();
        let root = node(&mut a, NONE, "");
        assert_eq!(root, ROOT);
        let x = node(&mut a, ROOT, "x");
        let y = node(&mut a, ROOT, "y");
        let z = node(&mut a, x, "z");
        assert_eq!(a.lookup("/x/z"), Some(z));
        assert_eq!(a.lookup("/y"), Some(y));
        let taken = a
            .insert(ROOT, new_slot(NodeKind::Persistent, 0, b"y", None))
            .map_err(|(id, _)| id);
        assert_eq!(taken, Err(y), "a name once per parent");
        assert_eq!(a.len(), 4);
        assert_eq!(a.lookup("/x/"), None);
        assert_eq!(a.lookup("x"), None);
        assert_eq!(a.dir(ROOT).unwrap().children, 2);
        let before = a.capture();
        a.remove(z);
        a.remove(x);
        // Not unlinked yet from the captured copy, which still sees x.
        assert_eq!(before.children(ROOT).count(), 2);
        assert_eq!(
            a.slots().children(ROOT).map(|(i, _)| i).collect::<Vec<_>>(),
            [y]
        );
        assert_eq!(a.lookup("/x"), None);
        let w = node(&mut a, ROOT, "w");
        assert_eq!(w, x, "a freed id is reused");
        let mut paths = Vec::new();
        a.slots().walk(|p, _, _| paths.push(p.to_string()));
        assert_eq!(paths[0], "/");
        paths.sort();
        assert_eq!(paths, ["/", "/w", "/y"]);
        assert!(a.lookup("/w/z").is_none());
    }

    #[test]
    fn dirs_hold_the_parent_side_and_are_reused() {
        let mut a = Arena::new();
        node(&mut a, NONE, "");
        let x = node(&mut a, ROOT, "x");
        a.get_mut(x).unwrap().czxid = 5;
        let leaf = |czxid| Dir {
            pzxid: czxid,
            first_child: NONE,
            cversion: 0,
            children: 0,
        };
        assert_eq!(a.dir(x), Some(leaf(5)), "a leaf's pzxid is its czxid");
        a.set_child_stat(
            x,
            ChildStat {
                pzxid: 5,
                cversion: 0,
            },
        );
        assert_eq!(
            a.get(x).unwrap().dir,
            NONE,
            "a leaf's own stat takes no dir"
        );

        let y = node(&mut a, x, "y");
        let stat = ChildStat {
            pzxid: 9,
            cversion: 1,
        };
        a.set_child_stat(x, stat);
        let before = a.capture();
        let z = node(&mut a, x, "z");
        let captured = before.dir_of(before.get(x).unwrap());
        assert_eq!((captured.children, captured.first_child), (1, y));
        assert_eq!(
            a.dir(x).unwrap().children,
            2,
            "the capture's dirs are copies"
        );

        a.remove(z);
        a.remove(y);
        let emptied = Dir {
            pzxid: 9,
            first_child: NONE,
            cversion: 1,
            children: 0,
        };
        assert_eq!(
            a.dir(x),
            Some(emptied),
            "a parent keeps its stat once childless"
        );

        let (slot, removed) = a.remove(x).unwrap();
        assert_eq!(removed, stat);
        let w = node(&mut a, ROOT, "w");
        let v = node(&mut a, w, "v");
        let fresh = Dir {
            first_child: v,
            children: 1,
            ..leaf(0)
        };
        assert_eq!(a.dir(w), Some(fresh), "a reused dir starts as a leaf's");

        let back = a.insert(ROOT, slot).unwrap();
        a.set_child_stat(back, removed);
        assert_eq!(a.dir(back), Some(emptied));
        assert_eq!(a.dir(w), Some(fresh));
        assert_eq!(before.dir_of(before.get(x).unwrap()).children, 1);
    }

    #[test]
    fn ids_span_chunks() {
        let mut a = Arena::new();
        node(&mut a, NONE, "");
        for i in 0..(3 * CHUNK) {
            let id = node(&mut a, ROOT, &format!("n{i}"));
            assert_eq!(a.lookup(&format!("/n{i}")), Some(id));
        }
        assert_eq!(a.len(), 3 * CHUNK + 1);
        assert_eq!(a.slots().children(ROOT).count(), 3 * CHUNK);
    }
}
