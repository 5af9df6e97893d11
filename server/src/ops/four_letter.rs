//! Four-letter words on the client port, in ZooKeeper 3.8's formats so that existing
//! monitoring (`echo mntr | nc`, kazoo's `server_version()`, Nagios checks, exporters)
//! reads zooraft unchanged. Words outside `4lw.commands.whitelist` get ZooKeeper's refusal
//! text; words that need a serving server say so while this member is not serving.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::UNIX_EPOCH;

use super::catalogue::{self, Value};
use super::view::View;
use crate::net::ClientPort;
use crate::raft::{Asked, Role, Transfer};
use crate::state::snapshot::tree_digest;
use crate::stats::QUANTILES;

/// The version zooraft reports: the ZooKeeper protocol level it implements, then its own.
pub const VERSION: &str = concat!("3.8.0-zooraft-", env!("CARGO_PKG_VERSION"));

const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests\n";

/// ZooKeeper's refusal, and after it why this member is held back when a data directory
/// that lost what it acknowledged (its own or a peer's) explains it (`raft/trust.rs`).
fn not_serving(shared: &ClientPort) -> String {
    match shared.replica.status.held_back.lock().as_deref() {
        Some(why) => format!("{NOT_SERVING}zooraft: {why}\n"),
        None => NOT_SERVING.to_string(),
    }
}

pub(super) fn full_version() -> String {
    format!("{VERSION}, built on unknown")
}

/// Answers one four-letter word.
pub fn answer(shared: &ClientPort, word: &[u8; 4], peer: SocketAddr) -> String {
    let word = String::from_utf8_lossy(word).to_string();
    if !crate::config::ALL_FOUR_LETTER_WORDS.contains(&word.as_str()) {
        tracing::info!(%peer, "unknown four-letter word {word:?}");
        return String::new();
    }
    if !shared.replica.config().four_letter_words.allows(&word) {
        return format!("{word} is not executed because it is not in the whitelist.\n");
    }
    let serving = shared.replica.is_serving();
    let read_only = shared.replica.is_read_only();
    match word.as_str() {
        "ruok" => "imok".to_string(),
        // A member whose disk is full takes no writes (see `raft/disk_space.rs`).
        "isro" => {
            let disk_full = shared.replica.status.disk_full.load(Ordering::Acquire);
            if serving && !disk_full {
                "rw"
            } else if read_only || serving {
                "ro"
            } else {
                "null"
            }
            .to_string()
        }
        "conf" => conf(shared),
        "envi" => super::environment::envi(&full_version(), shared.replica.me),
        _ if !serving && !read_only => not_serving(shared),
        "srvr" => srvr(shared, false),
        "stat" => srvr(shared, true),
        "mntr" => mntr(shared),
        "cons" => cons(shared),
        "crst" => {
            reset_connection_stats(shared);
            "Connection stats reset.\n".to_string()
        }
        "srst" => {
            reset_server_stats(shared);
            "Server stats reset.\n".to_string()
        }
        "wchs" => {
            let w = shared.watches.lock();
            format!(
                "{} connections watching {} paths\nTotal watches:{}\n",
                w.watching_connections(),
                w.watched_paths(),
                w.data_watch_count()
            )
        }
        "wchc" => {
            let by_conn = shared.watches.lock().by_connection();
            let sessions = sessions_by_conn(shared);
            let mut out = String::new();
            for (conn, paths) in by_conn {
                let session = sessions.get(&conn).copied().unwrap_or(0);
                let _ = writeln!(out, "0x{session:x}");
                for p in paths {
                    let _ = writeln!(out, "\t{p}");
                }
            }
            // ZooKeeper closes the report with a blank line (a lone one when empty).
            out.push('\n');
            out
        }
        "wchp" => {
            let by_path = shared.watches.lock().by_path();
            let sessions = sessions_by_conn(shared);
            let mut out = String::new();
            for (p, conns) in by_path {
                let _ = writeln!(out, "{p}");
                for c in conns {
                    let _ = writeln!(out, "\t0x{:x}", sessions.get(&c).copied().unwrap_or(0));
                }
            }
            out.push('\n');
            out
        }
        "dump" => dump(shared),
        "ydld" | "rqld" => leadership(shared, &word),
        "hash" => {
            let state = shared.replica.state.read();
            format!("{:x}: {:x}\n", state.last_zxid, tree_digest(&state.tree))
        }
        "dirs" => {
            let size = dir_size(&shared.replica.config().data_dir);
            // One directory holds both (ZooKeeper's dataLogDir defaults to dataDir, and then
            // reports the one size twice).
            format!("datadir_size: {size}\nlogdir_size: {size}\n")
        }
        _ => String::new(),
    }
}

