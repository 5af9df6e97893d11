//! zooraft's Prometheus endpoint (`metricsProvider.httpPort`, as ZooKeeper's
//! PrometheusMetricsProvider): HTTP framing, the text exposition format, request latency
//! histograms that count exactly the requests a client made, and gauges that agree with
//! `mntr`.
//!
//! Scrapers are strict about the format (one TYPE per family, before its samples, valid
//! names and labels, cumulative buckets), so the whole exposition is parsed and checked, not
//! just the lines this test reads.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use zooraft_tests::rt::{runtime, within};
use zooraft_tests::{free_port, ServerKind, TestServer};

use crate::{connect, mntr, mntr_u64, persistent, WAIT};

/// GETs `path` from 127.0.0.1:`port`; returns (status line, headers, body).
fn http_get(port: u16, path: &str) -> (String, Vec<String>, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).expect("send request");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read response");
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {raw:?}"));
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default().to_string();
    let headers: Vec<String> = lines.map(str::to_string).collect();
    if let Some(len) = headers.iter().find_map(|h| {
        h.to_ascii_lowercase()
            .strip_prefix("content-length:")
            .map(|v| v.trim().to_string())
    }) {
        assert_eq!(
            len.parse::<usize>().ok(),
            Some(body.len()),
            "Content-Length"
        );
    }
    (status, headers, body.to_string())
}

/// A request head sent in two segments is answered only once it is complete (an endpoint
/// that answers and closes after the first segment resets the client's connection).
fn partial_request_waits(port: u16) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .expect("send the first segment");
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("read timeout");
    let mut first = [0u8; 64];
    match s.read(&mut first) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => panic!("answered before the request head ended: {other:?}"),
    }
    s.write_all(b"\r\n").expect("send the blank line");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read the answer");
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer:.200}");
    assert!(answer.contains("# TYPE znode_count gauge"), "{answer:.200}");
}

/// One sample line: name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn valid_metric_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses and checks Prometheus' text exposition format (0.0.4): HELP and TYPE at most once
/// per family and before its samples, valid names, labels and values. Returns the samples
/// and each family's type.
fn parse_prometheus(text: &str) -> (Vec<Sample>, BTreeMap<String, String>) {
    assert!(text.ends_with('\n'), "the exposition ends with a newline");
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut helps: BTreeSet<String> = BTreeSet::new();
    let mut seen_samples: BTreeSet<String> = BTreeSet::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            assert!(valid_metric_name(name), "HELP name {name:?}");
            assert!(!help.is_empty(), "HELP text for {name}");
            assert!(helps.insert(name.to_string()), "second HELP for {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .split_once(' ')
                .unwrap_or_else(|| panic!("TYPE line {line:?}"));
            assert!(valid_metric_name(name), "TYPE name {name:?}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "TYPE {kind:?} for {name}"
            );
            assert!(
                !seen_samples.contains(name),
                "TYPE for {name} after its samples"
            );
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "second TYPE for {name}"
            );
            continue;
        }
        assert!(
            !line.starts_with('#') || line.starts_with("# "),
            "comment {line:?}"
        );
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("sample line {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("value {v:?} in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("labels in {line:?}"));
                let mut labels = BTreeMap::new();
                for pair in body.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = pair
                        .split_once('=')
                        .unwrap_or_else(|| panic!("label {pair:?} in {line:?}"));
                    assert!(valid_metric_name(k) && !k.contains(':'), "label name {k:?}");
                    let v = v
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .unwrap_or_else(|| panic!("label value {v:?} is not quoted"));
                    assert!(labels.insert(k.to_string(), v.to_string()).is_none());
                }
                (name, labels)
            }
        };
        assert!(valid_metric_name(name), "sample name {name:?}");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s).filter(|f| {
                    types
                        .get(*f)
                        .is_some_and(|t| t == "histogram" || t == "summary")
                })
            })
            .unwrap_or(name);
        assert!(
            types.contains_key(family),
            "sample {name} has no TYPE line before it"
        );
        seen_samples.insert(family.to_string());
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    (samples, types)
}

fn sample<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    samples.iter().find(|s| {
        s.name == name
            && labels.len() == s.labels.len()
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
    })
}

/// Checks each `op`'s histogram: cumulative buckets in increasing `le`, non-decreasing
/// counts, `+Inf` equal to `_count`. Returns op → count.
fn check_histograms(samples: &[Sample], family: &str) -> BTreeMap<String, f64> {
    let mut by_op: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| s.name == format!("{family}_bucket"))
    {
        let op = s.labels.get("op").expect("op label").clone();
        let le = s.labels.get("le").expect("le label");
        let le: f64 = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap_or_else(|_| panic!("le {le:?}"))
        };
        by_op.entry(op).or_default().push((le, s.value));
    }
    assert!(!by_op.is_empty(), "no {family}_bucket samples");
    let mut counts = BTreeMap::new();
    for (op, buckets) in by_op {
        assert!(buckets.len() >= 2, "{op}: {buckets:?}");
        for w in buckets.windows(2) {
            assert!(w[0].0 < w[1].0, "{op}: le not increasing {buckets:?}");
            assert!(w[0].1 <= w[1].1, "{op}: bucket counts decrease {buckets:?}");
        }
        let (last_le, inf) = *buckets.last().expect("a bucket");
        assert!(last_le.is_infinite(), "{op}: last bucket is +Inf");
        let count = sample(samples, &format!("{family}_count"), &[("op", &op)])
            .unwrap_or_else(|| panic!("{family}_count for {op}"))
            .value;
        let sum = sample(samples, &format!("{family}_sum"), &[("op", &op)])
            .unwrap_or_else(|| panic!("{family}_sum for {op}"))
            .value;
        assert_eq!(inf, count, "{op}: +Inf bucket equals _count");
        assert!(sum >= 0.0 && (count > 0.0 || sum == 0.0), "{op}: sum {sum}");
        counts.insert(op, count);
    }
    counts
}

