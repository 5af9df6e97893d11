//! Free loopback ports for the servers a test or a bench run starts.
//!
//! Ports come from below the kernel's ephemeral range when it leaves room there: a port
//! from inside it could meanwhile become the source port of any outgoing connection (the
//! tests and the load generator open thousands), and the server would then fail with
//! "Address already in use". A per-process counter never hands a port out twice, and the
//! start is spread by process id so that test binaries and benches running side by side
//! mostly stay apart.

use std::net::TcpListener;

/// The first port handed out when the ephemeral range leaves room below it.
const LOW: u32 = 10_000;

/// A free TCP port on 127.0.0.1, for a server to take (it is checked, then released).
pub fn try_free_port() -> std::io::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let high = ephemeral_range_start().min(u32::from(u16::MAX));
    if high > LOW + 1_000 {
        let span = high - LOW;
        let offset = std::process::id().wrapping_mul(7_919);
        for _ in 0..span {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = (LOW + offset.wrapping_add(n) % span) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// [`try_free_port`] for tests: panics when no port can be bound on loopback.
pub fn free_port() -> u16 {
    try_free_port().expect("bind a port on loopback")
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

    #[test]
    fn ports_are_handed_out_once_and_can_be_bound() {
        let ports: Vec<u16> = (0..20).map(|_| free_port()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len(), "{ports:?}");
        for p in ports {
            TcpListener::bind(("127.0.0.1", p)).expect("a handed-out port is free");
        }
    }
}
