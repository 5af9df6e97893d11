//! ACLs as an operator sets and reads them, through zkCli.sh against Apache ZooKeeper and
//! against zooraft: `auth`, `digest`, `ip` (exact and CIDR) and `world` ids, malformed ACLs,
//! versioned `setAcl`, digest masking in `getAcl`, a session without auth, and the super
//! user.
//!
//! zkCli.sh is the tool operators use for this, and it prints ZooKeeper's own error texts,
//! so comparing its transcript line by line checks both the ACL semantics and the error
//! codes the server sends back.

use std::collections::BTreeSet;

use zooraft_tests::zkcli::ZkCli;
use zooraft_tests::{ServerKind, TestServer};

fn no_output() -> Vec<String> {
    Vec::new()
}

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `user:pass` as ZooKeeper's digest provider hashes it (base64 of SHA-1 of `user:pass`).
pub(crate) const USER_DIGEST: &str = "user:smGaoVKd/cQkjm7b88GyorAUz20=";
/// `super:test`, the example from ZooKeeper's administrator guide.
pub(crate) const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";

fn noauth(path: &str) -> Vec<String> {
    vec![format!("Insufficient permission : {path}")]
}

fn invalid_acl_on_create(path: &str) -> Vec<String> {
    vec![
        format!("KeeperErrorCode = InvalidACL for {path}"),
        format!("Acl is not valid : {path}"),
    ]
}

