//! Configuration: ZooKeeper's `zoo.cfg` keys, the `myid` file, and command-line flags that
//! override them.
//!
//! An operator's existing zoo.cfg works unchanged: the keys zooraft uses are read with
//! ZooKeeper's meaning and defaults; ZooKeeper keys that do not apply to zooraft (dataLogDir,
//! autopurge.*, ...) are accepted and noted; an unknown key is a warning; a
//! malformed value is an error that names the line. With no file and no flags, zooraft is a
//! standalone server on 127.0.0.1:2181 with its data under `./data`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod admin;
mod load;
mod members;
mod whitelist;

pub use admin::AdminConfig;
pub use load::Overrides;
pub use members::{parse_member, Member};
pub use whitelist::Whitelist;

/// The four-letter words a default server answers (the rest must be whitelisted).
pub const DEFAULT_FOUR_LETTER_WORDS: &[&str] = &["srvr", "ruok", "mntr"];

/// Every four-letter word zooraft implements.
pub const ALL_FOUR_LETTER_WORDS: &[&str] = &[
    "ruok", "srvr", "stat", "mntr", "conf", "cons", "envi", "wchs", "isro", "dump", "wchc", "wchp",
    "hash", "crst", "srst", "dirs", "ydld", "rqld",
];

/// ZooKeeper keys that are valid but have no effect here.
const IGNORED_KEYS: &[&str] = &[
    "dataLogDir",
    "standaloneEnabled",
    "autopurge.snapRetainCount",
    "autopurge.purgeInterval",
    "electionAlg",
    "leaderServes",
    "cnxTimeout",
    "quorumListenOnAllIPs",
    "globalOutstandingLimit",
    "preAllocSize",
    "snapCount",
    "forceSync",
    "metricsProvider.className",
    "metricsProvider.exportJvmInfo",
    "localSessionsUpgradingEnabled",
    "syncEnabled",
    "audit.enable",
    "serverCnxnFactory",
    "connectToLearnerMasterLimit",
    "maxResponseCacheSize",
    "maxGetChildrenResponseCacheSize",
];