#[test]
fn prometheus_endpoint_zooraft() {
    let metrics_port = free_port();
    let server = TestServer::builder(ServerKind::Zooraft)
        .config("metricsProvider.httpPort", &metrics_port.to_string())
        .start();
    let (status, headers, body) = http_get(metrics_port, "/metrics");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(
        headers.iter().any(|h| h
            .to_ascii_lowercase()
            .starts_with("content-type: text/plain")),
        "{headers:?}"
    );
    partial_request_waits(metrics_port);
    let (before, types) = parse_prometheus(&body);
    let counts_before = check_histograms(&before, "request_latency_seconds");
    assert_eq!(types["request_latency_seconds"], "histogram");
    assert_eq!(types["znode_count"], "gauge");
    assert_eq!(types["packets_received"], "counter");
    // The mntr summaries under ZooKeeper's Prometheus names.
    for name in ["readlatency", "updatelatency", "fsynctime", "election_time"] {
        assert_eq!(types[name], "summary", "{name}");
        assert!(
            sample(&before, &format!("{name}_count"), &[]).is_some(),
            "{name}_count"
        );
    }
    assert!(sample(&before, "readlatency", &[("quantile", "0.99")]).is_some());

    // Exactly these requests from one client.
    const GETS: usize = 25;
    const SETS: usize = 4;
    const EXISTS: usize = 3;
    let rt = runtime();
    let client = rt.block_on(connect(&server.connect_string()));
    rt.block_on(async {
        within("create", WAIT, client.create("/prom", b"v", &persistent()))
            .await
            .expect("create");
        for _ in 0..GETS {
            within("get", WAIT, client.get_data("/prom"))
                .await
                .expect("get");
        }
        for i in 0..SETS {
            within(
                "set",
                WAIT,
                client.set_data("/prom", format!("{i}").as_bytes(), None),
            )
            .await
            .expect("set");
        }
        for _ in 0..EXISTS {
            within("exists", WAIT, client.check_stat("/prom"))
                .await
                .expect("exists");
        }
    });

    let (_, _, body) = http_get(metrics_port, "/");
    let (after, _) = parse_prometheus(&body);
    let counts = check_histograms(&after, "request_latency_seconds");
    let delta = |op: &str| {
        counts.get(op).copied().unwrap_or(0.0) - counts_before.get(op).copied().unwrap_or(0.0)
    };
    assert_eq!(
        delta("get_data"),
        GETS as f64,
        "get_data requests: {counts:?}"
    );
    assert_eq!(
        delta("set_data"),
        SETS as f64,
        "set_data requests: {counts:?}"
    );
    assert_eq!(
        delta("exists"),
        EXISTS as f64,
        "exists requests: {counts:?}"
    );
    assert_eq!(delta("create"), 1.0, "create requests: {counts:?}");
    // Every counter only grows.
    for s in &before {
        let family_type = types.get(s.name.as_str()).map(String::as_str);
        if family_type == Some("counter") {
            let now = sample(&after, &s.name, &[]).expect("the counter is still there");
            assert!(now.value >= s.value, "{} went down", s.name);
        }
    }
    let received = sample(&after, "packets_received", &[])
        .expect("packets_received")
        .value;
    let received_before = sample(&before, "packets_received", &[])
        .expect("packets_received")
        .value;
    assert!(received - received_before >= (1 + GETS + SETS + EXISTS) as f64);
    let reads = |samples: &[Sample]| {
        sample(samples, "readlatency_count", &[])
            .expect("readlatency_count")
            .value
    };
    assert!(reads(&after) - reads(&before) >= (GETS + EXISTS) as f64);

    // The gauges agree with mntr.
    let m = mntr(&server);
    let gauge = |name: &str| {
        sample(&after, name, &[])
            .unwrap_or_else(|| panic!("{name}"))
            .value
    };
    assert_eq!(gauge("znode_count"), mntr_u64(&m, "zk_znode_count") as f64);
    assert_eq!(gauge("znode_count"), 6.0);
    assert_eq!(
        gauge("ephemerals_count"),
        mntr_u64(&m, "zk_ephemerals_count") as f64
    );
    assert_eq!(gauge("watch_count"), mntr_u64(&m, "zk_watch_count") as f64);
    assert_eq!(
        gauge("approximate_data_size"),
        mntr_u64(&m, "zk_approximate_data_size") as f64
    );
    assert_eq!(gauge("num_alive_connections"), 1.0);
    drop(client);
}
