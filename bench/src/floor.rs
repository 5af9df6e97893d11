//! The machine's own floor, measured in the same run as the figures it bounds: what one
//! durable append costs on the data directory's disk (write, then `fdatasync`), and what a
//! loopback round trip costs (TCP, `TCP_NODELAY`, one small message each way).
//!
//! No server can acknowledge a write faster than one durable append, and a lock handoff
//! needs at least one durable write (the release's delete) and about three round trips
//! (delete and its reply, the watch event, the next holder's read): printed next to each
//! figure, these say how far it is from what the hardware allows.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Instant;

/// Percentiles of a floor measurement, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Floor {
    pub samples: usize,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl Floor {
    fn of(mut us: Vec<f64>) -> Floor {
        us.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((us.len() as f64 - 1.0) * q).round() as usize;
            us.get(i).copied().unwrap_or(0.0)
        };
        Floor {
            samples: us.len(),
            p50_us: at(0.5),
            p99_us: at(0.99),
        }
    }
}

/// `count` appends of `bytes` bytes to a new file in `dir`, each followed by `fdatasync`
/// (what a log writer does for a lone write); the file is removed afterwards.
pub fn durable_append(dir: &Path, count: usize, bytes: usize) -> io::Result<Floor> {
    let path = dir.join(format!(".zooraft-bench-floor-{}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)?;
        let block = vec![0x5au8; bytes];
        let mut us = Vec::with_capacity(count);
        for _ in 0..count {
            let started = Instant::now();
            f.write_all(&block)?;
            f.sync_data()?;
            us.push(started.elapsed().as_secs_f64() * 1e6);
        }
        Ok(Floor::of(us))
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// `count` round trips of a 64-byte message over a loopback TCP connection to an echo thread.
pub fn loopback_round_trip(count: usize) -> io::Result<Floor> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; 64];
        loop {
            match s.read_exact(&mut buf) {
                Ok(()) => s.write_all(&buf)?,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    });
    let mut c = TcpStream::connect(addr)?;
    c.set_nodelay(true)?;
    let msg = [0x33u8; 64];
    let mut back = [0u8; 64];
    let mut us = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        c.write_all(&msg)?;
        c.read_exact(&mut back)?;
        us.push(started.elapsed().as_secs_f64() * 1e6);
    }
    drop(c);
    echo.join()
        .map_err(|_| io::Error::other("the echo thread panicked"))??;
    Ok(Floor::of(us))
}

/// The floor of a lock handoff: one durable append and three loopback round trips (p50s).
pub fn handoff_floor_us(append: &Floor, round_trip: &Floor) -> f64 {
    append.p50_us + 3.0 * round_trip.p50_us
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_samples() {
        let f = Floor::of((1..=100).map(f64::from).collect());
        assert_eq!((f.samples, f.p50_us, f.p99_us), (100, 51.0, 99.0));
        assert_eq!(Floor::of(Vec::new()).p50_us, 0.0);
    }

    #[test]
    fn the_floor_is_measured() {
        let dir = tempfile::tempdir().expect("temp dir");
        let append = durable_append(dir.path(), 20, 100).expect("appends");
        assert_eq!(append.samples, 20);
        assert!(append.p50_us > 0.0 && append.p99_us >= append.p50_us);
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            0,
            "cleaned up"
        );
        let rtt = loopback_round_trip(200).expect("round trips");
        assert!(rtt.p50_us > 0.0 && rtt.p99_us >= rtt.p50_us);
        assert!(handoff_floor_us(&append, &rtt) > append.p50_us);
    }
}
