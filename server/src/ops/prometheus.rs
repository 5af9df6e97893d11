//! A Prometheus text endpoint (ZooKeeper's `metricsProvider.httpPort`, conventionally
//! 7000): the `mntr` figures under ZooKeeper's Prometheus names (gauges, counters, and
//! summaries with `quantile` labels, `_sum` and `_count`), plus request latency histograms
//! per operation. Any request path answers with the metrics, as ZooKeeper's provider does.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::catalogue::{self, Kind, Value};
use super::four_letter::VERSION;
use crate::net::{Shared, BUCKETS_US};
use crate::state::opcodes::OpFamily;
use crate::stats::QUANTILES;

/// Renders the metrics in Prometheus' text format.
pub fn render(shared: &Shared) -> String {
    let mut out = String::new();
    for f in catalogue::gather(shared, VERSION) {
        let (name, help) = (f.key, f.help);
        match f.value {
            Value::Text(_) => {}
            Value::Int(v, kind) => {
                let kind = match kind {
                    Kind::Gauge => "gauge",
                    Kind::Counter => "counter",
                };
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
                );
            }
            Value::Float(v) => {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
            }
            Value::Zxid(v) => {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
            }
            Value::Summary(s) => {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} summary");
                for (v, (q, _)) in s.quantiles.iter().flatten().zip(QUANTILES) {
                    let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {v}");
                }
                let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", s.sum, s.count);
            }
        }
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
