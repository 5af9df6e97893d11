//! The `server.N` lines of zoo.cfg: one member of an ensemble, as ZooKeeper writes it.

use std::net::{SocketAddr, ToSocketAddrs};

use super::{parse_num, ConfigError};

/// One member of an ensemble.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    pub host: String,
    pub peer_port: u16,
    /// The third field, ZooKeeper's election port: unused (Raft elects over the peer
    /// port) but written back in `/zookeeper/config` as given.
    pub election_port: Option<u16>,
    pub client_port: Option<u16>,
    pub observer: bool,
}

impl Member {
    /// The member's peer address, resolved.
    pub fn peer_addr(&self) -> Result<SocketAddr, ConfigError> {
        (self.host.as_str(), self.peer_port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                ConfigError::Invalid(format!("server.{}: cannot resolve {}", self.id, self.host))
            })
    }
}

/// Parses `N=host:peerPort[:electionPort][:participant|:observer][;[clientAddr:]clientPort]`.
pub fn parse_member(id_text: &str, spec: &str) -> Result<Member, String> {
    let id: u64 = id_text
        .parse()
        .map_err(|_| format!("server.{id_text}: the member id must be a number"))?;
    if id == 0 {
        return Err("server.0: member ids start at 1".into());
    }
    let (addr_part, client_part) = match spec.split_once(';') {
        Some((a, c)) => (a, Some(c)),
        None => (spec, None),
    };
    let fields: Vec<&str> = addr_part.split(':').collect();
    if fields.len() < 2 {
        return Err(format!("server.{id}: expected host:peerPort, got '{spec}'"));
    }
    let host = fields[0].trim().to_string();
    if host.is_empty() {
        return Err(format!("server.{id}: empty host"));
    }
    let peer_port: u16 = parse_num(&format!("server.{id} peer port"), fields[1])?;
    let mut observer = false;
    let mut election_port = None;
    for f in &fields[2..] {
        match f.trim() {
            "observer" => observer = true,
            "participant" => observer = false,
            other => {
                election_port = Some(parse_num(&format!("server.{id} election port"), other)?);
            }
        }
    }
    let client_port = match client_part {
        None => None,
        Some(c) => {
            let port = c.rsplit(':').next().unwrap_or(c);
            Some(parse_num(&format!("server.{id} client port"), port)?)
        }
    };
    Ok(Member {
        id,
        host,
        peer_port,
        election_port,
        client_port,
        observer,
    })
}
