//! ZooKeeper's four-letter words, as the kit asks them: whether a server serves (`srvr`
//! names a Mode only once it does; `ruok` answers `imok` before), its role, its figures.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Sends a four-letter word and returns the whole answer (the server closes after it).
pub fn four_letter_word(addr: SocketAddr, word: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(word.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// The Mode a `srvr` answer names (`standalone`, `leader`, `follower`, `observer`).
pub fn mode_in(srvr: &str) -> Option<String> {
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(|m| m.trim().to_string())
}

/// One figure of a `mntr` answer (tab-separated `key value` lines).
pub fn figure_in(mntr: &str, key: &str) -> Option<String> {
    mntr.lines().find_map(|l| {
        let (k, v) = l.split_once('\t')?;
        (k == key).then(|| v.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_as_zookeeper_writes_them() {
        let srvr = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n";
        assert_eq!(mode_in(srvr).as_deref(), Some("follower"));
        assert_eq!(mode_in("imok"), None);
        let mntr = "zk_version\t3.8.0\nzk_disk_full\t0\n";
        assert_eq!(figure_in(mntr, "zk_disk_full").as_deref(), Some("0"));
        assert_eq!(figure_in(mntr, "zk_disk"), None);
    }
}
