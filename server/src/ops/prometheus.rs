//! A Prometheus text endpoint (ZooKeeper's `metricsProvider.httpPort`, conventionally
//! 7000): the `mntr` figures under ZooKeeper's Prometheus names (gauges, counters, and
//! summaries with `quantile` labels, `_sum` and `_count`), plus request latency histograms
//! per operation. Any request path answers with the metrics, as ZooKeeper's provider does.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hyper::StatusCode;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::catalogue::{self, Kind, Value};
use super::four_letter::VERSION;
use super::http;
use crate::net::{ClientPort, BUCKETS_US};
use crate::state::opcodes::OpFamily;
use crate::stats::QUANTILES;

/// Renders the metrics in Prometheus' text format.
pub fn render(shared: &ClientPort) -> String {
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

/// Serves the endpoint until shutdown: any path, any method, answers with the metrics.
pub async fn serve(
    shared: Arc<ClientPort>,
    listener: TcpListener,
    shutdown: watch::Receiver<bool>,
) {
    let handler: http::Handler = Arc::new(move |_request, _peer| {
        let shared = shared.clone();
        Box::pin(async move {
            http::answer(StatusCode::OK, "text/plain; version=0.0.4", render(&shared))
        })
    });
    http::serve("metrics", listener, http::Mode::Plain, handler, shutdown).await;
}
