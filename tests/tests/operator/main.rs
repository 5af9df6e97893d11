//! What an operator sees, end to end: the four-letter words (compared with Apache ZooKeeper
//! 3.8 after the same scripted actions), the Prometheus endpoint, ACLs through zkCli.sh,
//! and the `zooraft` command line (config file, flags, signals, a data directory it cannot
//! use).
//!
//! Monitoring scripts, exporters and runbooks written for ZooKeeper parse these outputs, so
//! the checks pin line shapes, keys and the numbers that must move with the tree (znode,
//! ephemeral and watch counts), not values that differ by implementation (packet counts,
//! latencies, file descriptors). Scenarios that ZooKeeper also has run against both kinds.
//!
//! One module per area: [`four_letter`], [`monitoring`] (the full `mntr` and `envi` key
//! sets), [`prometheus`], [`acl`], [`cli`]. This file holds what more than one of them
//! uses: a client, the create options, and `mntr`.

mod acl;
mod admin_server;
mod cli;
mod four_letter;
mod monitoring;
mod prometheus;
mod restore;

use std::collections::BTreeMap;
use std::time::Duration;

use zookeeper_client as zc;
pub(crate) use zooraft_tests::zc::{ephemeral, persistent};
use zooraft_tests::TestServer;

/// Bound for any single client operation or condition to come true.
const WAIT: Duration = Duration::from_secs(30);

async fn connect(hosts: &str) -> zc::Client {
    zooraft_tests::zc::connect(hosts, Duration::from_secs(10), WAIT).await
}

fn flw(server: &TestServer, word: &str) -> String {
    server
        .four_letter_word(word)
        .unwrap_or_else(|e| panic!("{word} on {}: {e}", server.kind().name()))
}

/// A four-letter word's `key<sep>value` lines, in order; a line without `sep` fails the test.
fn pairs<'a>(
    lines: impl Iterator<Item = &'a str>,
    sep: &str,
    word: &str,
) -> Vec<(&'a str, &'a str)> {
    lines
        .map(|l| {
            l.split_once(sep)
                .unwrap_or_else(|| panic!("{word} line without {sep:?}: {l:?}"))
        })
        .collect()
}

/// `mntr` as key → value.
fn mntr(server: &TestServer) -> BTreeMap<String, String> {
    let text = flw(server, "mntr");
    pairs(text.lines(), "\t", "mntr")
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn mntr_u64(m: &BTreeMap<String, String>, key: &str) -> u64 {
    let v = m
        .get(key)
        .unwrap_or_else(|| panic!("mntr has no {key}: {m:#?}"));
    v.parse()
        .unwrap_or_else(|_| panic!("mntr {key}={v:?} is not a whole number"))
}
