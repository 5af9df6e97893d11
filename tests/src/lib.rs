//! The end-to-end test harness: starts real servers on loopback and cleans up after them.
//!
//! Every end-to-end test (conformance, client interop, chaos, recipes) starts its servers
//! through [`TestServer`], so there is one place that knows how to launch Apache ZooKeeper
//! 3.8 (Debian's `zookeeper` package) and the `zooraft` binary, how to pick a free port,
//! how to tell that a server is ready (`srvr` reports a Mode), and how to stop it. A
//! `TestServer` kills its process and removes its data directory when dropped, so a failing
//! test leaves nothing behind.

pub mod admin;
pub mod checks;
pub mod conformance;
pub mod ensemble;
pub mod faults;
pub mod java;
pub mod kazoo_migrate;
pub mod kdc;
pub mod linear;
pub mod live_migration;
pub mod load;
pub mod lossyfs;
pub mod patroni;
pub mod pki;
pub mod proxy;
pub mod raw_client;
pub mod registers;
pub mod rt;
pub mod scripts;
pub mod server;
pub mod tls_probe;
pub mod tree_dump;
pub mod zc;
pub mod zkcli;

pub use ensemble::TestEnsemble;
pub use server::{
    four_letter_word, free_port, lock_contender_binary, workspace_binary, zooraft_binary,
    zooraft_cmd, ServerKind, TestServer, TestServerBuilder,
};

/// The test suite's own files (`java/`, `python/`), found at run time.
///
/// `env!("CARGO_MANIFEST_DIR")` would bake in the checkout a test binary was built in; with
/// a target directory shared between checkouts (CI's cache), cargo may reuse that binary from
/// another checkout. This crate's directory is found from the running test's
/// `CARGO_MANIFEST_DIR` (cargo sets it for every test it runs; the harness crate and the
/// recipes crate are siblings), with the build-time path as the fallback.
pub fn suite_dir() -> std::path::PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(running) => {
            let running = std::path::PathBuf::from(running);
            match (running.parent(), here.file_name()) {
                (Some(root), Some(name)) if root.join(name).join("Cargo.toml").is_file() => {
                    root.join(name)
                }
                _ => here.to_path_buf(),
            }
        }
        None => here.to_path_buf(),
    }
}

/// Two `#[test]`s that run `scenario(ServerKind)` against Apache ZooKeeper and against
/// zooraft: `against_both!(words_apache, words_zooraft, words);`.
#[macro_export]
macro_rules! against_both {
    ($apache:ident, $zooraft:ident, $scenario:path) => {
        #[test]
        fn $apache() {
            $scenario($crate::ServerKind::Apache);
        }

        #[test]
        fn $zooraft() {
            $scenario($crate::ServerKind::Zooraft);
        }
    };
}
