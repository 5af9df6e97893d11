//! What a measurement runs against: one server, or an ensemble of several members of the
//! same kind on loopback, each with its own ports, `myid` and data directory.
//!
//! Both kinds get the same zoo.cfg for an ensemble: `server.N=127.0.0.1:peer:election;
//! 127.0.0.1:client` lines (zooraft uses the peer port for Raft and ignores the election
//! port), `initLimit=10` and `syncLimit=5` (ZooKeeper demands both), and the comparison's
//! tickTime. Load sessions are spread over the members round-robin.

use std::net::SocketAddr;
use std::time::Duration;

/// A free loopback port, or the launch error that says none could be had.
fn free_port() -> Result<u16, LaunchError> {
    try_free_port().map_err(LaunchError::io("find a free loopback port"))
}

use crate::server::{
    start_member, try_free_port, LaunchError, LaunchOptions, MemberSpec, ServerKind, TestServer,
};

/// One server or an ensemble; every member is stopped when this is dropped.
pub struct Target {
    kind: ServerKind,
    pub members: Vec<TestServer>,
}

impl Target {
    /// A standalone server (`size` 1) or an ensemble of `size` members, all serving when
    /// this returns. `tls`: give every member a TLS client port with these zoo.cfg lines
    /// (built for the port by the closure).
    pub fn start(
        kind: ServerKind,
        size: usize,
        opts: &LaunchOptions,
        tls: Option<&dyn Fn(u16) -> Vec<String>>,
    ) -> Result<Target, LaunchError> {
        let size = size.max(1);
        let mut specs: Vec<MemberSpec> = Vec::with_capacity(size);
        for _ in 0..size {
            let config = match tls {
                Some(lines) => lines(free_port()?),
                None => Vec::new(),
            };
            specs.push(MemberSpec {
                port: free_port()?,
                config,
                myid: None,
            });
        }
        if size > 1 {
            let mut lines = vec!["initLimit=10".to_string(), "syncLimit=5".to_string()];
            for (i, spec) in specs.iter().enumerate() {
                lines.push(format!(
                    "server.{}=127.0.0.1:{}:{};127.0.0.1:{}",
                    i + 1,
                    free_port()?,
                    free_port()?,
                    spec.port
                ));
            }
            for (i, spec) in specs.iter_mut().enumerate() {
                spec.myid = Some(i as u64 + 1);
                spec.config.extend(lines.iter().cloned());
            }
        }
        let mut members = Vec::with_capacity(size);
        for spec in specs {
            members.push(start_member(kind, opts, spec, size == 1)?);
        }
        for m in &mut members {
            m.try_wait_ready()?;
        }
        Ok(Target { kind, members })
    }

    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// Every running member's client address.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.members
            .iter()
            .filter(|m| m.is_running())
            .map(TestServer::addr)
            .collect()
    }

    /// Every running member's TLS client address.
    pub fn secure_addrs(&self) -> Vec<SocketAddr> {
        self.members
            .iter()
            .filter(|m| m.is_running())
            .filter_map(TestServer::secure_addr)
            .collect()
    }

    /// Every running member's pid, for CPU figures.
    pub fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(TestServer::pid).collect()
    }

    /// A standalone server's pid (None for an ensemble).
    pub fn pid(&self) -> Option<u32> {
        if self.members.len() == 1 {
            self.members[0].pid()
        } else {
            None
        }
    }

    /// The member that says it leads, waiting up to `timeout` for one to.
    pub fn leader(&self, timeout: Duration) -> Option<usize> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(i) = self
                .members
                .iter()
                .position(|m| m.is_running() && m.mode().as_deref() == Some("leader"))
            {
                return Some(i);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn stop(&mut self) {
        for m in &mut self.members {
            m.stop();
        }
    }
}
