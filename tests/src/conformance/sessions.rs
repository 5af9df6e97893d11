//! The scenario's labelled sessions: for each label, its connection, the session id and
//! password the server gave it, the last zxid it saw and whether it is still alive. This is
//! what a client library would remember, learnt only from what the server said (the
//! handshake and the replies), and what clean-up closes so that no session expires later,
//! during another scenario.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use jute::Request;

use crate::raw_client::{ConnectOptions, Incoming, RawClient};

/// One labelled session.
#[derive(Debug, Default)]
pub(super) struct Sess {
    pub(super) client: Option<RawClient>,
    pub(super) id: i64,
    pub(super) passwd: Bytes,
    pub(super) requested_timeout: i32,
    /// The session id the last handshake asked for (0: a new session).
    pub(super) requested_session: i64,
    pub(super) last_zxid: i64,
    /// False once the session is known closed or expired.
    pub(super) alive: bool,
}

impl Sess {
    /// What the session learns from `inc`: its id and password from an accepted handshake
    /// (or that a resumed session is gone), the zxid of a reply.
    pub(super) fn learn(&mut self, inc: &Incoming) {
        match inc {
            Incoming::Handshake(h) => {
                let r = &h.response;
                if r.timeout > 0 && r.session_id != 0 {
                    self.id = r.session_id;
                    self.passwd = r.passwd.clone();
                    self.alive = true;
                } else if self.requested_session != 0 && self.requested_session == self.id {
                    self.alive = false;
                }
            }
            Incoming::Reply(r) if r.zxid > 0 && r.xid != jute::xid::PING => {
                self.last_zxid = r.zxid;
            }
            _ => {}
        }
    }
}

/// Every session of one scenario, by label.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    by_label: BTreeMap<String, Sess>,
}

impl Sessions {
    /// The session `label`, made (empty) if the scenario had none of that name.
    pub(super) fn entry(&mut self, label: &str) -> &mut Sess {
        self.by_label.entry(label.to_string()).or_default()
    }

    pub(super) fn get_mut(&mut self, label: &str) -> Option<&mut Sess> {
        self.by_label.get_mut(label)
    }

    pub(super) fn id(&self, label: &str) -> i64 {
        self.by_label.get(label).map(|s| s.id).unwrap_or(0)
    }

    pub(super) fn passwd(&self, label: &str) -> Bytes {
        self.by_label
            .get(label)
            .map(|s| s.passwd.clone())
            .unwrap_or_default()
    }

    pub(super) fn last_zxid(&self, label: &str) -> i64 {
        self.by_label.get(label).map(|s| s.last_zxid).unwrap_or(0)
    }

    pub(super) fn forget(&mut self, label: &str) {
        if let Some(s) = self.by_label.get_mut(label) {
            s.alive = false;
        }
    }

    /// Closes every session still alive, reconnecting to those whose connection is gone
    /// (each session id once, however many labels share it).
    pub(super) async fn close_all(&mut self, addr: SocketAddr, wait: Duration) {
        let mut closed_ids = Vec::new();
        for s in self.by_label.values_mut() {
            if !s.alive || s.id == 0 || closed_ids.contains(&s.id) {
                s.client = None;
                continue;
            }
            let mut client = s.client.take().filter(|c| !c.is_closed());
            if client.is_none() {
                let opts = ConnectOptions::resume(s.id, s.passwd.clone(), 0);
                if let Ok((c, hs)) = RawClient::connect(addr, &opts, wait).await {
                    if hs.response.timeout > 0 {
                        client = Some(c);
                    }
                }
            }
            if let Some(mut c) = client {
                let _ = c.call(&Request::CloseSession, wait).await;
            }
            closed_ids.push(s.id);
            s.alive = false;
        }
    }
}