/// `crst`: every connection's figures from zero.
pub(super) fn reset_connection_stats(shared: &ClientPort) {
    shared.registry.for_each(|_, e| {
        let s = &e.stats;
        s.received.store(0, Ordering::Relaxed);
        s.sent.store(0, Ordering::Relaxed);
        s.min_latency_us.store(0, Ordering::Relaxed);
        s.max_latency_us.store(0, Ordering::Relaxed);
        s.total_latency_us.store(0, Ordering::Relaxed);
        s.latency_count.store(0, Ordering::Relaxed);
    });
}

/// `srst`: the server's figures from zero.
pub(super) fn reset_server_stats(shared: &ClientPort) {
    shared.metrics.reset();
    shared.replica.counters.reset();
    shared.watches.lock().fired.reset();
}

/// `ydld` (the leader yields) and `rqld` (this member asks to lead): see
/// `raft::transfer`.
fn leadership(shared: &ClientPort, word: &str) -> String {
    let what = if word == "ydld" {
        Transfer::Yield
    } else {
        Transfer::Request
    };
    match crate::raft::ask_transfer(&shared.replica, what) {
        Asked::Started(text) | Asked::Refused(text) => text,
        Asked::NotServing => NOT_SERVING.to_string(),
    }
}

/// Each connection's session, read once for a whole report (not once per watch).
pub(super) fn sessions_by_conn(shared: &ClientPort) -> std::collections::HashMap<u64, i64> {
    let mut sessions = std::collections::HashMap::with_capacity(shared.registry.len());
    shared.registry.for_each(|id, e| {
        sessions.insert(id, e.session);
    });
    sessions
}

