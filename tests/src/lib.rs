//! The end-to-end tests' library: what only the tests need, on top of the kit they share
//! with the bench.
//!
//! Every end-to-end test (conformance, client interop, chaos, recipes) starts its servers
//! through [`TestServer`], from `zooraft_kit` (launchers, ports, PKI, the proxy, the KDC,
//! the lossy filesystem), which the bench starts its servers with too; its modules are
//! re-exported here under the paths the tests use (`zooraft_tests::proxy`, ...). This
//! crate adds ensembles, the conformance framework, the real clients' programs, the
//! checkers and the fault injections that only tests use.

pub mod admin;
pub mod checks;
pub mod conformance;
pub mod ensemble;
pub mod faults;
pub mod java;
pub mod kazoo_migrate;
pub mod linear;
pub mod live_migration;
pub mod load;
pub mod patroni;
pub mod raw_client;
pub mod registers;
pub mod rt;
pub mod scripts;
pub mod tls_probe;
pub mod tree_dump;
pub mod zc;
pub mod zkcli;

// The kit both the tests and the bench use, under the names the tests have always used.
pub use zooraft_kit::{
    fault_shim, four_letter_word, free_port, lock_contender_binary, workspace_binary,
    zooraft_binary, zooraft_cmd, ServerKind, TestServer, TestServerBuilder,
};
pub use zooraft_kit::{kdc, lossyfs, pki, proxy, server};

pub use ensemble::TestEnsemble;

/// The test suite's own files (`java/`, `python/`), found at run time.
///
/// `env!("CARGO_MANIFEST_DIR")` would bake in the checkout a test binary was built in; with
/// a target directory shared between checkouts (CI's cache), cargo may reuse that binary from
/// another checkout. This crate's directory is found from the running test's
/// `CARGO_MANIFEST_DIR` (cargo sets it for every test it runs; a test of a sibling crate
/// finds this one beside its own), with the build-time path as the fallback.
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
