//! Watches of this member's connections, and their delivery.
//!
//! Two tables, as in ZooKeeper's `DataTree`: data watches (set by getData and exists) and
//! child watches (set by getChildren); addWatch puts a persistent or persistent-recursive
//! watch in both. A trigger from the apply loop is matched against them with ZooKeeper's
//! rules (`WatchManager.triggerWatch`):
//! - one event per connection per trigger, however many of its watches match;
//! - a standard watch is removed when it fires; persistent ones stay;
//! - recursive watches fire for every path beneath them, except NodeChildrenChanged;
//! - deleting a node fires NodeDeleted on its data watches, then on its child watches except
//!   for connections already told.
//!
//! Events go straight into the connection's [`Outbox`] while the apply loop still holds the
//! tree lock, so they are ahead of any later reply that reflects the change.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jute::{EventType, KeeperState, Record, WatcherEvent};

use super::metrics::WatchFires;
use super::outbox::Outbox;
use super::reply;
use crate::state::command::ConnId;
use crate::state::path;
use crate::state::tree::Trigger;

/// How a watch behaves when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    Standard,
    Persistent,
    PersistentRecursive,
}

#[derive(Default)]
struct WatchTable {
    by_path: HashMap<String, HashMap<ConnId, WatchMode>>,
    by_conn: HashMap<ConnId, HashSet<String>>,
    recursive: usize,
}

impl WatchTable {
    /// Adds or re-modes a watch (ZooKeeper 3.8 keeps one mode per connection and path: the
    /// latest registration wins).
    fn add(&mut self, path: &str, conn: ConnId, mode: WatchMode) {
        let watchers = self.by_path.entry(path.to_string()).or_default();
        if let Some(old) = watchers.insert(conn, mode) {
            if old == WatchMode::PersistentRecursive {
                self.recursive -= 1;
            }
        }
        if mode == WatchMode::PersistentRecursive {
            self.recursive += 1;
        }
        self.by_conn
            .entry(conn)
            .or_default()
            .insert(path.to_string());
    }

    fn remove(&mut self, path: &str, conn: ConnId) -> bool {
        let Some(watchers) = self.by_path.get_mut(path) else {
            return false;
        };
        let Some(mode) = watchers.remove(&conn) else {
            return false;
        };
        if mode == WatchMode::PersistentRecursive {
            self.recursive -= 1;
        }
        if watchers.is_empty() {
            self.by_path.remove(path);
        }
        if let Some(paths) = self.by_conn.get_mut(&conn) {
            paths.remove(path);
            if paths.is_empty() {
                self.by_conn.remove(&conn);
            }
        }
        true
    }

    fn contains(&self, path: &str, conn: ConnId) -> bool {
        self.by_path
            .get(path)
            .is_some_and(|w| w.contains_key(&conn))
    }

    fn remove_conn(&mut self, conn: ConnId) {
        if let Some(paths) = self.by_conn.remove(&conn) {
            for p in paths {
                if let Some(watchers) = self.by_path.get_mut(&p) {
                    if watchers.remove(&conn) == Some(WatchMode::PersistentRecursive) {
                        self.recursive -= 1;
                    }
                    if watchers.is_empty() {
                        self.by_path.remove(&p);
                    }
                }
            }
        }
    }

    /// The connections a trigger reaches, consuming standard watches on the path itself.
    fn trigger(&mut self, path: &str, event: EventType, hit: &mut Vec<ConnId>) {
        let children_changed = event == EventType::NodeChildrenChanged;
        if let Some(watchers) = self.by_path.get_mut(path) {
            let mut consumed = Vec::new();
            for (conn, mode) in watchers.iter() {
                match mode {
                    WatchMode::PersistentRecursive if children_changed => {}
                    WatchMode::Standard => {
                        consumed.push(*conn);
                        push_unique(hit, *conn);
                    }
                    _ => push_unique(hit, *conn),
                }
            }
            for conn in consumed {
                watchers.remove(&conn);
                if let Some(paths) = self.by_conn.get_mut(&conn) {
                    paths.remove(path);
                    if paths.is_empty() {
                        self.by_conn.remove(&conn);
                    }
                }
            }
            if watchers.is_empty() {
                self.by_path.remove(path);
            }
        }
        if self.recursive > 0 && !children_changed {
            for ancestor in path::ancestors(path) {
                if let Some(watchers) = self.by_path.get(ancestor) {
                    for (conn, mode) in watchers {
                        if *mode == WatchMode::PersistentRecursive {
                            push_unique(hit, *conn);
                        }
                    }
                }
            }
        }
    }

    fn count(&self) -> usize {
        self.by_path.values().map(|w| w.len()).sum()
    }
}

fn push_unique(v: &mut Vec<ConnId>, c: ConnId) {
    if !v.contains(&c) {
        v.push(c);
    }
}

