//! A Kerberos KDC of its own realm on loopback, for the GSSAPI tests: MIT krb5's
//! `krb5kdc` (Debian's `krb5-kdc`), its database made with `kdb5_util` and principals and
//! keytabs with `kadmin.local` (`krb5-admin-server`), as an operator sets one up.
//!
//! Everything lives in a temporary folder: `krb5.conf` (for clients, servers and Java's
//! `-Djava.security.krb5.conf`), `kdc.conf`, the database, keytabs and ticket caches. The
//! KDC listens on an ephemeral port (TCP and UDP) of 127.0.0.1; clients are told to use
//! TCP. Dropping the [`Kdc`] kills the KDC process, also when a test fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The test realm.
pub const REALM: &str = "ZOORAFT.TEST";

/// A running KDC; see the module docs.
pub struct Kdc {
    dir: tempfile::TempDir,
    child: Child,
    pub port: u16,
}

fn run(what: &str, cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{what}: {e} (install Debian's krb5-kdc, krb5-admin-server and krb5-user)")
    });
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sbin(name: &str) -> PathBuf {
    ["/usr/sbin", "/usr/bin", "/sbin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

impl Kdc {
    /// Creates the realm and starts its KDC; returns once the KDC accepts connections.
    pub fn start() -> Kdc {
        let dir = tempfile::Builder::new()
            .prefix("kdc-test-")
            .tempdir()
            .expect("temporary directory");
        let port = crate::free_port();
        let d = dir.path().display();
        std::fs::write(
            dir.path().join("krb5.conf"),
            format!(
                "[libdefaults]\n default_realm = {REALM}\n dns_lookup_realm = false\n \
                 dns_lookup_kdc = false\n dns_canonicalize_hostname = false\n rdns = false\n \
                 udp_preference_limit = 1\n ticket_lifetime = 1h\n\n\
                 [realms]\n {REALM} = {{\n  kdc = 127.0.0.1:{port}\n }}\n\n\
                 [domain_realm]\n localhost = {REALM}\n"
            ),
        )
        .expect("write krb5.conf");
        std::fs::write(
            dir.path().join("kdc.conf"),
            format!(
                "[kdcdefaults]\n kdc_listen = 127.0.0.1:{port}\n kdc_tcp_listen = 127.0.0.1:{port}\n\n\
                 [realms]\n {REALM} = {{\n  database_name = {d}/principal\n  \
                 key_stash_file = {d}/stash\n  acl_file = {d}/kadm5.acl\n  \
                 kdc_listen = 127.0.0.1:{port}\n  kdc_tcp_listen = 127.0.0.1:{port}\n  \
                 max_life = 1h\n  \
                 supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n }}\n\n\
                 [logging]\n kdc = FILE:{d}/kdc.log\n"
            ),
        )
        .expect("write kdc.conf");
        std::fs::write(dir.path().join("kadm5.acl"), "").expect("write kadm5.acl");
        let env = |c: &mut Command| {
            c.env("KRB5_CONFIG", dir.path().join("krb5.conf"))
                .env("KRB5_KDC_PROFILE", dir.path().join("kdc.conf"));
        };
        let mut create = Command::new(sbin("kdb5_util"));
        create.args(["create", "-s", "-r", REALM, "-P", "zooraft-test-master"]);
        env(&mut create);
        run("kdb5_util create", &mut create);
        let mut cmd = Command::new(sbin("krb5kdc"));
        cmd.args(["-n", "-r", REALM])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        env(&mut cmd);
        let child = cmd
            .spawn()
            .expect("start krb5kdc (install Debian's krb5-kdc)");
        let mut kdc = Kdc { dir, child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = kdc.child.try_wait() {
                panic!("krb5kdc exited ({status}): {}", kdc.log());
            }
            assert!(
                Instant::now() < deadline,
                "krb5kdc did not listen: {}",
                kdc.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        kdc
    }

    /// The client configuration (`KRB5_CONFIG`, `-Djava.security.krb5.conf`).
    pub fn krb5_conf(&self) -> PathBuf {
        self.dir.path().join("krb5.conf")
    }

    /// The folder the KDC's files are in (keytabs and caches made here go there too).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `principal@REALM`.
    pub fn principal(&self, name: &str) -> String {
        format!("{name}@{REALM}")
    }

    fn kadmin(&self, query: &str) {
        let mut c = Command::new(sbin("kadmin.local"));
        c.args(["-r", REALM, "-q", query])
            .env("KRB5_CONFIG", self.krb5_conf())
            .env("KRB5_KDC_PROFILE", self.dir.path().join("kdc.conf"));
        run(&format!("kadmin.local -q '{query}'"), &mut c);
    }

    /// Adds principal `name` (e.g. `zookeeper/localhost`) with a random key and writes its
    /// keytab; returns the keytab's path.
    pub fn add_principal(&self, name: &str) -> PathBuf {
        let keytab = self
            .dir
            .path()
            .join(format!("{}.keytab", name.replace('/', "_")));
        self.kadmin(&format!("addprinc -randkey {name}"));
        self.kadmin(&format!("ktadd -k {} {name}", keytab.display()));
        keytab
    }

    /// Gets a ticket for `name` from its keytab into a cache of its own (`kinit -kt`);
    /// returns the cache to pass as `KRB5CCNAME`.
    pub fn kinit(&self, name: &str, keytab: &Path) -> String {
        let cache = format!(
            "FILE:{}/{}.ccache",
            self.dir.path().display(),
            name.replace('/', "_")
        );
        let mut c = Command::new("kinit");
        c.arg("-kt")
            .arg(keytab)
            .arg(self.principal(name))
            .env("KRB5_CONFIG", self.krb5_conf())
            .env("KRB5CCNAME", &cache);
        run("kinit", &mut c);
        cache
    }

    /// A JAAS section that logs in as `principal@REALM` from `keytab` with Java's
    /// Krb5LoginModule, as ZooKeeper's documentation writes them.
    pub fn jaas_section(&self, section: &str, keytab: &Path, principal: &str) -> String {
        format!(
            "{section} {{\n    com.sun.security.auth.module.Krb5LoginModule required\n    \
             useKeyTab=true\n    keyTab=\"{}\"\n    storeKey=true\n    useTicketCache=false\n    \
             principal=\"{}\";\n}};\n",
            keytab.display(),
            self.principal(principal)
        )
    }

    /// The KDC's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kdc.log")).unwrap_or_default()
    }
}

impl Drop for Kdc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
