//! The two servers every comparison and every differential test runs: ours and the
//! reference.

/// Which implementation a [`TestServer`](super::TestServer) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerKind {
    /// Our server, the `zooraft` binary of this workspace.
    Zooraft,
    /// Apache ZooKeeper 3.8 from Debian's `zookeeper` package (`/usr/share/java/zookeeper.jar`).
    Apache,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Zooraft => "zooraft",
            ServerKind::Apache => "zookeeper",
        }
    }

    /// Both kinds, for tests that run the same scenario against each.
    pub fn both() -> [ServerKind; 2] {
        [ServerKind::Apache, ServerKind::Zooraft]
    }
}

impl std::fmt::Display for ServerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ServerKind {
    type Err = String;

    /// `zookeeper` (or `zk`, `apache`) and `zooraft` (or `zr`), in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "zookeeper" | "zk" | "apache" => Ok(ServerKind::Apache),
            "zooraft" | "zr" => Ok(ServerKind::Zooraft),
            other => Err(format!(
                "unknown server {other:?} (expected zookeeper or zooraft)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for kind in ServerKind::both() {
            assert_eq!(kind.name().parse::<ServerKind>(), Ok(kind));
        }
        assert_eq!("ZooKeeper".parse::<ServerKind>(), Ok(ServerKind::Apache));
        assert_eq!("zk".parse::<ServerKind>(), Ok(ServerKind::Apache));
        assert_eq!(" ZR ".parse::<ServerKind>(), Ok(ServerKind::Zooraft));
        assert!("etcd".parse::<ServerKind>().is_err());
    }
}