/// The watch manager as a caller has it: already locked (the apply loop), or to lock only
/// if needed (a read that sets no watch takes no lock).
pub enum WatchSlot<'a> {
    Held(&'a mut WatchManager),
    Shared(&'a parking_lot::Mutex<WatchManager>),
}

impl WatchSlot<'_> {
    pub fn with<R>(&mut self, f: impl FnOnce(&mut WatchManager) -> R) -> R {
        match self {
            WatchSlot::Held(w) => f(w),
            WatchSlot::Shared(m) => f(&mut m.lock()),
        }
    }
}

/// Which table(s) checkWatches / removeWatches address (`WatcherType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    Data,
    Child,
    Both,
}

/// See the module docs.
#[derive(Default)]
pub struct WatchManager {
    data: WatchTable,
    child: WatchTable,
    outboxes: HashMap<ConnId, Arc<Outbox>>,
    /// Watches fired per event, by event type (ZooKeeper's `node_*_watch_count`).
    pub fired: WatchFires,
}

/// Encodes a watch notification: xid -1, zxid -1 (ZooKeeper 3.8), err 0, then the event.
pub fn encode_event(out: &mut bytes::BytesMut, event: EventType, path: &str) {
    reply::header(out, jute::xid::NOTIFICATION, -1, 0);
    WatcherEvent {
        event_type: event.code(),
        state: KeeperState::SyncConnected.code(),
        path: path.to_string(),
    }
    .encode(out);
}

impl WatchManager {
    /// A connection can now have watches; events for it go to `outbox`.
    pub fn register(&mut self, conn: ConnId, outbox: Arc<Outbox>) {
        self.outboxes.insert(conn, outbox);
    }

    /// The connection is gone: all its watches go with it.
    pub fn unregister(&mut self, conn: ConnId) {
        self.outboxes.remove(&conn);
        self.data.remove_conn(conn);
        self.child.remove_conn(conn);
    }

    /// getData/exists with watch=true.
    pub fn watch_data(&mut self, path: &str, conn: ConnId) {
        self.data.add(path, conn, WatchMode::Standard);
    }

    /// getChildren with watch=true.
    pub fn watch_children(&mut self, path: &str, conn: ConnId) {
        self.child.add(path, conn, WatchMode::Standard);
    }

    /// addWatch (persistent or persistent-recursive): both tables.
    pub fn add_persistent(&mut self, path: &str, conn: ConnId, recursive: bool) {
        let mode = if recursive {
            WatchMode::PersistentRecursive
        } else {
            WatchMode::Persistent
        };
        self.data.add(path, conn, mode);
        self.child.add(path, conn, mode);
    }

    /// checkWatches.
    pub fn contains(&self, path: &str, conn: ConnId, tables: Tables) -> bool {
        match tables {
            Tables::Data => self.data.contains(path, conn),
            Tables::Child => self.child.contains(path, conn),
            Tables::Both => self.data.contains(path, conn) || self.child.contains(path, conn),
        }
    }

    /// removeWatches: true if anything was removed.
    pub fn remove(&mut self, path: &str, conn: ConnId, tables: Tables) -> bool {
        match tables {
            Tables::Data => self.data.remove(path, conn),
            Tables::Child => self.child.remove(path, conn),
            Tables::Both => {
                let c = self.child.remove(path, conn);
                let d = self.data.remove(path, conn);
                c || d
            }
        }
    }

    /// Sends one event to one connection (SetWatches answers use this).
    pub fn notify(&mut self, conn: ConnId, event: EventType, path: &str) {
        if let Some(outbox) = self.outboxes.get(&conn) {
            outbox.push_notification(|b| encode_event(b, event, path));
        }
    }

    fn deliver(&mut self, conns: &[ConnId], event: EventType, path: &str) {
        for conn in conns {
            if let Some(outbox) = self.outboxes.get(conn) {
                outbox.push_notification(|b| encode_event(b, event, path));
            }
        }
    }

    /// Fires the watches one applied command triggered, in order.
    pub fn fire(&mut self, triggers: &[Trigger]) {
        if self.data.by_path.is_empty() && self.child.by_path.is_empty() {
            return;
        }
        let mut hit = Vec::new();
        for t in triggers {
            hit.clear();
            match t {
                Trigger::Created(p) => {
                    self.data.trigger(p, EventType::NodeCreated, &mut hit);
                    self.deliver(&hit, EventType::NodeCreated, p);
                    self.fired.record(&self.fired.created, hit.len());
                }
                Trigger::DataChanged(p) => {
                    self.data.trigger(p, EventType::NodeDataChanged, &mut hit);
                    self.deliver(&hit, EventType::NodeDataChanged, p);
                    self.fired.record(&self.fired.changed, hit.len());
                }
                Trigger::Deleted(p) => {
                    // One list for both tables: a connection told by its data watch is not
                    // told again by its child watch.
                    self.data.trigger(p, EventType::NodeDeleted, &mut hit);
                    self.child.trigger(p, EventType::NodeDeleted, &mut hit);
                    self.deliver(&hit, EventType::NodeDeleted, p);
                    self.fired.record(&self.fired.deleted, hit.len());
                }
                Trigger::ChildrenChanged(p) => {
                    self.child
                        .trigger(p, EventType::NodeChildrenChanged, &mut hit);
                    self.deliver(&hit, EventType::NodeChildrenChanged, p);
                    self.fired.record(&self.fired.children, hit.len());
                }
            }
        }
    }

