//! Command-line flags over zoo.cfg: each flag overrides the same key, and a member of an
//! ensemble reads its id from `dataDir/myid` unless a flag gives it.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::{parse_member, Config, ConfigError, Whitelist};

/// Command-line settings; each one overrides the same key in zoo.cfg.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// zoo.cfg to read (ZooKeeper's format).
    #[arg(long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// zoo.cfg as a positional argument, as `zkServer.sh` takes it.
    #[arg(value_name = "ZOO_CFG", conflicts_with = "config")]
    pub config_positional: Option<PathBuf>,
    /// Client port (clientPort).
    #[arg(long)]
    pub port: Option<u16>,
    /// Address to listen on for clients (clientPortAddress).
    #[arg(long)]
    pub address: Option<IpAddr>,
    /// Data directory (dataDir).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    /// tickTime in milliseconds.
    #[arg(long = "tick-time")]
    pub tick_time: Option<u32>,
    /// maxClientCnxns (per client IP; 0 = unlimited).
    #[arg(long = "max-client-cnxns")]
    pub max_client_cnxns: Option<u32>,
    /// minSessionTimeout in milliseconds.
    #[arg(long = "min-session-timeout")]
    pub min_session_timeout: Option<i32>,
    /// maxSessionTimeout in milliseconds.
    #[arg(long = "max-session-timeout")]
    pub max_session_timeout: Option<i32>,
    /// jute.maxbuffer in bytes.
    #[arg(long = "jute-max-buffer")]
    pub jute_max_buffer: Option<usize>,
    /// 4lw.commands.whitelist (comma-separated, or *).
    #[arg(long = "4lw-whitelist")]
    pub four_letter_words: Option<String>,
    /// This member's id (instead of dataDir/myid).
    #[arg(long)]
    pub myid: Option<u64>,
    /// An ensemble member, as in zoo.cfg: `N=host:peerPort[:unused][:observer][;clientPort]`.
    /// Repeat for each member.
    #[arg(long = "server", value_name = "N=SPEC")]
    pub servers: Vec<String>,
    /// Port for the Prometheus metrics endpoint (metricsProvider.httpPort).
    #[arg(long = "metrics-port")]
    pub metrics_port: Option<u16>,
    /// JAAS file whose `Server` section names the SASL users (jaasLoginConfig).
    #[arg(long = "jaas-config", value_name = "FILE")]
    pub jaas_config: Option<PathBuf>,
}

impl Overrides {
    /// Builds the configuration from these flags, reading the zoo.cfg they name (if any)
    /// and the `myid` file of an ensemble member.
    pub fn load(&self) -> Result<Config, ConfigError> {
        let o = self;
        let file = o.config.as_ref().or(o.config_positional.as_ref());
        let mut cfg = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                let mut cfg = Config::parse(&text, &path.display().to_string())?;
                cfg.config_file = Some(path.clone());
                cfg.initial_text = text;
                cfg.read_dynamic_file()?;
                cfg
            }
            None => Config::default(),
        };
        if let Some(v) = o.port {
            cfg.client_port = v;
            cfg.client_port_given = true;
        }
        if let Some(v) = o.address {
            cfg.client_address = v;
        }
        if let Some(v) = &o.data_dir {
            cfg.data_dir = v.clone();
        }
        if let Some(v) = o.tick_time {
            cfg.tick_time_ms = v;
        }
        if let Some(v) = o.max_client_cnxns {
            cfg.max_client_cnxns = v;
        }
        if let Some(v) = o.min_session_timeout {
            cfg.min_session_timeout_ms = v;
        }
        if let Some(v) = o.max_session_timeout {
            cfg.max_session_timeout_ms = v;
        }
        if let Some(v) = o.jute_max_buffer {
            cfg.max_buffer = v;
        }
        if let Some(v) = &o.four_letter_words {
            cfg.four_letter_words = Whitelist::parse(v);
        }
        if let Some(v) = o.metrics_port {
            cfg.metrics_port = Some(v);
        }
        if let Some(v) = &o.jaas_config {
            cfg.security
                .insert("jaasLoginConfig".into(), v.display().to_string());
        }
        for spec in &o.servers {
            let (id, rest) = spec.split_once('=').ok_or_else(|| {
                ConfigError::Invalid(format!("--server {spec}: expected N=host:port"))
            })?;
            let member = parse_member(id.trim(), rest.trim()).map_err(ConfigError::Invalid)?;
            cfg.members.insert(member.id, member);
        }
        if !cfg.members.is_empty() {
            cfg.my_id = match o.myid {
                Some(id) => id,
                None => read_myid(&cfg.data_dir)?,
            };
        } else if let Some(id) = o.myid {
            cfg.my_id = id;
        }
        cfg.finish()?;
        Ok(cfg)
    }
}

fn read_myid(data_dir: &Path) -> Result<u64, ConfigError> {
    let path = data_dir.join("myid");
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
        path: path.clone(),
        source,
    })?;
    text.trim().parse().map_err(|_| {
        ConfigError::Invalid(format!(
            "{}: '{}' is not a member id",
            path.display(),
            text.trim()
        ))
    })
}
