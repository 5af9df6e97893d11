//! Fencing tokens, and the resource-side check that makes them useful.
//!
//! A lock alone cannot stop a holder that was paused (GC, SIGSTOP, a slow disk) past its
//! session timeout from writing after another process took the lock. A fencing token can:
//! every holder gets a number larger than every earlier holder's, passes it with each write,
//! and the resource rejects a write carrying a number lower than one it has already seen
//! (Kleppmann, "How to do distributed locking"; Chubby's sequencers).
//!
//! The token is the lock node's `czxid`, the zxid of the transaction that created it. Holders
//! are granted in node creation order, and zxids grow with every transaction (the epoch in the
//! high 32 bits grows with every leader change), so tokens strictly increase from one holder
//! to the next, across leader changes and restarts, and are comparable across lock paths.
//! The sequence suffix is not a token: it restarts when a container parent is re-created.

use std::sync::atomic::{AtomicU64, Ordering};

/// A lock holder's fencing token: the czxid of its lock node.
///
/// ```
/// use zooraft_recipes::FencingToken;
/// let older = FencingToken::new(0x1_0000_0005);
/// let newer = FencingToken::new(0x2_0000_0001); // after a leader change
/// assert!(older < newer);
/// assert_eq!(newer.get(), 0x2_0000_0001);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u64);

impl FencingToken {
    /// A token from its number (for resources that store tokens).
    pub const fn new(value: u64) -> FencingToken {
        FencingToken(value)
    }

    /// The token as a number, to store or send along with a write.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The zxid's epoch (leader term) part.
    pub const fn epoch(self) -> u32 {
        (self.0 >> 32) as u32
    }

    pub(crate) fn from_czxid(czxid: i64) -> FencingToken {
        FencingToken(czxid.max(0) as u64)
    }
}

impl std::fmt::Display for FencingToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A write was refused because a later holder's token has already been seen (or it carried
/// token 0, which no holder gets).
///
/// ```
/// use zooraft_recipes::{Fence, FencingToken};
/// let fence = Fence::new();
/// fence.check(FencingToken::new(34)).unwrap();
/// let err = fence.check(FencingToken::new(33)).unwrap_err();
/// assert_eq!(err.highest, FencingToken::new(34));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stale fencing token {offered}: {highest} has already been seen")]
pub struct StaleToken {
    /// The token the write carried.
    pub offered: FencingToken,
    /// The highest token the fence has accepted.
    pub highest: FencingToken,
}

/// The resource side of fencing: remembers the highest token seen and rejects lower ones.
///
/// Put one in front of whatever the lock protects (a file, a table, a service) and call
/// [`Fence::check`] with the writer's token before applying each write, in the same critical
/// section of the resource as the write itself. The holder's own token is accepted any number
/// of times; a token lower than the highest seen is refused.
///
/// ```
/// use zooraft_recipes::{Fence, FencingToken};
/// let fence = Fence::new();
/// assert!(fence.check(FencingToken::new(33)).is_ok()); // client 1 writes
/// assert!(fence.check(FencingToken::new(34)).is_ok()); // client 2 took the lock, writes
/// assert!(fence.check(FencingToken::new(33)).is_err()); // client 1 wakes up: refused
/// assert_eq!(fence.highest(), Some(FencingToken::new(34)));
/// ```
#[derive(Debug, Default)]
pub struct Fence {
    highest: AtomicU64,
}

impl Fence {
    /// A fence that has seen no token.
    pub const fn new() -> Fence {
        Fence {
            highest: AtomicU64::new(0),
        }
    }

    /// A fence that has already seen `highest` (restored from the resource's storage).
    ///
    /// ```
    /// use zooraft_recipes::{Fence, FencingToken};
    /// let fence = Fence::starting_at(FencingToken::new(100));
    /// assert!(fence.check(FencingToken::new(99)).is_err());
    /// ```
    pub const fn starting_at(highest: FencingToken) -> Fence {
        Fence {
            highest: AtomicU64::new(highest.0),
        }
    }

    /// Compare-and-advance: accepts `token` if no higher token has been seen, and records it
    /// as the highest; refuses it otherwise. Token 0 is no token (no ZooKeeper transaction
    /// has zxid 0) and is always refused.
    ///
    /// ```
    /// use zooraft_recipes::{Fence, FencingToken};
    /// assert!(Fence::new().check(FencingToken::new(0)).is_err());
    /// ```
    pub fn check(&self, token: FencingToken) -> Result<(), StaleToken> {
        let mut current = self.highest.load(Ordering::Acquire);
        loop {
            if token.0 == 0 || token.0 < current {
                return Err(StaleToken {
                    offered: token,
                    highest: FencingToken(current),
                });
            }
            if token.0 == current {
                return Ok(());
            }
            match self.highest.compare_exchange_weak(
                current,
                token.0,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(seen) => current = seen,
            }
        }
    }

    /// The highest token accepted so far.
    pub fn highest(&self) -> Option<FencingToken> {
        match self.highest.load(Ordering::Acquire) {
            0 => None,
            v => Some(FencingToken(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_checks_never_go_backwards() {
        let fence = std::sync::Arc::new(Fence::new());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let fence = fence.clone();
                std::thread::spawn(move || {
                    let mut accepted = 0;
                    for i in 0..1000u64 {
                        if fence.check(FencingToken::new(i * 4 + t + 1)).is_ok() {
                            accepted += 1;
                        }
                    }
                    accepted
                })
            })
            .collect();
        let accepted: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(accepted >= 1);
        assert_eq!(fence.highest(), Some(FencingToken::new(4000)));
        assert!(fence.check(FencingToken::new(1)).is_err());
    }
}
