//! Test-only hooks: with `ZOORAFT_TEST_HOOKS=1` in its environment (the end-to-end
//! harness sets it), a leader stops at a named point of a membership change while a file
//! of that name is in its data directory, and says so once in its log (`test hook:
//! holding at <point>`), so that a test can kill it exactly there and then let the next
//! leader go on by removing the file. Without the variable nothing is looked at, so the
//! hooks cost nothing and cannot be triggered in production.
//!
//! Points: [`BEFORE_JOINT`] (the new members are learners; the change that makes them
//! voters is not proposed), [`IN_JOINT`] (the joint configuration is committed and applied
//! by the leader, which does not leave it; while the file is there, membership changes
//! are proposed with an explicit leave, so that even a one-voter change goes through a
//! joint configuration).

use std::path::PathBuf;

/// Hold before proposing the change that makes the new members voters.
pub const BEFORE_JOINT: &str = "hold-before-joint";
/// Hold in the joint configuration, once it is applied.
pub const IN_JOINT: &str = "hold-in-joint";

/// The hooks of one member.
#[derive(Default)]
pub struct TestHooks {
    /// The data directory, when the hooks are enabled.
    dir: Option<PathBuf>,
    /// The point last reported as held (reported once).
    holding: Option<&'static str>,
}

impl TestHooks {
    pub fn from_env(data_dir: &std::path::Path) -> TestHooks {
        let enabled = std::env::var("ZOORAFT_TEST_HOOKS").is_ok_and(|v| v == "1");
        TestHooks {
            dir: enabled.then(|| data_dir.to_path_buf()),
            holding: None,
        }
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
            holding: None,
        };
        assert!(on.hold(BEFORE_JOINT, 1));
        assert!(!on.hold(IN_JOINT, 1));
        assert!(on.armed(BEFORE_JOINT) && !on.armed(IN_JOINT));
        std::fs::remove_file(dir.path().join(BEFORE_JOINT)).unwrap();
        assert!(!on.hold(BEFORE_JOINT, 1));
    }
}