/// Why a configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}:{line}: {message}")]
    Line {
        file: String,
        line: usize,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// The server's settings, resolved.
#[derive(Debug, Clone)]
pub struct Config {
    pub tick_time_ms: u32,
    pub data_dir: PathBuf,
    pub client_port: u16,
    /// Whether `clientPort` was set (by zoo.cfg or `--port`): with `secureClientPort` alone
    /// there is no plain port.
    pub client_port_given: bool,
    pub client_address: IpAddr,
    /// Connections per client IP (0 = unlimited).
    pub max_client_cnxns: u32,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    /// `jute.maxbuffer`: the largest frame accepted.
    pub max_buffer: usize,
    pub four_letter_words: Whitelist,
    /// This member's id (`myid`); 1 when standalone.
    pub my_id: u64,
    /// `server.N` lines; empty when standalone.
    pub members: BTreeMap<u64, Member>,
    pub extended_types: bool,
    /// `readonlymode.enabled` (a JVM property in ZooKeeper): a member cut off from the
    /// quorum keeps serving reads to clients that asked for read-only mode.
    pub read_only_mode: bool,
    /// `localSessionsEnabled`: read-only members may give clients local sessions (as in
    /// ZooKeeper, a read-only member makes no session otherwise). Read-write sessions are
    /// always global here.
    pub local_sessions: bool,
    pub container_check_interval: Duration,
    /// `metricsProvider.httpPort`: Prometheus text endpoint.
    pub metrics_port: Option<u16>,
    pub metrics_address: IpAddr,
    /// `DigestAuthenticationProvider.superDigest` (`super:<base64 sha1>`).
    pub super_digest: Option<String>,
    /// The `admin.*` keys (the AdminServer).
    pub admin: AdminConfig,
    /// The zoo.cfg text as read at start (`initial_configuration`); empty without a file.
    pub initial_text: String,
    /// Take a snapshot after this many applied entries.
    pub snapshot_entries: u64,
    /// Log entries kept behind a snapshot, so a follower slightly behind catches up from the
    /// log rather than by a whole snapshot.
    pub snapshot_retain_entries: u64,
    /// Raft tick interval (elections after 10 ticks, heartbeats every 2).
    pub raft_tick: Duration,
    /// `diskReserveMB`: free space the data directory must keep; below it the member
    /// stops writing its log until space returns (see `raft/disk_space.rs`). 0: no check.
    pub disk_reserve_bytes: u64,
    /// `scrubIntervalSeconds`: how often every table of the store and the snapshot file are
    /// read back and checked (`raft/scrub.rs`); zero: never.
    pub scrub_interval: Duration,
    /// The security keys (TLS, authentication providers, enforced auth), kept as written:
    /// the `tls` module and the network layer read them (see [`is_security_key`]).
    pub security: BTreeMap<String, String>,
    /// The zoo.cfg read (a reconfig rewrites it to name the current dynamic file).
    pub config_file: Option<PathBuf>,
    /// `dynamicConfigFile`: where the server lines are (ZooKeeper 3.5+'s split).
    pub dynamic_config_file: Option<PathBuf>,
    /// `reconfigEnabled`: the reconfig op (16) changes the membership (else RECONFIGDISABLED).
    pub reconfig_enabled: bool,
    /// `skipACL`: no ACL checks on the reconfig op (ZooKeeper skips them everywhere; here
    /// only reconfig honours it).
    pub skip_acl: bool,
    /// `initLimit` and `syncLimit` (ticks): how long a ZooKeeper leader may take to accept
    /// and sync this member, and to answer once synced, when it observes one
    /// (`migrateFromZooKeeper`).
    pub init_limit: u32,
    pub sync_limit: u32,
    /// `migrateFromZooKeeper`: this member joins the ZooKeeper ensemble of its `server.N`
    /// lines as an observer (its own line says `:observer`) instead of running Raft.
    pub migrate_from_zookeeper: bool,
    /// `leaderTransferOnShutdown` (zooraft's own): a leader stopped cleanly hands over first.
    pub transfer_on_shutdown: bool,
    /// `linearizableReads` (zooraft's own, off by default as ZooKeeper's reads may be
    /// stale): every read of the tree in an ensemble waits for a ReadIndex round first, as
    /// if the client had sent `sync` before it.
    pub linearizable_reads: bool,
    /// Warnings gathered while parsing (unknown keys), to log once logging is up.
    pub warnings: Vec<String>,
}

/// Keys that secure the server: TLS (`ssl.*`, `secureClientPort`, `sslQuorum`, port
/// unification), authentication providers and enforced authentication.
pub fn is_security_key(key: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "ssl.",
        "zookeeper.ssl.",
        "authProvider.",
        "X509AuthenticationProvider.",
        "zookeeper.X509AuthenticationProvider.",
        "enforce.auth.",
        "zookeeper.enforce.auth.",
        "kerberos.",
        "zookeeper.kerberos.",
        "quorum.auth.",
    ];
    const KEYS: &[&str] = &[
        "secureClientPort",
        "secureClientPortAddress",
        "client.portUnification",
        "sslQuorum",
        "portUnification",
        "sessionRequireClientSASLAuth",
        "zookeeper.sessionRequireClientSASLAuth",
        "jaasLoginConfig",
    ];
    KEYS.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p))
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tick_time_ms: 2000,
            data_dir: PathBuf::from("data"),
            client_port: 2181,
            client_port_given: false,
            client_address: IpAddr::from([127, 0, 0, 1]),
            max_client_cnxns: 0,
            min_session_timeout_ms: -1,
            max_session_timeout_ms: -1,
            max_buffer: jute::DEFAULT_MAX_BUFFER,
            four_letter_words: Whitelist::Only(
                DEFAULT_FOUR_LETTER_WORDS
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            ),
            my_id: 1,
            members: BTreeMap::new(),
            extended_types: false,
            read_only_mode: false,
            local_sessions: false,
            container_check_interval: Duration::from_secs(5),
            metrics_port: None,
            metrics_address: IpAddr::from([127, 0, 0, 1]),
            super_digest: None,
            admin: AdminConfig::default(),
            initial_text: String::new(),
            snapshot_entries: 100_000,
            snapshot_retain_entries: 10_000,
            raft_tick: Duration::from_millis(100),
            disk_reserve_bytes: 64 << 20,
            scrub_interval: Duration::from_secs(600),
            security: BTreeMap::new(),
            transfer_on_shutdown: true,
            linearizable_reads: false,
            config_file: None,
            dynamic_config_file: None,
            reconfig_enabled: false,
            skip_acl: false,
            init_limit: 10,
            sync_limit: 5,
            migrate_from_zookeeper: false,
            warnings: Vec::new(),
        }
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("{key}: '{value}' is not a valid number"))
}