pub(super) fn dir_size(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => total += dir_size(&e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// The average latency as ZooKeeper prints it: rounded to 4 decimals (`BigDecimal.setScale(4,
/// HALF_UP)`), then Java's `Double.toString`: `0.0`, `1.5`, `3.5806`, and `1.0E-4` below
/// 10^-3.
fn java_avg(v: f64) -> String {
    let rounded = (v * 10_000.0).round() / 10_000.0;
    if rounded != 0.0 && rounded.abs() < 1e-3 {
        let sci = format!("{rounded:E}");
        let (mantissa, exp) = sci.split_once('E').unwrap_or((&sci, "0"));
        let dot = if mantissa.contains('.') { "" } else { ".0" };
        return format!("{mantissa}{dot}E{exp}");
    }
    let plain = rounded.to_string();
    if plain.contains('.') {
        plain
    } else {
        format!("{plain}.0")
    }
}

fn srvr(shared: &ClientPort, with_clients: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Zookeeper version: {}", full_version());
    if with_clients {
        out.push_str("Clients:\n");
        shared.registry.for_each(|_, e| {
            let _ = writeln!(
                out,
                " /{}[1](queued={},recved={},sent={})",
                e.peer,
                e.stats.outstanding.load(Ordering::Relaxed),
                e.stats.received.load(Ordering::Relaxed),
                e.stats.sent.load(Ordering::Relaxed)
            );
        });
        out.push('\n');
    }
    let v = View::gather(shared);
    let (min, avg, max) = v.latency_ms;
    let _ = writeln!(out, "Latency min/avg/max: {min}/{}/{max}", java_avg(avg));
    let _ = writeln!(out, "Received: {}", v.packets_received);
    let _ = writeln!(out, "Sent: {}", v.packets_sent);
    let _ = writeln!(out, "Connections: {}", v.connections);
    let _ = writeln!(out, "Outstanding: {}", v.outstanding);
    let _ = writeln!(out, "Zxid: 0x{:x}", v.last_zxid);
    let _ = writeln!(out, "Mode: {}", v.mode);
    let _ = writeln!(out, "Node count: {}", v.znodes);
    if v.role == Role::Leader {
        out.push_str("Proposal sizes last/min/max: -1/-1/-1\n");
    }
    out
}

fn mntr(shared: &ClientPort) -> String {
    let mut out = String::new();
    for f in catalogue::gather(shared, &full_version()) {
        let key = f.key;
        match f.value {
            Value::Text(t) => {
                let _ = writeln!(out, "zk_{key}\t{t}");
            }
            Value::Int(v, _) => {
                let _ = writeln!(out, "zk_{key}\t{v}");
            }
            Value::Float(v) => {
                let _ = writeln!(out, "zk_{key}\t{}", java_avg(v));
            }
            Value::Zxid(z) => {
                let _ = writeln!(out, "zk_{key}\t0x{z:x}");
            }
            Value::Summary(s) => {
                let _ = writeln!(out, "zk_avg_{key}\t{}", java_avg(s.avg()));
                let _ = writeln!(out, "zk_min_{key}\t{}", s.min);
                let _ = writeln!(out, "zk_max_{key}\t{}", s.max);
                let _ = writeln!(out, "zk_cnt_{key}\t{}", s.count);
                let _ = writeln!(out, "zk_sum_{key}\t{}", s.sum);
                for (q, (_, prefix)) in s.quantiles.iter().flatten().zip(QUANTILES) {
                    let _ = writeln!(out, "zk_{prefix}_{key}\t{q}");
                }
            }
        }
    }
    out
}

fn conf(shared: &ClientPort) -> String {
    let c = shared.replica.config();
    let mut out = String::new();
    let _ = writeln!(out, "clientPort={}", c.client_port);
    let _ = writeln!(out, "secureClientPort=-1");
    let _ = writeln!(out, "dataDir={}", c.data_dir.display());
    let size = dir_size(&c.data_dir);
    let _ = writeln!(out, "dataDirSize={size}");
    let _ = writeln!(out, "dataLogDir={}", c.data_dir.display());
    let _ = writeln!(out, "dataLogSize={size}");
    let _ = writeln!(out, "tickTime={}", c.tick_time_ms);
    let _ = writeln!(out, "maxClientCnxns={}", c.max_client_cnxns);
    let _ = writeln!(out, "minSessionTimeout={}", c.min_session_timeout_ms);
    let _ = writeln!(out, "maxSessionTimeout={}", c.max_session_timeout_ms);
    let _ = writeln!(out, "clientPortListenBacklog=-1");
    let _ = writeln!(
        out,
        "serverId={}",
        if c.is_standalone() { 0 } else { c.my_id }
    );
    if !c.is_standalone() {
        let _ = writeln!(out, "electionAlg=raft");
        let _ = writeln!(
            out,
            "peerType={}",
            if c.is_observer() {
                "observer"
            } else {
                "participant"
            }
        );
        // As /zookeeper/config would state it first (version 0: zoo.cfg's, not committed).
        let _ = writeln!(out, "{}", crate::raft::initial_config(c, 0).text());
    }
    out
}

fn cons(shared: &ClientPort) -> String {
    let mut out = String::new();
    shared.registry.for_each(|_, e| {
        let s = &e.stats;
        let count = s.latency_count.load(Ordering::Relaxed);
        let avg = s
            .total_latency_us
            .load(Ordering::Relaxed)
            .checked_div(count)
            .unwrap_or(0)
            / 1000;
        let est = e
            .connected_at
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        // ZooKeeper's key order; lcxid appears only once the client has been answered.
        let _ = write!(
            out,
            " /{}[1](queued={},recved={},sent={},sid=0x{:x},lop={},est={},to={}",
            e.peer,
            s.outstanding.load(Ordering::Relaxed),
            s.received.load(Ordering::Relaxed),
            s.sent.load(Ordering::Relaxed),
            e.session,
            s.last_op.lock(),
            est,
            s.timeout_ms.load(Ordering::Relaxed),
        );
        let last_cxid = s.last_cxid.load(Ordering::Relaxed);
        if last_cxid >= 0 {
            let _ = write!(out, ",lcxid=0x{last_cxid:x}");
        }
        let _ = write!(
            out,
            ",lzxid=0x{:x},lresp={},llat={},minlat={},avglat={},maxlat={}",
            s.last_zxid.load(Ordering::Relaxed),
            s.last_response_ms.load(Ordering::Relaxed),
            s.last_latency_ms.load(Ordering::Relaxed),
            s.min_latency_us.load(Ordering::Relaxed) / 1000,
            avg,
            s.max_latency_us.load(Ordering::Relaxed) / 1000,
        );
        auth_ids(&mut out, &e.pipeline.lock().auth);
        out.push_str(")\n");
    });
    out.push('\n');
    out
}

/// zooraft's addition to `cons` (ZooKeeper 3.8 prints no auth ids): `,auth=` and the
/// connection's ids other than its `ip`, `scheme:id` joined by `+`, with the characters that
/// would break the line's `key=value,...` form (`,()+%` and whitespace) percent-encoded.
/// Nothing at all for a connection with no other id, so its line is ZooKeeper's.
fn auth_ids(out: &mut String, ids: &[jute::Id]) {
    let mut first = true;
    for id in ids.iter().filter(|id| id.scheme != "ip") {
        out.push_str(if first { ",auth=" } else { "+" });
        first = false;
        for c in id
            .scheme
            .chars()
            .chain(std::iter::once(':'))
            .chain(id.id.chars())
        {
            if matches!(c, ',' | '(' | ')' | '+' | '%') || c.is_whitespace() || c.is_control() {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    let _ = write!(out, "%{b:02X}");
                }
            } else {
                out.push(c);
            }
        }
    }
}

fn dump(shared: &ClientPort) -> String {
    let state = shared.replica.state.read();
    let mut out = String::from("SessionTracker dump:\n");
    let _ = writeln!(out, "Global Sessions({}):", state.sessions.len());
    for (id, s) in &state.sessions {
        let _ = writeln!(out, "0x{id:x}\t{}ms", s.timeout);
    }
    out.push_str("ephemeral nodes dump:\n");
    let mut sessions: Vec<_> = state.tree.ephemerals_by_session().collect();
    sessions.sort_by_key(|(s, _)| *s);
    let _ = writeln!(out, "Sessions with Ephemerals ({}):", sessions.len());
    for (s, paths) in sessions {
        let _ = writeln!(out, "0x{s:x}:");
        for p in paths {
            let _ = writeln!(out, "\t{p}");
        }
    }
    out.push_str("Connections dump:\n");
    let _ = writeln!(out, "Connections Sets ({}):", shared.registry.len());
    out
}

#[cfg(test)]
mod tests {
    use super::{auth_ids, java_avg};

    #[test]
    fn cons_auth_ids_stay_one_field() {
        let id = |scheme: &str, id: &str| jute::Id {
            scheme: scheme.into(),
            id: id.into(),
        };
        let mut out = String::new();
        auth_ids(&mut out, &[id("ip", "127.0.0.1")]);
        assert_eq!(out, "");
        auth_ids(
            &mut out,
            &[
                id("ip", "127.0.0.1"),
                id("sasl", "bob@EXAMPLE.COM"),
                id("x509", "CN=a b,O=c(d)"),
            ],
        );
        assert_eq!(out, ",auth=sasl:bob@EXAMPLE.COM+x509:CN=a%20b%2CO=c%28d%29");
    }

    #[test]
    fn average_latency_prints_as_java_does() {
        assert_eq!(java_avg(0.0), "0.0");
        assert_eq!(java_avg(2.0), "2.0");
        assert_eq!(java_avg(1.5), "1.5");
        assert_eq!(java_avg(3.580_645), "3.5806");
        assert_eq!(java_avg(0.333_333), "0.3333");
        assert_eq!(java_avg(0.000_16), "2.0E-4");
        assert_eq!(java_avg(0.000_04), "0.0");
        assert_eq!(java_avg(12_345.678_91), "12345.6789");
    }
}
