//! Client links: one fault proxy per member, so that one client can be cut off from the
//! whole ensemble (connections reset and refused, or blackholed) while the others work.

use std::sync::atomic::{AtomicBool, Ordering};

use zooraft_tests::proxy::Proxy;
use zooraft_tests::TestEnsemble;

/// A client's way to the ensemble: one fault proxy per member.
pub(crate) struct ClientLink {
    pub(crate) proxies: Vec<Proxy>,
    pub(crate) blackholed: AtomicBool,
}

impl ClientLink {
    pub(crate) fn new(ensemble: &TestEnsemble) -> ClientLink {
        ClientLink {
            proxies: (0..ensemble.len())
                .map(|i| Proxy::start(ensemble.member(i).addr()))
                .collect(),
            blackholed: AtomicBool::new(false),
        }
    }

    pub(crate) fn connect_string(&self) -> String {
        self.proxies
            .iter()
            .map(|p| p.connect_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Cuts the client off: either every connection is reset and new ones are refused, or
    /// (blackhole) connections stay open but nothing gets through.
    pub(crate) fn cut(&self, blackhole: bool) {
        for p in &self.proxies {
            if blackhole {
                p.blackhole(true);
            } else {
                p.refuse_connections(true);
                p.cut_all();
            }
        }
        self.blackholed.store(blackhole, Ordering::SeqCst);
    }

    pub(crate) fn heal(&self) {
        let was_blackholed = self.blackholed.swap(false, Ordering::SeqCst);
        for p in &self.proxies {
            if was_blackholed {
                // Bytes were dropped mid-stream: start from clean connections.
                p.cut_all();
            }
            p.blackhole(false);
            p.refuse_connections(false);
        }
    }
}
