//! The `admin.*` keys: ZooKeeper 3.8's AdminServer settings (`ops::admin` serves them).
//!
//! As in ZooKeeper the server is on by default, on port 8080, with its commands under
//! `/commands`. One difference: it listens on loopback unless `admin.serverAddress` says
//! otherwise (ZooKeeper listens on every interface), since some commands hand out the
//! whole tree (`snapshot`) or change the ensemble (leader transfer).

use std::net::IpAddr;

use super::{parse_bool, parse_num};

/// ZooKeeper's default `admin.serverPort`.
pub const DEFAULT_ADMIN_PORT: u16 = 8080;

/// See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    /// `admin.enableServer`.
    pub enabled: bool,
    /// `admin.serverPort`, when set (8080 otherwise: see [`AdminConfig::port`]).
    pub port_given: Option<u16>,
    /// `admin.serverAddress`.
    pub address: IpAddr,
    /// `admin.commandURL`: where the commands are (`/commands`).
    pub command_url: String,
    /// `admin.portUnification`: TLS and plain HTTP on the one port.
    pub port_unification: bool,
    /// `admin.forceHttps`: TLS only.
    pub force_https: bool,
    /// `admin.rateLimiterIntervalInMS` (ZooKeeper 3.9's, 5 minutes): at most one `restore`
    /// per interval.
    pub rate_limit_ms: u64,
    /// `admin.restore.enabled` (ZooKeeper 3.9's, on): whether `restore` is served.
    pub restore_enabled: bool,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            enabled: true,
            port_given: None,
            address: IpAddr::from([127, 0, 0, 1]),
            command_url: "/commands".to_string(),
            port_unification: false,
            force_https: false,
            rate_limit_ms: 300_000,
            restore_enabled: true,
        }
    }
}

impl AdminConfig {
    /// The port to listen on.
    pub fn port(&self) -> u16 {
        self.port_given.unwrap_or(DEFAULT_ADMIN_PORT)
    }

    /// Whether the port speaks TLS (the `ssl.quorum.*` stores, as ZooKeeper's AdminServer).
    pub fn tls(&self) -> bool {
        self.port_unification || self.force_https
    }

    /// Takes one `admin.*` key (with or without ZooKeeper's `zookeeper.` prefix); `Ok(false)`
    /// for a key this is not.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let key = key.strip_prefix("zookeeper.").unwrap_or(key);
        match key {
            "admin.enableServer" => self.enabled = parse_bool(key, value)?,
            "admin.serverPort" => self.port_given = Some(parse_num(key, value)?),
            "admin.serverAddress" => {
                self.address = value
                    .parse()
                    .map_err(|_| format!("{key}: '{value}' is not an IP address"))?
            }
            "admin.commandURL" => {
                let url = value.trim_end_matches('/');
                if !url.starts_with('/') || url.contains(['?', '#', ' ']) {
                    return Err(format!("{key}: '{value}' is not a path such as /commands"));
                }
                self.command_url = url.to_string();
            }
            "admin.portUnification" => self.port_unification = parse_bool(key, value)?,
            "admin.forceHttps" => self.force_https = parse_bool(key, value)?,
            "admin.rateLimiterIntervalInMS" => self.rate_limit_ms = parse_num(key, value)?,
            "admin.restore.enabled" => self.restore_enabled = parse_bool(key, value)?,
            // Jetty's own tuning: nothing to tune here.
            "admin.idleTimeout" | "admin.httpVersion" => {
                parse_num::<u64>(key, value)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_with_zookeepers_defaults() {
        let mut a = AdminConfig::default();
        assert_eq!(
            (a.enabled, a.port(), a.command_url.as_str()),
            (true, 8080, "/commands")
        );
        assert!(a.set("admin.serverPort", "9090").unwrap());
        assert!(a.set("zookeeper.admin.commandURL", "/cmds/").unwrap());
        assert!(a.set("admin.portUnification", "true").unwrap());
        assert!(!a.set("admin.unknown", "1").unwrap());
        assert_eq!(
            (a.port(), a.command_url.as_str(), a.tls()),
            (9090, "/cmds", true)
        );
        assert!(a.set("admin.serverPort", "x").is_err());
        assert!(a.set("admin.commandURL", "commands").is_err());
        assert!(a.set("admin.serverAddress", "nowhere").is_err());
    }
}
