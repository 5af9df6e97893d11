//! Free loopback ports for the servers a test or a bench run starts.
//!
//! A port is handed to a server that binds it later, and a member that is killed and
//! restarted binds the same ports again: in between they are free, and anything else
//! that looks for a free port may take them. Within one process a counter never hands a
//! port out twice. Across processes (two test suites side by side, a bench beside a test
//! run) each process reserves blocks of ports with an advisory lock on a file per block
//! (`$TMPDIR/zooraft-kit-ports/`), held until it exits (the kernel drops the lock of a
//! process that dies, however it dies), and hands out only ports of its own blocks. A
//! port is still checked by binding it, as programs outside the kit may hold it.
//!
//! Ports come from below the kernel's ephemeral range when it leaves room there: a port
//! from inside it could meanwhile become the source port of any outgoing connection (the
//! tests and the load generator open thousands), and the server would then fail with
//! "Address already in use".

use std::fs::File;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Mutex;

/// The first port handed out when the ephemeral range leaves room below it.
const LOW: u32 = 10_000;
/// Ports per reserved block.
const BLOCK: u32 = 200;

/// This process's blocks: the lock files it holds, and where the current block is at.
struct Reserved {
    /// Held open (locked) until the process exits.
    locks: Vec<File>,
    /// The next port to try and the end of its block, once a block is held.
    next: Option<(u32, u32)>,
}

static RESERVED: Mutex<Reserved> = Mutex::new(Reserved::new());

/// A free TCP port on 127.0.0.1, for a server to take (it is checked, then released).
pub fn try_free_port() -> std::io::Result<u16> {
    let high = ephemeral_range_start().min(u32::from(u16::MAX));
    if high >= LOW + 2 * BLOCK {
        let mut reserved = RESERVED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(port) = reserved.free_port(high) {
            return Ok(port);
        }
    }
    // No block to be had (or no room below the ephemeral range): any port the kernel picks.
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// [`try_free_port`] for tests: panics when no port can be bound on loopback.
pub fn free_port() -> u16 {
    try_free_port().expect("bind a port on loopback")
}

impl Reserved {
    const fn new() -> Reserved {
        Reserved {
            locks: Vec::new(),
            next: None,
        }
    }

    /// The next port of this process's blocks that can be bound now; `None` once no block
    /// is to be had.
    fn free_port(&mut self, high: u32) -> Option<u16> {
        while let Some(port) = self.take_port(high) {
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Some(port);
            }
        }
        None
    }

    /// The next port of this process's blocks, reserving a new block when the current one
    /// is used up; `None` once every block below `high` is someone else's.
    fn take_port(&mut self, high: u32) -> Option<u16> {
        loop {
            if let Some((next, end)) = self.next {
                if next < end {
                    self.next = Some((next + 1, end));
                    return Some(next as u16);
                }
            }
            let start = self.reserve_block(high)?;
            self.next = Some((start, start + BLOCK));
        }
    }

    /// Locks a block nobody else holds, starting the search at one picked by process id
    /// (so processes mostly try different blocks first); its first port.
    fn reserve_block(&mut self, high: u32) -> Option<u32> {
        let blocks = (high - LOW) / BLOCK;
        let dir = lock_dir()?;
        let first = std::process::id().wrapping_mul(7_919) % blocks;
        for i in 0..blocks {
            let block = (first + i) % blocks;
            let start = LOW + block * BLOCK;
            if self.next.is_some_and(|(_, end)| end == start + BLOCK) {
                continue; // the block just used up
            }
            let Ok(file) = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(format!("{start}.lock")))
            else {
                continue;
            };
            // SAFETY: flock(2) on a descriptor this function owns (`file` is open); no
            // memory is passed.
            let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if locked == 0 {
                self.locks.push(file);
                return Some(start);
            }
        }
        None
    }
}

/// Where the blocks' lock files live (made if missing); `None` if it cannot be made.
fn lock_dir() -> Option<PathBuf> {
    let dir = std::env::temp_dir().join("zooraft-kit-ports");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// The first port of the kernel's ephemeral range (Linux's default 32768 if unreadable).
fn ephemeral_range_start() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()))
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top of the range the tests reserve blocks below.
    fn high() -> u32 {
        ephemeral_range_start().min(u32::from(u16::MAX))
    }

    /// The first port of the block `port` is in.
    fn block_of(port: u16) -> u32 {
        LOW + (u32::from(port) - LOW) / BLOCK * BLOCK
    }

    /// True when a second open file description can lock `block`'s file, as another
    /// process could.
    fn lockable_by_another(block: u32) -> bool {
        let path = lock_dir()
            .expect("lock directory")
            .join(format!("{block}.lock"));
        let other = File::options()
            .write(true)
            .open(path)
            .expect("open the lock file");
        // SAFETY: flock(2) on a descriptor this test owns; no memory is passed.
        unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    }

    // The tests use blocks of their own (a `Reserved` each), so that the other tests of
    // this binary, taking ports at the same time, cannot be the reason they pass or fail.

    #[test]
    fn ports_are_handed_out_once_from_blocks_nobody_else_can_take() {
        let mut reserved = Reserved::new();
        let count = BLOCK as usize + 20;
        let ports: Vec<u16> = (0..count)
            .map(|_| reserved.free_port(high()).expect("a port"))
            .collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), count, "{ports:?}");
        let mut blocks: Vec<u32> = ports.iter().map(|p| block_of(*p)).collect();
        blocks.dedup();
        assert!(
            blocks.len() >= 2,
            "{count} ports from one block: {blocks:?}"
        );
        assert_eq!(reserved.locks.len(), blocks.len());
        for block in blocks {
            assert!(
                !lockable_by_another(block),
                "another holder could take block {block}"
            );
        }
    }

    #[test]
    fn a_port_someone_listens_on_is_skipped() {
        let mut reserved = Reserved::new();
        let first = reserved.free_port(high()).expect("a port");
        let taken = first + 1;
        let _listener = TcpListener::bind(("127.0.0.1", taken));
        let next = reserved.free_port(high()).expect("a port");
        assert!(next != first && next != taken, "{first} then {next}");
    }

    #[test]
    fn a_block_is_free_again_once_its_holder_is_gone() {
        let mut reserved = Reserved::new();
        let port = reserved.free_port(high()).expect("a port");
        assert!(!lockable_by_another(block_of(port)));
        drop(reserved);
        assert!(lockable_by_another(block_of(port)));
    }
}
