//! Test-only hooks: in a build with the `test-hooks` feature (the end-to-end tests turn it
//! on; `cargo build --release -p zooraft` does not) and with `ZOORAFT_TEST_HOOKS=1` in its
//! environment (the end-to-end harness sets it), a leader stops at a named point of a
//! membership change while a file of that name is in its data directory, and says so once
//! in its log (`test hook: holding at <point>`), so that a test can kill it exactly there
//! and then let the next leader go on by removing the file. Without the feature and the
//! variable nothing is looked at, so the hooks cost nothing and cannot be triggered in
//! production.
//!
//! Points: [`BEFORE_JOINT`] (the new members are learners; the change that makes them
//! voters is not proposed), [`IN_JOINT`] (the joint configuration is committed and applied
//! by the leader, which does not leave it; while the file is there, membership changes
//! are proposed with an explicit leave, so that even a one-voter change goes through a
//! joint configuration).
//!
//! And one fault: while [`CUT_PEERS`] is there, the member neither sends to its peers nor
//! takes what they send (client connections are untouched), as if its network links to
//! them were cut. The chaos suite uses it where the per-link proxies cannot be put in the
//! way: with reconfig on, every member reaches the others at the addresses of the
//! committed configuration.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use raft::eraftpb::Message;

use super::input::PeerIdentity;
use super::transport::Peers;
use crate::state::command::Command;

/// Hold before proposing the change that makes the new members voters.
pub const BEFORE_JOINT: &str = "hold-before-joint";
/// Hold in the joint configuration, once it is applied.
pub const IN_JOINT: &str = "hold-in-joint";
/// Cut the member off from its peers.
pub const CUT_PEERS: &str = "cut-peers";

/// The hooks of one member.
#[derive(Default)]
pub struct TestHooks {
    /// The data directory, when the hooks are enabled.
    dir: Option<PathBuf>,
    /// The point last reported as held (reported once).
    holding: Option<&'static str>,
    /// [`CUT_PEERS`] as last seen, shared with the [`CutPeers`] around the transport.
    cut: Arc<AtomicBool>,
}

impl TestHooks {
    pub fn from_env(data_dir: &std::path::Path) -> TestHooks {
        let asked = std::env::var("ZOORAFT_TEST_HOOKS").is_ok_and(|v| v == "1");
        let enabled = cfg!(feature = "test-hooks") && asked;
        if asked && !enabled {
            tracing::warn!("ZOORAFT_TEST_HOOKS is set, but this build has no test hooks");
        }
        TestHooks {
            dir: enabled.then(|| data_dir.to_path_buf()),
            ..TestHooks::default()
        }
    }

    /// The peers, behind [`CUT_PEERS`]'s switch when the hooks are enabled.
    pub fn wrap(&self, peers: Option<Arc<dyn Peers>>) -> Option<Arc<dyn Peers>> {
        match peers {
            Some(inner) if self.dir.is_some() => Some(Arc::new(CutPeers {
                inner,
                cut: self.cut.clone(),
            })),
            other => other,
        }
    }

    /// Looks at [`CUT_PEERS`] again (the Raft loop's periodic round).
    pub fn refresh_cut(&self, me: u64) {
        let cut = self.armed(CUT_PEERS);
        if self.cut.swap(cut, Ordering::Relaxed) != cut {
            tracing::info!(
                member = me,
                "test hook: peer links {}",
                if cut { "cut" } else { "restored" }
            );
        }
    }

    /// Whether the member is cut off from its peers (what they send is dropped).
    pub fn peers_cut(&self) -> bool {
        self.cut.load(Ordering::Relaxed)
    }

    /// Whether the test asks to hold at `point` now (logged the first time).
    pub fn hold(&mut self, point: &'static str, me: u64) -> bool {
        let Some(dir) = &self.dir else { return false };
        let held = dir.join(point).exists();
        if held && self.holding != Some(point) {
            tracing::info!(member = me, "test hook: holding at {point}");
        }
        self.holding = held.then_some(point);
        held
    }

    /// Whether `point`'s file is there (without holding or logging).
    pub fn armed(&self, point: &str) -> bool {
        self.dir.as_ref().is_some_and(|d| d.join(point).exists())
    }
}

/// The transport behind [`CUT_PEERS`]'s switch: while cut, nothing is sent.
struct CutPeers {
    inner: Arc<dyn Peers>,
    cut: Arc<AtomicBool>,
}

impl CutPeers {
    fn cut(&self) -> bool {
        self.cut.load(Ordering::Relaxed)
    }
}

impl Peers for CutPeers {
    fn send_raft(&self, msg: &Message) {
        if !self.cut() {
            self.inner.send_raft(msg);
        }
    }

    fn forward(&self, to: u64, commands: &[Command]) -> bool {
        !self.cut() && self.inner.forward(to, commands)
    }

    fn touch(&self, to: u64, sessions: &[i64]) {
        if !self.cut() {
            self.inner.touch(to, sessions);
        }
    }

    fn set_members(&self, members: &HashMap<u64, SocketAddr>) {
        self.inner.set_members(members);
    }

    fn announce(&self, me: PeerIdentity, tell_now: bool) {
        // Cut off, it tells nobody now; its next hellos say it.
        self.inner.announce(me, tell_now && !self.cut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_hold_only_when_enabled_and_asked() {
        let dir = tempfile::tempdir().unwrap();
        let mut off = TestHooks::default();
        std::fs::write(dir.path().join(BEFORE_JOINT), b"").unwrap();
        assert!(!off.hold(BEFORE_JOINT, 1), "disabled hooks never hold");
        let mut on = TestHooks {
            dir: Some(dir.path().to_path_buf()),
            ..TestHooks::default()
        };
        assert!(on.hold(BEFORE_JOINT, 1));
        assert!(!on.hold(IN_JOINT, 1));
        assert!(on.armed(BEFORE_JOINT) && !on.armed(IN_JOINT));
        std::fs::remove_file(dir.path().join(BEFORE_JOINT)).unwrap();
        assert!(!on.hold(BEFORE_JOINT, 1));
        on.refresh_cut(1);
        assert!(!on.peers_cut());
        std::fs::write(dir.path().join(CUT_PEERS), b"").unwrap();
        on.refresh_cut(1);
        assert!(on.peers_cut());
        off.refresh_cut(1);
        assert!(!off.peers_cut() && off.wrap(None).is_none());
    }
}
