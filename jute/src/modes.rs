//! Enumerations carried as ints: create modes, watcher event types and states, watcher types
//! for checkWatches/removeWatches, and addWatch modes.

/// `CreateMode` as carried in `CreateRequest.flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    Persistent,
    Ephemeral,
    PersistentSequential,
    EphemeralSequential,
    Container,
    PersistentWithTtl,
    PersistentSequentialWithTtl,
}

impl CreateMode {
    pub fn from_flags(flags: i32) -> Option<CreateMode> {
        use CreateMode::*;
        Some(match flags {
            0 => Persistent,
            1 => Ephemeral,
            2 => PersistentSequential,
            3 => EphemeralSequential,
            4 => Container,
            5 => PersistentWithTtl,
            6 => PersistentSequentialWithTtl,
            _ => return None,
        })
    }

    pub fn flags(self) -> i32 {
        use CreateMode::*;
        match self {
            Persistent => 0,
            Ephemeral => 1,
            PersistentSequential => 2,
            EphemeralSequential => 3,
            Container => 4,
            PersistentWithTtl => 5,
            PersistentSequentialWithTtl => 6,
        }
    }

    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }

    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    pub fn is_container(self) -> bool {
        self == CreateMode::Container
    }

    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

/// `Watcher.Event.EventType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum EventType {
    None = -1,
    NodeCreated = 1,
    NodeDeleted = 2,
    NodeDataChanged = 3,
    NodeChildrenChanged = 4,
    DataWatchRemoved = 5,
    ChildWatchRemoved = 6,
    PersistentWatchRemoved = 7,
}

impl EventType {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<EventType> {
        use EventType::*;
        Some(match code {
            -1 => None,
            1 => NodeCreated,
            2 => NodeDeleted,
            3 => NodeDataChanged,
            4 => NodeChildrenChanged,
            5 => DataWatchRemoved,
            6 => ChildWatchRemoved,
            7 => PersistentWatchRemoved,
            _ => return Option::None,
        })
    }
}

/// `Watcher.Event.KeeperState` (only the values a server sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum KeeperState {
    Disconnected = 0,
    SyncConnected = 3,
    AuthFailed = 4,
    ConnectedReadOnly = 5,
    Expired = -112,
    Closed = 7,
}

impl KeeperState {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// `Watcher.WatcherType` for checkWatches / removeWatches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatcherType {
    Children = 1,
    Data = 2,
    Persistent = 4,
    PersistentRecursive = 5,
    Any = 3,
}

impl WatcherType {
    pub fn from_code(code: i32) -> Option<WatcherType> {
        Some(match code {
            1 => WatcherType::Children,
            2 => WatcherType::Data,
            3 => WatcherType::Any,
            4 => WatcherType::Persistent,
            5 => WatcherType::PersistentRecursive,
            _ => return None,
        })
    }
}

/// `AddWatchMode` for addWatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddWatchMode {
    Persistent = 0,
    PersistentRecursive = 1,
}

impl AddWatchMode {
    pub fn from_code(code: i32) -> Option<AddWatchMode> {
        match code {
            0 => Some(AddWatchMode::Persistent),
            1 => Some(AddWatchMode::PersistentRecursive),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_mode_flags_round_trip() {
        for f in 0..7 {
            assert_eq!(CreateMode::from_flags(f).unwrap().flags(), f);
        }
        assert_eq!(CreateMode::from_flags(7), None);
        assert!(CreateMode::EphemeralSequential.is_sequential());
        assert!(CreateMode::EphemeralSequential.is_ephemeral());
        assert!(!CreateMode::Container.is_ephemeral());
    }
}
