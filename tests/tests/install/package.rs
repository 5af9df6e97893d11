//! The Debian package (`scripts/package`), installed, run, upgraded, removed and purged on
//! this machine: dpkg needs root. CI runs as root; elsewhere the test fails saying so,
//! unless `ZOORAFT_TEST_SKIP_ROOT=1` skips it. It refuses to run where a zooraft package is
//! installed already (it purges its own at the end), and holds a lock so that two runs on
//! one machine take turns.
//!
//! systemd does not run in CI: the test starts the unit's `ExecStart` itself, as the unit's
//! `User` in its `WorkingDirectory`, on the installed configuration with the client port
//! changed. That edit also makes the conffile a modified one, which the upgrade must keep.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use zooraft_tests::rt::{block_on, eventually};
use zooraft_tests::scripts::{run_bounded, script, Owned, BUILD_LIMIT};
use zooraft_tests::zc::{connect, persistent};
use zooraft_tests::{four_letter_word, free_port};

/// Set to skip the test when not root.
const SKIP_ENV: &str = "ZOORAFT_TEST_SKIP_ROOT";
const DPKG_LIMIT: Duration = Duration::from_secs(180);
const START_LIMIT: Duration = Duration::from_secs(60);
const STOP_LIMIT: Duration = Duration::from_secs(30);
const CONFIG: &str = "/etc/zooraft/zoo.cfg";
const UNIT: &str = "/usr/lib/systemd/system/zooraft.service";
const DATA: &str = "/var/lib/zooraft";
const NODE: &str = "/package-test";
const WANTS: &str = "/etc/systemd/system/multi-user.target.wants/zooraft.service";