fn parse_bool(key: &str, value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" => Ok(true),
        "false" | "no" => Ok(false),
        _ => Err(format!("{key}: '{value}' is not true or false")),
    }
}

impl Config {
    /// A boolean security key (`sslQuorum`, `quorum.auth.enableSasl`, ...): absent is
    /// false; anything but true or false (any case) is an error naming the key.
    pub fn security_flag(&self, key: &str) -> Result<bool, String> {
        match self
            .security
            .get(key)
            .map(|v| v.trim().to_ascii_lowercase())
        {
            None => Ok(false),
            Some(v) if v == "true" => Ok(true),
            Some(v) if v == "false" => Ok(false),
            Some(v) => Err(format!("{key}: '{v}' is not true or false")),
        }
    }

    /// Reads zoo.cfg text. `file` names it in error messages.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let mut cfg = Config::default();
        let mut peer_type_observer = false;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: String| ConfigError::Line {
                file: file.to_string(),
                line: i + 1,
                message,
            };
            let Some((key, value)) = line.split_once('=') else {
                return Err(err(format!("expected key=value, got '{line}'")));
            };
            let (key, value) = (key.trim(), value.trim());
            if cfg.admin.set(key, value).map_err(err)? {
                continue;
            }
            match key {
                "tickTime" => cfg.tick_time_ms = parse_num(key, value).map_err(err)?,
                "dataDir" => cfg.data_dir = PathBuf::from(value),
                "clientPort" => {
                    cfg.client_port = parse_num(key, value).map_err(err)?;
                    cfg.client_port_given = true;
                }
                "clientPortAddress" => {
                    cfg.client_address = value.parse().map_err(|_| {
                        err(format!("clientPortAddress: '{value}' is not an IP address"))
                    })?
                }
                "maxClientCnxns" => cfg.max_client_cnxns = parse_num(key, value).map_err(err)?,
                "minSessionTimeout" => {
                    cfg.min_session_timeout_ms = parse_num(key, value).map_err(err)?
                }
                "maxSessionTimeout" => {
                    cfg.max_session_timeout_ms = parse_num(key, value).map_err(err)?
                }
                "jute.maxbuffer" => cfg.max_buffer = parse_num(key, value).map_err(err)?,
                "4lw.commands.whitelist" => cfg.four_letter_words = Whitelist::parse(value),
                "localSessionsEnabled" => {
                    cfg.local_sessions = parse_bool(key, value).map_err(err)?
                }
                "readonlymode.enabled" => {
                    cfg.read_only_mode = parse_bool(key, value).map_err(err)?
                }
                "extendedTypesEnabled" => {
                    cfg.extended_types = parse_bool(key, value).map_err(err)?
                }
                "znode.container.checkIntervalMs" | "containerCheckIntervalMs" => {
                    let ms: u64 = parse_num(key, value).map_err(err)?;
                    cfg.container_check_interval = Duration::from_millis(ms.max(10));
                }
                "metricsProvider.httpPort" => {
                    cfg.metrics_port = Some(parse_num(key, value).map_err(err)?)
                }
                "metricsProvider.httpHost" => {
                    cfg.metrics_address = value.parse().map_err(|_| {
                        err(format!(
                            "metricsProvider.httpHost: '{value}' is not an IP address"
                        ))
                    })?
                }
                "DigestAuthenticationProvider.superDigest"
                | "zookeeper.DigestAuthenticationProvider.superDigest" => {
                    cfg.super_digest = Some(value.to_string())
                }
                "peerType" => match value {
                    "observer" => peer_type_observer = true,
                    "participant" => peer_type_observer = false,
                    _ => {
                        return Err(err(format!(
                            "peerType: '{value}' is not observer or participant"
                        )))
                    }
                },
                "snapshotEntries" => {
                    cfg.snapshot_entries = parse_num::<u64>(key, value).map_err(err)?.max(100)
                }
                "snapshotRetainEntries" => {
                    cfg.snapshot_retain_entries = parse_num(key, value).map_err(err)?
                }
                "raftTickMs" => {
                    let ms: u64 = parse_num(key, value).map_err(err)?;
                    cfg.raft_tick = Duration::from_millis(ms.clamp(5, 10_000));
                }
                "diskReserveMB" => {
                    let mb: u64 = parse_num(key, value).map_err(err)?;
                    cfg.disk_reserve_bytes = mb.saturating_mul(1 << 20);
                }
                "scrubIntervalSeconds" => {
                    cfg.scrub_interval = Duration::from_secs(parse_num(key, value).map_err(err)?)
                }
                "dynamicConfigFile" => cfg.dynamic_config_file = Some(PathBuf::from(value)),
                "reconfigEnabled" => cfg.reconfig_enabled = parse_bool(key, value).map_err(err)?,
                "skipACL" => cfg.skip_acl = parse_bool(key, value).map_err(err)?,
                "initLimit" => cfg.init_limit = parse_num(key, value).map_err(err)?,
                "syncLimit" => cfg.sync_limit = parse_num(key, value).map_err(err)?,
                "migrateFromZooKeeper" => {
                    cfg.migrate_from_zookeeper = parse_bool(key, value).map_err(err)?
                }
                "leaderTransferOnShutdown" => {
                    cfg.transfer_on_shutdown = parse_bool(key, value).map_err(err)?
                }
                "linearizableReads" => {
                    cfg.linearizable_reads = parse_bool(key, value).map_err(err)?
                }
                k if k.starts_with("server.") => {
                    let member = parse_member(&k["server.".len()..], value).map_err(err)?;
                    cfg.members.insert(member.id, member);
                }
                k if is_security_key(k) => {
                    cfg.security.insert(k.to_string(), value.to_string());
                }
                k if IGNORED_KEYS.contains(&k) => {}
                other => cfg
                    .warnings
                    .push(format!("{file}:{}: unknown key '{other}' ignored", i + 1)),
            }
        }
        if peer_type_observer {
            cfg.warnings.push(
                "peerType=observer: this member must also be marked :observer in its server line"
                    .into(),
            );
        }
        Ok(cfg)
    }

    /// The server lines of `dynamicConfigFile` (relative to zoo.cfg's directory) replace
    /// any in zoo.cfg.
    fn read_dynamic_file(&mut self) -> Result<(), ConfigError> {
        let Some(file) = &self.dynamic_config_file else {
            return Ok(());
        };
        let dir = self.config_file.as_deref().and_then(Path::parent);
        let path = dir.map_or(file.clone(), |d| d.join(file));
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        self.members = Config::parse(&text, &path.display().to_string())?.members;
        Ok(())
    }

    /// Fills derived defaults and checks the whole.
    pub fn finish(&mut self) -> Result<(), ConfigError> {
        if self.tick_time_ms == 0 {
            return Err(ConfigError::Invalid("tickTime must be positive".into()));
        }
        if self.min_session_timeout_ms < 0 {
            self.min_session_timeout_ms = 2 * self.tick_time_ms as i32;
        }
        if self.max_session_timeout_ms < 0 {
            self.max_session_timeout_ms = 20 * self.tick_time_ms as i32;
        }
        if self.min_session_timeout_ms > self.max_session_timeout_ms {
            return Err(ConfigError::Invalid(format!(
                "minSessionTimeout ({}) is larger than maxSessionTimeout ({})",
                self.min_session_timeout_ms, self.max_session_timeout_ms
            )));
        }
        if self.max_buffer < 1024 {
            return Err(ConfigError::Invalid(
                "jute.maxbuffer must be at least 1024".into(),
            ));
        }
        if !self.members.is_empty() {
            if !self.members.contains_key(&self.my_id) {
                return Err(ConfigError::Invalid(format!(
                    "myid is {} but there is no server.{} line",
                    self.my_id, self.my_id
                )));
            }
            if self.members.values().all(|m| m.observer) {
                return Err(ConfigError::Invalid(
                    "an ensemble needs at least one voting member".into(),
                ));
            }
        }
        Ok(())
    }

    /// Standalone: no `server.N` lines, or only this member.
    pub fn is_standalone(&self) -> bool {
        self.members.len() <= 1
    }

    /// Clamps a requested session timeout into [min, max].
    pub fn negotiate_timeout(&self, requested: i32) -> i32 {
        requested.clamp(self.min_session_timeout_ms, self.max_session_timeout_ms)
    }

    pub fn client_addr(&self) -> SocketAddr {
        SocketAddr::new(self.client_address, self.client_port)
    }

    /// True if this member votes (not an observer).
    pub fn is_observer(&self) -> bool {
        self.members.get(&self.my_id).is_some_and(|m| m.observer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_standalone_on_loopback() {
        let mut c = Config::default();
        c.finish().unwrap();
        assert_eq!(c.client_addr().to_string(), "127.0.0.1:2181");
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (4000, 40000)
        );
        assert!(c.is_standalone());
        assert!(c.four_letter_words.allows("ruok") && c.four_letter_words.allows("mntr"));
        assert!(!c.four_letter_words.allows("stat"));
    }

    #[test]
    fn parses_zookeeper_config() {
        let text = "# comment\ntickTime=200\ndataDir=/tmp/x\nclientPort=2281\ninitLimit=5\n\
                    minSessionTimeout=1000\nmaxSessionTimeout=9000\n4lw.commands.whitelist=stat, ruok\n\
                    server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889;2182\n\
                    server.3=localhost:2890:3890:observer;0.0.0.0:2183\nbogus=1\n";
        let mut c = Config::parse(text, "zoo.cfg").unwrap();
        c.my_id = 2;
        c.finish().unwrap();
        assert_eq!(c.tick_time_ms, 200);
        assert_eq!(c.negotiate_timeout(10), 1000);
        assert_eq!(c.negotiate_timeout(100_000), 9000);
        assert!(c.four_letter_words.allows("stat") && !c.four_letter_words.allows("srvr"));
        assert_eq!(c.members.len(), 3);
        assert_eq!(c.members[&2].client_port, Some(2182));
        assert!(c.members[&3].observer && !c.is_observer());
        assert_eq!(c.warnings.len(), 1);
        assert!(c.warnings[0].contains("bogus"));
    }

    #[test]
    fn read_only_mode_keys() {
        let c = Config::parse("tickTime=2000\n", "zoo.cfg").unwrap();
        assert!(!c.read_only_mode && !c.local_sessions);
        let text = "readonlymode.enabled=true\nlocalSessionsEnabled=true\n";
        let c = Config::parse(text, "zoo.cfg").unwrap();
        assert!(c.read_only_mode && c.local_sessions);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let err = Config::parse("readonlymode.enabled=maybe\n", "zoo.cfg").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("zoo.cfg:1: readonlymode.enabled"),
            "{err}"
        );
    }

    #[test]
    fn scrub_interval_key() {
        let default = Config::parse("\n", "zoo.cfg").unwrap().scrub_interval;
        assert_eq!(default, Duration::from_secs(600));
        let c = Config::parse("scrubIntervalSeconds=0\n", "zoo.cfg").unwrap();
        assert!(c.scrub_interval.is_zero() && c.warnings.is_empty());
        assert!(Config::parse("scrubIntervalSeconds=-1\n", "zoo.cfg").is_err());
    }

    #[test]
    fn linearizable_reads_key() {
        assert!(!Config::parse("\n", "zoo.cfg").unwrap().linearizable_reads);
        let c = Config::parse("linearizableReads=true\n", "zoo.cfg").unwrap();
        assert!(c.linearizable_reads && c.warnings.is_empty());
        assert!(Config::parse("linearizableReads=maybe\n", "zoo.cfg").is_err());
    }

    #[test]
    fn leader_transfer_on_shutdown_key() {
        assert!(Config::parse("\n", "zoo.cfg").unwrap().transfer_on_shutdown);
        let c = Config::parse("leaderTransferOnShutdown=no\n", "zoo.cfg").unwrap();
        assert!(!c.transfer_on_shutdown && c.warnings.is_empty());
        assert!(Config::parse("leaderTransferOnShutdown=later\n", "zoo.cfg").is_err());
    }

    #[test]
    fn malformed_values_name_the_line() {
        let err = Config::parse("tickTime=2000\nclientPort=abc\n", "zoo.cfg").unwrap_err();
        assert_eq!(
            err.to_string(),
            "zoo.cfg:2: clientPort: 'abc' is not a valid number"
        );
        assert!(Config::parse("justtext\n", "z").is_err());
        assert!(Config::parse("server.x=h:1\n", "z").is_err());
        assert!(Config::parse("server.1=h\n", "z").is_err());
        let mut c = Config::parse("minSessionTimeout=5000\nmaxSessionTimeout=1000\n", "z").unwrap();
        assert!(c.finish().is_err());
        let mut c = Config::parse("server.1=h:1\n", "z").unwrap();
        c.my_id = 4;
        assert!(c.finish().is_err());
    }
}