fn acl_scenario(kind: ServerKind) {
    let server = match kind {
        ServerKind::Apache => TestServer::builder(kind).jvm_property(
            "zookeeper.DigestAuthenticationProvider.superDigest",
            SUPER_DIGEST,
        ),
        ServerKind::Zooraft => TestServer::builder(kind)
            .config("DigestAuthenticationProvider.superDigest", SUPER_DIGEST),
    }
    .start();
    let mut owner = ZkCli::start("owner", &server);

    // auth: expands to the session's digest id.
    assert_eq!(owner.run("addauth digest user:pass"), no_output());
    assert_eq!(
        owner.run("create /secret data auth:user:pass:cdrwa"),
        lines(&["Created /secret"])
    );
    let full_acl = lines(&[&format!("'digest,'{USER_DIGEST}"), ": cdrwa"]);
    assert_eq!(owner.run("getAcl /secret"), full_acl);
    assert_eq!(owner.run("get /secret"), lines(&["data"]));
    // A digest ACL written out in full is the same id.
    assert_eq!(
        owner.run(&format!("create /dig x digest:{USER_DIGEST}:cdrwa")),
        lines(&["Created /dig"])
    );
    assert_eq!(owner.run("getAcl /dig"), full_acl);

    // ip ACLs: an exact address, a CIDR range, an address that is not ours.
    assert_eq!(
        owner.run("create /ip x ip:127.0.0.1:r"),
        lines(&["Created /ip"])
    );
    assert_eq!(owner.run("getAcl /ip"), lines(&["'ip,'127.0.0.1", ": r"]));
    assert_eq!(owner.run("get /ip"), lines(&["x"]));
    assert_eq!(owner.run("set /ip y"), noauth("/ip"));
    assert_eq!(
        owner.run("create /cidr x ip:127.0.0.0/8:r"),
        lines(&["Created /cidr"])
    );
    assert_eq!(owner.run("get /cidr"), lines(&["x"]));
    assert_eq!(
        owner.run("create /elsewhere x ip:10.1.2.3:cdrwa"),
        lines(&["Created /elsewhere"])
    );
    assert_eq!(owner.run("get /elsewhere"), noauth("/elsewhere"));

    // world read-only: reads pass, writes and creates beneath fail.
    assert_eq!(
        owner.run("create /ro x world:anyone:r"),
        lines(&["Created /ro"])
    );
    assert_eq!(owner.run("get /ro"), lines(&["x"]));
    assert_eq!(owner.run("set /ro y"), noauth("/ro"));
    assert_eq!(owner.run("create /ro/child c"), noauth("/ro/child"));

    // Several entries; without ADMIN permission getAcl masks digest hashes.
    assert_eq!(
        owner.run(&format!(
            "create /mixed x world:anyone:r,digest:{USER_DIGEST}:cdrwa"
        )),
        lines(&["Created /mixed"])
    );

    // Malformed ACLs: INVALIDACL.
    assert_eq!(
        owner.run("create /bad1 x digest:nocolon:r"),
        invalid_acl_on_create("/bad1")
    );
    assert_eq!(
        owner.run("create /bad2 x ip:999.1.1.1:r"),
        invalid_acl_on_create("/bad2")
    );
    assert_eq!(
        owner.run("create /bad3 x ip:127.0.0.1/33:r"),
        invalid_acl_on_create("/bad3")
    );
    assert_eq!(
        owner.run("create /bad4 x foo:bar:r"),
        invalid_acl_on_create("/bad4")
    );
    assert_eq!(
        owner.run("create /bad5 x world:someone:r"),
        invalid_acl_on_create("/bad5")
    );
    assert_eq!(
        owner.run("setAcl /dig digest:nocolon:r"),
        lines(&["Acl is not valid : /dig"])
    );

    // setAcl with an expected ACL version; a stale one is BADVERSION.
    assert_eq!(owner.run("create /ver v"), lines(&["Created /ver"]));
    assert_eq!(
        owner.run("setAcl -v 0 /ver auth:user:pass:cdrwa"),
        no_output()
    );
    let stat = owner.run("getAcl -s /ver");
    assert!(stat.contains(&"aclVersion = 1".to_string()), "{stat:#?}");
    assert!(stat.contains(&"dataVersion = 0".to_string()), "{stat:#?}");
    assert_eq!(
        owner.run("setAcl -v 0 /ver world:anyone:r"),
        lines(&["version No is not valid : /ver"])
    );
    assert_eq!(owner.run("getAcl /ver"), full_acl);
    assert_eq!(owner.run("setAcl -v 1 /ver world:anyone:r"), no_output());
    assert_eq!(owner.run("getAcl /ver"), lines(&["'world,'anyone", ": r"]));
    let whoami = owner.run("whoami");
    assert_eq!(
        whoami.iter().map(|l| l.trim_end()).collect::<BTreeSet<_>>(),
        BTreeSet::from(["Auth scheme: User", "ip: 127.0.0.1", "digest: user"]),
        "{whoami:#?}"
    );

    // A session without auth.
    let mut stranger = ZkCli::start("stranger", &server);
    assert_eq!(stranger.run("get /secret"), noauth("/secret"));
    assert_eq!(stranger.run("getAcl /secret"), noauth("/secret"));
    assert_eq!(stranger.run("ls /secret"), noauth("/secret"));
    assert_eq!(stranger.run("set /secret x"), noauth("/secret"));
    assert_eq!(stranger.run("delete /secret/none"), noauth("/secret/none"));
    // exists needs no permission.
    let stat = stranger.run("stat /secret");
    assert!(stat.contains(&"dataLength = 4".to_string()), "{stat:#?}");
    assert_eq!(stranger.run("get /ip"), lines(&["x"]));
    assert_eq!(stranger.run("get /ro"), lines(&["x"]));
    assert_eq!(
        stranger.run("getAcl /mixed"),
        lines(&["'world,'anyone", ": r", "'digest,'user:x", ": cdrwa"])
    );
    // `auth` with no authenticated id to expand to.
    assert_eq!(
        stranger.run("create /bad6 x auth::cdrwa"),
        invalid_acl_on_create("/bad6")
    );
    // A wrong password is a different digest.
    assert_eq!(stranger.run("addauth digest user:wrong"), no_output());
    assert_eq!(stranger.run("get /secret"), noauth("/secret"));

    // The super user reads and writes anything, and sees digests unmasked.
    let mut admin = ZkCli::start("super", &server);
    assert_eq!(admin.run("addauth digest super:test"), no_output());
    assert_eq!(admin.run("get /secret"), lines(&["data"]));
    assert_eq!(admin.run("getAcl /secret"), full_acl);
    assert_eq!(admin.run("get /elsewhere"), lines(&["x"]));
    assert_eq!(admin.run("set /secret changed"), no_output());
    assert_eq!(admin.run("set /ro changed"), no_output());
    assert_eq!(
        admin.run("create /ro/child c"),
        lines(&["Created /ro/child"])
    );
    let whoami = admin.run("whoami");
    assert_eq!(
        whoami.iter().map(|l| l.trim_end()).collect::<BTreeSet<_>>(),
        BTreeSet::from([
            "Auth scheme: User",
            "super:",
            "ip: 127.0.0.1",
            "digest: super"
        ]),
        "{whoami:#?}"
    );
    assert_eq!(owner.run("get /secret"), lines(&["changed"]));
}

zooraft_tests::against_both!(acl_zkcli_apache, acl_zkcli_zooraft, acl_scenario);
