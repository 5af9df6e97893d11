//! The workspace's `rust-version` is true: every crate takes it from the workspace, and no
//! package the lock file resolves needs a newer Rust (`cargo metadata`, offline). Calls into
//! the standard library newer than it are clippy's `incompatible_msrv` to find, which reads
//! the same field.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A version such as `1.89` or `1.89.0`, as numbers (missing parts are 0).
fn version(s: &str) -> Option<(u64, u64, u64)> {
    let mut parts = s.trim().split('.').map(|p| p.parse::<u64>());
    let major = parts.next()?.ok()?;
    let minor = parts.next().unwrap_or(Ok(0)).ok()?;
    let patch = parts.next().unwrap_or(Ok(0)).ok()?;
    Some((major, minor, patch))
}

fn workspace_root() -> PathBuf {
    let tests = zooraft_tests::suite_dir();
    tests.parent().expect("the workspace root").to_path_buf()
}

/// The `rust-version = "..."` of the workspace's `[workspace.package]`.
fn declared(root: &Path) -> String {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("rust-version"))
        .expect("the workspace declares rust-version");
    let value = line.split('=').nth(1).expect("rust-version = \"...\"");
    value.trim().trim_matches('"').to_string()
}

fn metadata(root: &Path) -> serde_json::Value {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .current_dir(root)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON")
}

#[test]
fn every_crate_takes_the_workspace_rust_version() {
    let root = workspace_root();
    let meta = metadata(&root);
    let msrv = declared(&root);
    let members = meta["workspace_members"].as_array().expect("members");
    for pkg in meta["packages"].as_array().expect("packages") {
        if !members.contains(&pkg["id"]) {
            continue;
        }
        assert_eq!(
            pkg["rust_version"].as_str(),
            Some(msrv.as_str()),
            "{} does not say rust-version.workspace = true",
            pkg["name"]
        );
    }
}

#[test]
fn no_resolved_package_needs_a_newer_rust() {
    let root = workspace_root();
    let meta = metadata(&root);
    let msrv = declared(&root);
    let ours = version(&msrv).expect("a version");
    let resolved: Vec<&serde_json::Value> = meta["resolve"]["nodes"]
        .as_array()
        .expect("resolve nodes")
        .iter()
        .map(|n| &n["id"])
        .collect();
    let newer: Vec<String> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| resolved.contains(&&p["id"]))
        .filter_map(|p| {
            let needs = p["rust_version"].as_str()?;
            (version(needs)? > ours).then(|| {
                format!(
                    "{} {} needs {needs}",
                    p["name"].as_str().unwrap_or("?"),
                    p["version"].as_str().unwrap_or("?")
                )
            })
        })
        .collect();
    assert!(
        newer.is_empty(),
        "rust-version {msrv} is not true: {}",
        newer.join(", ")
    );
}

#[test]
fn versions_compare_by_number() {
    assert!(version("1.89").unwrap() > version("1.9.0").unwrap());
    assert_eq!(version("1.80"), Some((1, 80, 0)));
    assert_eq!(version("x"), None);
}