    /// Total watches (a path watched by one connection in both tables counts twice, as in
    /// ZooKeeper's `zk_watch_count`).
    pub fn watch_count(&self) -> usize {
        self.data.count() + self.child.count()
    }

    /// Data watches only: what ZooKeeper's `wchs` reports as "Total watches".
    pub fn data_watch_count(&self) -> usize {
        self.data.count()
    }

    /// Distinct paths with a data watch (`wchs`; ZooKeeper's reports leave child watches out).
    pub fn watched_paths(&self) -> usize {
        self.data.by_path.len()
    }

    /// Connections with at least one data watch (`wchs`).
    pub fn watching_connections(&self) -> usize {
        self.data.by_conn.len()
    }

    /// Data-watched paths per connection (`wchc`), sorted.
    pub fn by_connection(&self) -> Vec<(ConnId, Vec<String>)> {
        let mut v: Vec<(ConnId, Vec<String>)> = self
            .data
            .by_conn
            .iter()
            .map(|(c, paths)| {
                let mut p: Vec<String> = paths.iter().cloned().collect();
                p.sort();
                (*c, p)
            })
            .collect();
        v.sort();
        v
    }

    /// Connections per data-watched path (`wchp`), sorted.
    pub fn by_path(&self) -> Vec<(String, Vec<ConnId>)> {
        let mut v: Vec<(String, Vec<ConnId>)> = self
            .data
            .by_path
            .iter()
            .map(|(p, conns)| {
                let mut c: Vec<ConnId> = conns.keys().copied().collect();
                c.sort();
                (p.clone(), c)
            })
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jute::{Reader, ReplyHeader};

    fn events(outbox: &Outbox) -> Vec<(i32, String)> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        outbox.close();
        let mut out = Vec::new();
        while let Some(chunk) = rt.block_on(outbox.next_chunk()) {
            let mut buf = bytes::BytesMut::from(&chunk[..]);
            while let Ok(Some(frame)) = jute::split_frame(&mut buf, 1 << 20) {
                let mut r = Reader::new(frame);
                let h = ReplyHeader::decode(&mut r).unwrap();
                assert_eq!((h.xid, h.zxid, h.err), (-1, -1, 0));
                let e = WatcherEvent::decode(&mut r).unwrap();
                assert_eq!(e.state, 3);
                out.push((e.event_type, e.path));
            }
        }
        out
    }

    fn setup() -> (WatchManager, Arc<Outbox>, Arc<Outbox>) {
        let mut w = WatchManager::default();
        let (a, b) = (Arc::new(Outbox::default()), Arc::new(Outbox::default()));
        w.register(1, a.clone());
        w.register(2, b.clone());
        (w, a, b)
    }

    #[test]
    fn standard_watches_fire_once_and_dedup() {
        let (mut w, a, b) = setup();
        w.watch_data("/x", 1);
        w.watch_data("/x", 1);
        w.watch_children("/x", 1);
        w.watch_data("/x", 2);
        w.fire(&[Trigger::DataChanged("/x".into())]);
        w.fire(&[Trigger::DataChanged("/x".into())]);
        // Child watch not fired by a data change; deleting fires NodeDeleted once per conn.
        w.fire(&[
            Trigger::Deleted("/x".into()),
            Trigger::ChildrenChanged("/".into()),
        ]);
        assert_eq!(events(&a), vec![(3, "/x".into()), (2, "/x".into())]);
        assert_eq!(events(&b), vec![(3, "/x".into())]);
        assert_eq!(w.watch_count(), 0);
    }

    #[test]
    fn persistent_and_recursive_watches() {
        let (mut w, a, b) = setup();
        w.add_persistent("/p", 1, false);
        w.add_persistent("/r", 2, true);
        for _ in 0..2 {
            w.fire(&[
                Trigger::Created("/p/c".into()),
                Trigger::ChildrenChanged("/p".into()),
            ]);
            w.fire(&[
                Trigger::Created("/r/a/b".into()),
                Trigger::ChildrenChanged("/r/a".into()),
            ]);
            w.fire(&[Trigger::DataChanged("/r".into())]);
        }
        assert_eq!(events(&a), vec![(4, "/p".into()), (4, "/p".into())]);
        assert_eq!(
            events(&b),
            vec![
                (1, "/r/a/b".into()),
                (3, "/r".into()),
                (1, "/r/a/b".into()),
                (3, "/r".into())
            ]
        );
        assert!(w.contains("/p", 1, Tables::Both));
        assert!(w.remove("/p", 1, Tables::Data));
        assert!(w.contains("/p", 1, Tables::Child));
        assert!(!w.contains("/p", 1, Tables::Data));
        w.unregister(2);
        assert_eq!(w.watch_count(), 1);
    }
}
