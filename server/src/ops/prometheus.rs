//! A Prometheus text endpoint (ZooKeeper's `metricsProvider.httpPort`, conventionally
//! 7000): the `mntr` values as gauges and counters, plus request latency histograms per
//! operation. Any request path answers with the metrics, as ZooKeeper's provider does.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::view::View;
use crate::net::{Shared, BUCKETS_US};
use crate::state::ops::OpFamily;

/// Renders the metrics in Prometheus' text format.
pub fn render(shared: &Shared) -> String {
    let mut out = String::new();
    let v = View::gather(shared);
    let gauges: [(&str, &str, f64); 10] = [
        ("znode_count", "Number of znodes", v.znodes as f64),
        (
            "ephemerals_count",
            "Number of ephemeral znodes",
            v.ephemerals as f64,
        ),
        (
            "approximate_data_size",
            "Bytes of paths and data",
            v.approximate_data_size as f64,
        ),
        ("global_sessions", "Live sessions", v.sessions as f64),
        (
            "num_alive_connections",
            "Client connections on this member",
            v.connections as f64,
        ),
        ("watch_count", "Watches on this member", v.watches as f64),
        ("last_zxid", "Last applied zxid", v.last_zxid as f64),
        ("raft_term", "Current Raft term", v.raft_term as f64),
        (
            "raft_commit_index",
            "Raft commit index",
            v.commit_index as f64,
        ),
        (
            "serving",
            "1 if this member serves clients",
            v.serving as u8 as f64,
        ),
    ];
    for (name, help, v) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
    }
    let counters: [(&str, &str, u64); 5] = [
        ("packets_received", "Requests received", v.packets_received),
        ("packets_sent", "Replies sent", v.packets_sent),
        ("proposal_count", "Commands proposed to Raft", v.proposals),
        ("raft_fsyncs", "Log fsyncs", v.fsyncs),
        ("snapshot_count", "Snapshots taken", v.snapshots),
    ];
    for (name, help, v) in counters {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
        );
    }
    let _ = writeln!(out, "# HELP request_latency_seconds Request latency by operation\n# TYPE request_latency_seconds histogram");
    for family in OpFamily::ALL {
        let op = family.name();
        let h = &shared.metrics.per_op[family.index()];
        let mut cumulative = 0;
        for (b, upper) in BUCKETS_US.iter().enumerate() {
            cumulative += h.buckets[b].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "request_latency_seconds_bucket{{op=\"{op}\",le=\"{}\"}} {cumulative}",
                *upper as f64 / 1e6
            );
        }
        cumulative += h.buckets[BUCKETS_US.len()].load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "request_latency_seconds_bucket{{op=\"{op}\",le=\"+Inf\"}} {cumulative}"
        );
        let _ = writeln!(
            out,
            "request_latency_seconds_sum{{op=\"{op}\"}} {}",
            h.sum_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(
            out,
            "request_latency_seconds_count{{op=\"{op}\"}} {}",
            h.count.load(Ordering::Relaxed)
        );
    }
    out
}

/// The most of a request head read before answering anyway.
const MAX_REQUEST_HEAD: usize = 16 * 1024;

/// Reads the request head up to its blank line (a client may send it in several segments;
/// answering and closing after the first would reset the connection under the client's
/// later writes, and its read of the answer with it). The request itself is not looked at.
async fn read_request_head(stream: &mut TcpStream) {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
        let ended =
            head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n");
        if ended || head.len() >= MAX_REQUEST_HEAD {
            return;
        }
    }
}

/// Serves the endpoint until shutdown.
pub async fn serve(
    shared: Arc<Shared>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut stream, _)) = accepted else { continue };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_secs(5),
                        read_request_head(&mut stream),
                    )
                    .await;
                    let body = render(&shared);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(body.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
            _ = shutdown.changed() => return,
        }
    }
}