#[test]
fn package_installs_runs_upgrades_and_purges() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        if std::env::var_os(SKIP_ENV).is_some() {
            eprintln!("skipped: installing a package needs root ({SKIP_ENV} is set)");
            return;
        }
        panic!("this test installs a Debian package and needs root; set {SKIP_ENV}=1 to skip it");
    }
    let _turn = MachineLock::take();
    let state = package_state("zooraft");
    assert!(
        state.is_empty() || state == "not-installed",
        "a zooraft package is on this machine ({state}); the test would purge it. If it is \
         a leftover of this test: dpkg -P zooraft-dbgsym zooraft"
    );

    let out = tempfile::tempdir().expect("temporary directory");
    let (deb, dbgsym) = build(&out.path().join("first"), None);
    let version = field(&deb, "Version");
    let newer = format!("{version}+1");
    let (deb2, dbgsym2) = build(&out.path().join("second"), Some(&newer));
    let depends = field(&deb, "Depends");
    for lib in [
        "libc6",
        "libstdc++6",
        "libgcc-s1",
        "libgssapi-krb5-2",
        "adduser",
    ] {
        assert!(depends.contains(lib), "Depends: {depends} (no {lib})");
    }

    let mut installed = Installed { server: None };
    dpkg(&["-i", path(&deb), path(&dbgsym)]);
    assert_eq!(package_state("zooraft"), "installed");

    // The files.
    let bin = Path::new("/usr/bin/zooraft");
    let mode = std::fs::metadata(bin)
        .expect("/usr/bin/zooraft")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    let sections = output(Command::new("readelf").args(["-S", "-W", path(bin)]));
    assert!(
        !sections.contains(".debug_info") && !sections.contains(".symtab"),
        "/usr/bin/zooraft is not stripped"
    );
    let build_id = field(&dbgsym, "Build-Ids");
    let debug = format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &build_id[..2],
        &build_id[2..]
    );
    assert!(Path::new(&debug).is_file(), "no {debug}");
    for page in [
        "zooraft",
        "zooraft-backup",
        "zooraft-restore",
        "zooraft-migrate-cutover",
    ] {
        let man = format!("/usr/share/man/man1/{page}.1.gz");
        assert!(Path::new(&man).is_file(), "no {man}");
    }
    let conffiles = output(Command::new("dpkg-query").args(["-W", "-f=${Conffiles}", "zooraft"]));
    assert!(conffiles.contains(CONFIG), "conffiles: {conffiles}");
    let shipped = std::fs::read_to_string(CONFIG).expect("read zoo.cfg");
    for line in [
        "dataDir=/var/lib/zooraft",
        "clientPort=2181",
        "clientPortAddress=127.0.0.1",
    ] {
        assert!(
            shipped.lines().any(|l| l == line),
            "zoo.cfg has no {line}:\n{shipped}"
        );
    }
    // Enabled for the next boot (deb-systemd-helper works without a running systemd).
    assert!(
        Path::new(WANTS).is_symlink(),
        "{WANTS} is missing: the unit is not enabled"
    );
    let unit = unit_settings();
    for (key, value) in [
        ("User", "zooraft"),
        ("Restart", "on-failure"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("ReadWritePaths", DATA),
        ("LimitNOFILE", "65536"),
        ("WorkingDirectory", DATA),
    ] {
        assert_eq!(
            unit.get(key).map(String::as_str),
            Some(value),
            "{UNIT}: {key}"
        );
    }

    // The user and its directory.
    let user = output(Command::new("getent").args(["passwd", "zooraft"]));
    let fields: Vec<&str> = user.trim().split(':').collect();
    assert_eq!(fields.len(), 7, "getent passwd zooraft: {user}");
    let uid: u32 = fields[2].parse().expect("uid");
    let gid: u32 = fields[3].parse().expect("gid");
    assert!(uid < 1000, "zooraft is not a system user (uid {uid})");
    assert_eq!(fields[5], DATA);
    assert!(
        fields[6].ends_with("nologin") || fields[6].ends_with("false"),
        "{user}"
    );
    let group = output(Command::new("getent").args(["group", "zooraft"]));
    assert_eq!(
        group.split(':').nth(2),
        Some(gid.to_string().as_str()),
        "{group}"
    );
    let meta = std::fs::metadata(DATA).expect("/var/lib/zooraft");
    assert_eq!((meta.uid(), meta.gid()), (uid, gid), "{DATA}'s owner");
    assert_eq!(meta.mode() & 0o777, 0o750, "{DATA}'s mode");

    // The installed configuration, on free ports (the AdminServer's too): a modified
    // conffile from here on.
    let (port, admin) = (free_port(), free_port());
    let edited: String = shipped
        .lines()
        .map(|l| {
            if l == "clientPort=2181" {
                format!("clientPort={port}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect::<String>()
        + &format!("admin.serverPort={admin}\n");
    std::fs::write(CONFIG, &edited).expect("edit zoo.cfg");

    let log = out.path().join("server.log");
    let client = format!("127.0.0.1:{port}");
    installed.start(&unit, port, &log);
    block_on(async {
        let zk = connect(&client, Duration::from_secs(10), Duration::from_secs(30)).await;
        zk.create(NODE, b"kept", &persistent())
            .await
            .expect("create a node");
    });
    installed.stop(&log);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !text.contains("unknown key"),
        "the shipped zoo.cfg has unknown keys:\n{text}"
    );

    // The upgrade keeps the data and the modified conffile.
    dpkg(&["-i", path(&deb2), path(&dbgsym2)]);
    let now = output(Command::new("dpkg-query").args(["-W", "-f=${Version}", "zooraft"]));
    assert_eq!(now, newer);
    assert_eq!(
        std::fs::read_to_string(CONFIG).expect("read zoo.cfg"),
        edited
    );
    installed.start(&unit_settings(), port, &log);
    block_on(async {
        let zk = connect(&client, Duration::from_secs(10), Duration::from_secs(30)).await;
        let (data, _) = zk.get_data(NODE).await.expect("the node after the upgrade");
        assert_eq!(data, b"kept");
    });
    installed.stop(&log);

    // Remove: the program goes; configuration, data and user stay.
    dpkg(&["-r", "zooraft-dbgsym", "zooraft"]);
    assert_eq!(package_state("zooraft"), "config-files");
    assert!(
        !bin.exists(),
        "/usr/bin/zooraft is still there after dpkg -r"
    );
    assert!(
        !Path::new(&debug).exists(),
        "{debug} is still there after dpkg -r"
    );
    assert_eq!(
        std::fs::read_to_string(CONFIG).expect("zoo.cfg after dpkg -r"),
        edited
    );
    let kept = std::fs::read_dir(DATA)
        .expect("/var/lib/zooraft after dpkg -r")
        .count();
    assert!(kept > 0, "{DATA} is empty after dpkg -r");
    assert!(getent("passwd"), "the zooraft user is gone after dpkg -r");

    // Purge: all of it goes.
    dpkg(&["-P", "zooraft-dbgsym", "zooraft"]);
    assert!(matches!(
        package_state("zooraft").as_str(),
        "" | "not-installed"
    ));
    assert!(
        !getent("passwd"),
        "the zooraft user is still there after dpkg -P"
    );
    assert!(
        !getent("group"),
        "the zooraft group is still there after dpkg -P"
    );
    for dir in ["/etc/zooraft", DATA] {
        assert!(
            !Path::new(dir).exists(),
            "{dir} is still there after dpkg -P"
        );
    }
    assert!(
        !Path::new(WANTS).is_symlink(),
        "{WANTS} is still there after dpkg -P"
    );
}

/// `scripts/package` into `dir`: the package and its dbgsym.
fn build(dir: &Path, version: Option<&str>) -> (PathBuf, PathBuf) {
    let mut cmd = script("package");
    cmd.env("ZOORAFT_PACKAGE_DIR", dir);
    if let Some(v) = version {
        cmd.env("ZOORAFT_PACKAGE_VERSION", v);
    }
    let done =
        run_bounded("scripts/package", &mut cmd, BUILD_LIMIT).expect_success("scripts/package");
    let paths: Vec<PathBuf> = done.stdout.lines().map(PathBuf::from).collect();
    assert_eq!(paths.len(), 2, "scripts/package printed:\n{}", done.stdout);
    for p in &paths {
        assert!(p.starts_with(dir) && p.is_file(), "{}", p.display());
    }
    let name = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string()
    };
    assert!(name(&paths[0]).starts_with("zooraft_") && name(&paths[0]).ends_with("_amd64.deb"));
    assert!(name(&paths[1]).starts_with("zooraft-dbgsym_"));
    (paths[0].clone(), paths[1].clone())
}

/// A control field of a .deb.
fn field(deb: &Path, name: &str) -> String {
    output(Command::new("dpkg-deb").args(["-f", path(deb), name]))
}

/// dpkg with `args`, which must succeed.
fn dpkg(args: &[&str]) {
    run_bounded(
        &format!("dpkg {}", args.join(" ")),
        Command::new("dpkg")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null()),
        DPKG_LIMIT,
    )
    .expect_success(&format!("dpkg {}", args.join(" ")));
}

/// dpkg's status of a package: `installed`, `config-files`, ...; empty when unknown.
fn package_state(name: &str) -> String {
    Command::new("dpkg-query")
        .args(["-W", "-f=${db:Status-Status}", name])
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Whether the zooraft user (`passwd`) or group (`group`) exists.
fn getent(database: &str) -> bool {
    Command::new("getent")
        .args([database, "zooraft"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A command's stdout, trimmed; it must succeed.
#[track_caller]
fn output(cmd: &mut Command) -> String {
    let done = run_bounded(&format!("{cmd:?}"), cmd.stdin(Stdio::null()), DPKG_LIMIT)
        .expect_success(&format!("{cmd:?}"));
    done.stdout.trim().to_string()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The `[Service]` settings of the installed unit (`key=value` lines, last one wins).
fn unit_settings() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(UNIT).expect("read the unit");
    let mut section = "";
    let mut settings = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[Service]" && !line.starts_with('#') {
            if let Some((k, v)) = line.split_once('=') {
                settings.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }
    settings
}

/// The installed package for the test's duration: purged when dropped, its server killed
/// first, also when the test fails.
struct Installed {
    server: Option<Owned>,
}

impl Installed {
    /// Runs the unit's ExecStart as its User in its WorkingDirectory (as systemd would, with
    /// NoNewPrivileges), and waits for `ruok` on `port`.
    fn start(&mut self, unit: &BTreeMap<String, String>, port: u16, log: &Path) {
        let exec = unit.get("ExecStart").expect("the unit has an ExecStart");
        let user = unit.get("User").expect("the unit has a User");
        let argv: Vec<&str> = exec.split_whitespace().collect();
        let out = std::fs::File::create(log).expect("create the server log");
        let err = out.try_clone().expect("clone the log handle");
        let child = Command::new("setpriv")
            .arg(format!("--reuid={user}"))
            .arg(format!("--regid={user}"))
            .args(["--init-groups", "--no-new-privs", "--"])
            .args(&argv)
            .current_dir(unit.get("WorkingDirectory").map_or("/", String::as_str))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start the unit's ExecStart");
        let mut server = Owned::new(child);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        eventually("the packaged server to answer ruok", START_LIMIT, || {
            if !server.running() {
                panic!(
                    "the packaged server exited:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            four_letter_word(addr, "ruok").ok().filter(|a| a == "imok")
        });
        self.server = Some(server);
    }

    /// SIGTERM; it must exit 0.
    fn stop(&mut self, log: &Path) {
        let mut server = self.server.take().expect("a started server");
        let status = server.terminate("the packaged server", STOP_LIMIT);
        assert!(
            status.success(),
            "the packaged server exited with {status}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        self.server = None;
        let _ = Command::new("dpkg")
            .args(["-P", "zooraft-dbgsym", "zooraft"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// An exclusive lock on this machine's package test (flock, released when dropped).
struct MachineLock {
    _held: std::fs::File,
}

impl MachineLock {
    fn take() -> MachineLock {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open("/run/lock/zooraft-package-test.lock")
            .or_else(|_| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open("/tmp/zooraft-package-test.lock")
            })
            .expect("open the lock file");
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        eventually(
            "another run of the package test to finish",
            BUILD_LIMIT,
            || {
                // SAFETY: flock on a descriptor this function owns.
                (unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0).then_some(())
            },
        );
        MachineLock { _held: file }
    }
}
