//! Where the workspace's own programs are when a test runs: the `zooraft` server, the
//! recipes' `lock-contender`, the fault shim library.
//!
//! Tests of one package can only ask cargo (`CARGO_BIN_EXE_*`) for their own package's
//! binaries, so the others are found next to the running test executable's `deps/`
//! directory: the same profile and the same target directory, so the same build.

use std::path::PathBuf;
use std::process::Command;

/// The `zooraft` binary built by this workspace: `$ZOORAFT_BIN`, or the `zooraft` next to
/// the running test executable's `deps/` directory (same profile, same target directory).
pub fn zooraft_binary() -> PathBuf {
    if let Ok(p) = std::env::var("ZOORAFT_BIN") {
        return PathBuf::from(p);
    }
    workspace_binary("zooraft")
}

/// The `lock-contender` binary (package `zooraft-lock-contender`): the recipes' contender
/// process for tests that run many of them.
pub fn lock_contender_binary() -> PathBuf {
    workspace_binary("lock-contender")
}

/// The fault shim library (`libzooraft_faultshim.so`, built with the workspace) next to
/// the zooraft binary, for `LD_PRELOAD`.
pub fn fault_shim() -> PathBuf {
    let bin = zooraft_binary();
    let lib = bin
        .parent()
        .expect("target directory")
        .join("libzooraft_faultshim.so");
    assert!(
        lib.exists(),
        "{} not found: build the workspace first (`cargo build --workspace`)",
        lib.display()
    );
    lib
}

/// A binary `name` of this workspace, next to the running test executable's `deps/`
/// directory. Panics, saying how to build it, when it is not there.
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current test executable");
    let mut dir = exe
        .parent()
        .expect("test executable directory")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} not found: build it first with `cargo build --workspace --all-targets`",
        bin.display()
    );
    bin
}

/// Runs `zooraft <args>` to completion: (success, stdout then stderr).
pub fn zooraft_cmd(args: &[&str]) -> (bool, String) {
    let out = Command::new(zooraft_binary())
        .args(args)
        .output()
        .expect("run zooraft");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
