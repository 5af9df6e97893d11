//! ZooKeeper's dynamic configuration as data: the server strings, the text of
//! `/zookeeper/config`, and the checks of the reconfig op (16), as Apache ZooKeeper 3.8
//! does them (`PrepRequestProcessor`, `QuorumServer`, `QuorumMaj.toString`).
//!
//! Pure and deterministic, so that every member decides a reconfig the same way from the
//! same committed configuration; what only the leader can know (whether a reconfig is
//! still being carried out, which members are connected and caught up) is handed in.
//!
//! - A server string: `server.N=host:quorumPort:electionPort[:participant|:observer]
//!   [;[clientAddress:]clientPort]`. ZooKeeper writes it back with the role always
//!   spelled out and the client address `0.0.0.0` when none was given.
//! - `/zookeeper/config`: one server line each, by id, then `version=<hex>` (no newline
//!   after it), the version being the zxid of the reconfig that made it (a fresh ensemble:
//!   `100000000`).
//! - op 16: `newMembers` (non-null) replaces the membership (commas or newlines between
//!   lines); otherwise `leavingServers` (ids) and `joiningServers` (server strings, a
//!   known id replaced) change it. Checked in ZooKeeper's order: a reconfig in progress
//!   (RECONFIGINPROGRESS), `curConfigId` neither -1 nor the current version (BADVERSION),
//!   malformed strings or no voter left (BADARGUMENTS), no connected and synced quorum in
//!   the new voters (NEWCONFIGNOQUORUM), and only then the ACL of `/zookeeper/config`
//!   (NOAUTH; the caller checks it, as it holds the tree).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use bytes::Bytes;
use jute::{perms, ErrorCode, Reader};

use super::acl;
use super::command::ReconfigStamp;
use super::tree::{DataTree, Trigger, TxnContext, CONFIG};
use super::WriteResult;

/// One member, as a `server.N` line gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub id: u64,
    pub host: String,
    pub quorum_port: u16,
    pub election_port: u16,
    pub observer: bool,
    /// `(address, port)` clients connect to; the address is `0.0.0.0` when not given.
    pub client: Option<(String, u16)>,
}

fn port(s: &str, what: &str) -> Result<u16, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("{what} '{s}' is not a port number"))
}

impl ServerSpec {
    /// Parses the value of a `server.<id>` line.
    pub fn parse(id: u64, spec: &str) -> Result<ServerSpec, String> {
        let (server, client) = match spec.split_once(';') {
            Some((s, c)) => (s.trim(), Some(c.trim())),
            None => (spec.trim(), None),
        };
        let parts: Vec<&str> = server.split(':').collect();
        if parts.len() < 3 || parts.len() > 4 || parts[0].is_empty() {
            return Err(format!(
                "'{spec}': expected host:quorumPort:electionPort[:role][;[address:]clientPort]"
            ));
        }
        let observer = match parts.get(3).map(|r| r.trim().to_ascii_lowercase()) {
            None => false,
            Some(r) if r == "participant" => false,
            Some(r) if r == "observer" => true,
            Some(r) => return Err(format!("'{spec}': unknown role '{r}'")),
        };
        let client = match client {
            None | Some("") => None,
            Some(c) => Some(match c.rsplit_once(':') {
                Some((addr, p)) => (addr.to_string(), port(p, "client port")?),
                None => ("0.0.0.0".to_string(), port(c, "client port")?),
            }),
        };
        Ok(ServerSpec {
            id,
            host: parts[0].to_string(),
            quorum_port: port(parts[1], "quorum port")?,
            election_port: port(parts[2], "election port")?,
            observer,
            client,
        })
    }

    /// Parses a whole `server.N=...` line.
    pub fn parse_line(line: &str) -> Result<ServerSpec, String> {
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| format!("'{line}': expected server.N=..."))?;
        let id = key
            .trim()
            .strip_prefix("server.")
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| format!("'{key}': expected server.N with a numeric id"))?;
        ServerSpec::parse(id, value)
    }

    /// The line as ZooKeeper writes it.
    pub fn line(&self) -> String {
        let role = if self.observer {
            "observer"
        } else {
            "participant"
        };
        let mut s = format!(
            "server.{}={}:{}:{}:{role}",
            self.id, self.host, self.quorum_port, self.election_port
        );
        if let Some((addr, port)) = &self.client {
            let _ = write!(s, ";{addr}:{port}");
        }
        s
    }
}

/// The membership, and the zxid of the reconfig that made it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DynamicConfig {
    pub servers: BTreeMap<u64, ServerSpec>,
    pub version: i64,
}

/// The version of a fresh ensemble's configuration (ZooKeeper's first zxid of epoch 1).
pub const INITIAL_VERSION: i64 = 0x1_0000_0000;

impl DynamicConfig {
    /// `/zookeeper/config`'s data.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for spec in self.servers.values() {
            s.push_str(&spec.line());
            s.push('\n');
        }
        let _ = write!(s, "version={:x}", self.version);
        s
    }

    /// Reads `/zookeeper/config`'s data (or a `zoo.cfg.dynamic.*` file): server lines, an
    /// optional `version=<hex>`; blank lines and `#` comments are skipped.
    pub fn parse(text: &str) -> Result<DynamicConfig, String> {
        let mut c = DynamicConfig::default();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(v) = line.strip_prefix("version=") {
                c.version = i64::from_str_radix(v.trim(), 16)
                    .map_err(|_| format!("version '{v}' is not hexadecimal"))?;
            } else {
                let spec = ServerSpec::parse_line(line)?;
                c.servers.insert(spec.id, spec);
            }
        }
        Ok(c)
    }

    pub fn voters(&self) -> BTreeSet<u64> {
        self.servers
            .values()
            .filter(|s| !s.observer)
            .map(|s| s.id)
            .collect()
    }

    pub fn observers(&self) -> BTreeSet<u64> {
        self.servers
            .values()
            .filter(|s| s.observer)
            .map(|s| s.id)
            .collect()
    }
}

/// The body of a reconfig request. Absent (null) strings matter: a non-null `newMembers`,
/// even empty, makes the request non-incremental.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconfigArgs {
    pub joining: Option<String>,
    pub leaving: Option<String>,
    pub new_members: Option<String>,
    pub from_config: i64,
}

impl ReconfigArgs {
    pub fn decode(body: Bytes) -> Result<ReconfigArgs, ErrorCode> {
        let mut r = Reader::new(body);
        let mut read = || {
            r.read_ustring_opt()
                .map_err(|_| ErrorCode::MarshallingError)
        };
        let (joining, leaving, new_members) = (read()?, read()?, read()?);
        let from_config = r.read_i64().map_err(|_| ErrorCode::MarshallingError)?;
        Ok(ReconfigArgs {
            joining,
            leaving,
            new_members,
            from_config,
        })
    }
}

/// What only the leader knows when a reconfig is decided.
pub trait LeaderView {
    /// A previous reconfig is committed but not yet carried out.
    fn in_progress(&self) -> bool;
    /// Whether a quorum of `voters` is connected to the leader and caught up.
    fn quorum_synced(&self, voters: &BTreeSet<u64>) -> bool;
}

impl LeaderView for ReconfigStamp {
    fn in_progress(&self) -> bool {
        self.in_progress
    }

    fn quorum_synced(&self, voters: &BTreeSet<u64>) -> bool {
        voters.iter().filter(|v| self.synced.contains(v)).count() * 2 > voters.len()
    }
}

/// The committed configuration, from `/zookeeper/config` (none until the leader stated
/// the first one: a member's own view, [`show_local`], is not committed).
pub fn committed(tree: &DataTree) -> Option<DynamicConfig> {
    let node = tree.get(CONFIG)?;
    if node.mtime() == LOCAL_MTIME {
        return None;
    }
    let data = node.data()?;
    let text = std::str::from_utf8(data).ok()?;
    let c = DynamicConfig::parse(text).ok()?;
    (!c.servers.is_empty()).then_some(c)
}

/// The mtime of a member's own view of the configuration; a committed one always has the
/// wall time of the entry that made it.
const LOCAL_MTIME: i64 = 0;

/// The version of a member's own view of the configuration, before any leader stated one
/// (ZooKeeper serves `version=0` then, with mzxid 0).
pub const LOCAL_VERSION: i64 = 0;

/// Before the first configuration is committed, a member serves the one its own zoo.cfg
/// gives, `text` (versioned [`LOCAL_VERSION`]), as ZooKeeper serves its local quorum
/// verifier's from the start, so that `/zookeeper/config` never reads empty. It is not
/// replicated: [`committed`] does not count it (mtime [`LOCAL_MTIME`]), the leader still
/// states the first configuration, and that replaces this view on every member. A tree
/// that has any configuration already is left alone.
pub fn show_local(tree: &mut DataTree, text: &str) {
    let has_data = tree
        .get(CONFIG)
        .is_some_and(|n| n.data().is_some_and(|d| !d.is_empty()));
    if !has_data {
        let data = Bytes::from(text.to_string().into_bytes());
        tree.replace_config(LOCAL_VERSION, LOCAL_MTIME, data, -1, &mut Vec::new());
    }
}

/// The first configuration, as the first leader stated it: its mzxid is its version
/// (ZooKeeper's first zxid of epoch 1), so that `getData`'s mzxid is the `fromConfig` a
/// client passes, as on ZooKeeper.
pub fn state_first(tree: &mut DataTree, time: i64, text: &str, triggers: &mut Vec<Trigger>) {
    let version = DynamicConfig::parse(text).map_or(INITIAL_VERSION, |c| c.version);
    let data = Bytes::from(text.to_string().into_bytes());
    // (A clock at the epoch must not make it look like a member's own view.)
    let time = if time == LOCAL_MTIME { 1 } else { time };
    tree.replace_config(version, time, data, 0, triggers);
}

/// Applies a reconfig: [`next_config`]'s checks, then (unless `skipACL`) WRITE on
/// `/zookeeper/config`'s ACL, which only the super user has; then the new configuration,
/// versioned with this zxid, becomes the node's data (node version -1, as ZooKeeper's
/// SetDataTxn leaves it) and its data watches fire.
pub fn apply(
    tree: &mut DataTree,
    ctx: &TxnContext,
    body: &Bytes,
    stamp: &ReconfigStamp,
    triggers: &mut Vec<Trigger>,
) -> WriteResult {
    let result = (|| {
        if stamp.standalone {
            return Err(ErrorCode::Unimplemented);
        }
        if !stamp.enabled {
            return Err(ErrorCode::ReconfigDisabled);
        }
        let args = ReconfigArgs::decode(body.clone())?;
        let current = committed(tree).ok_or(ErrorCode::ReconfigInProgress)?;
        let servers = next_config(&current, &args, stamp)?;
        if !stamp.skip_acl {
            let node = tree.get(CONFIG).ok_or(ErrorCode::NoNode)?;
            acl::check(node.acl(), perms::WRITE, ctx.auth)?;
        }
        let next = DynamicConfig {
            servers,
            version: ctx.zxid,
        };
        let data = Bytes::from(next.text().into_bytes());
        let stat = tree
            .replace_config(ctx.zxid, ctx.time, data.clone(), -1, triggers)
            .ok_or(ErrorCode::NoNode)?;
        Ok(WriteResult::Config(data, stat))
    })();
    result.unwrap_or_else(WriteResult::Error)
}

fn split_list(s: &str) -> impl Iterator<Item = &str> {
    s.split([',', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
}

/// The membership a reconfig asks for, checked as ZooKeeper checks it (all but the ACL,
/// which comes last and is the caller's). The new configuration's version is the zxid of
/// the reconfig, which the caller sets.
pub fn next_config(
    current: &DynamicConfig,
    args: &ReconfigArgs,
    leader: &dyn LeaderView,
) -> Result<BTreeMap<u64, ServerSpec>, ErrorCode> {
    if leader.in_progress() {
        return Err(ErrorCode::ReconfigInProgress);
    }
    if args.from_config != -1 && args.from_config != current.version {
        return Err(ErrorCode::BadVersion);
    }
    let bad = |_| ErrorCode::BadArguments;
    let next = match &args.new_members {
        // ZooKeeper fails with a runtime exception, answered as MARSHALLINGERROR.
        Some(members) if split_list(members).next().is_none() => {
            return Err(ErrorCode::MarshallingError)
        }
        Some(members) => {
            let mut next = BTreeMap::new();
            for line in split_list(members) {
                let spec = ServerSpec::parse_line(line).map_err(bad)?;
                next.insert(spec.id, spec);
            }
            next
        }
        None => {
            let mut next = current.servers.clone();
            for id in args
                .leaving
                .as_deref()
                .map(split_list)
                .into_iter()
                .flatten()
            {
                // Java's NumberFormatException: MARSHALLINGERROR, as in ZooKeeper.
                let id: u64 = id.parse().map_err(|_| ErrorCode::MarshallingError)?;
                next.remove(&id);
            }
            for joiner in args
                .joining
                .as_deref()
                .map(split_list)
                .into_iter()
                .flatten()
            {
                let spec = ServerSpec::parse_line(joiner).map_err(bad)?;
                // Each joiner needs a client port (ZooKeeper: "at least 3 ports").
                if spec.client.is_none() {
                    return Err(ErrorCode::BadArguments);
                }
                let clash = next.values().any(|o| {
                    o.id != spec.id
                        && o.host == spec.host
                        && (o.quorum_port == spec.quorum_port
                            || o.election_port == spec.election_port)
                });
                if clash {
                    return Err(ErrorCode::BadArguments);
                }
                next.insert(spec.id, spec);
            }
            next
        }
    };
    let voters: BTreeSet<u64> = next
        .values()
        .filter(|s| !s.observer)
        .map(|s| s.id)
        .collect();
    if voters.is_empty() {
        return Err(ErrorCode::BadArguments);
    }
    if !leader.quorum_synced(&voters) {
        return Err(ErrorCode::NewConfigNoQuorum);
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct View {
        busy: bool,
        synced: BTreeSet<u64>,
    }

    impl LeaderView for View {
        fn in_progress(&self) -> bool {
            self.busy
        }
        fn quorum_synced(&self, voters: &BTreeSet<u64>) -> bool {
            voters.iter().filter(|v| self.synced.contains(v)).count() * 2 > voters.len()
        }
    }

    fn view(synced: &[u64]) -> View {
        View {
            busy: false,
            synced: synced.iter().copied().collect(),
        }
    }

    /// What Apache ZooKeeper 3.8 served for a fresh 3-member ensemble.
    const THREE: &str = "server.1=127.0.0.1:19035:19038:participant;127.0.0.1:19032\n\
        server.2=127.0.0.1:19036:19039:participant;127.0.0.1:19033\n\
        server.3=127.0.0.1:19037:19040:participant;127.0.0.1:19034\n\
        version=100000000";

    fn args(j: Option<&str>, l: Option<&str>, m: Option<&str>, from: i64) -> ReconfigArgs {
        ReconfigArgs {
            joining: j.map(String::from),
            leaving: l.map(String::from),
            new_members: m.map(String::from),
            from_config: from,
        }
    }

    #[test]
    fn the_config_text_round_trips_in_zookeepers_format() {
        let c = DynamicConfig::parse(THREE).unwrap();
        assert_eq!(c.version, INITIAL_VERSION);
        assert_eq!(c.voters().len(), 3);
        assert_eq!(c.text(), THREE);
    }

    #[test]
    fn server_strings_are_written_back_with_role_and_client_address() {
        let s = ServerSpec::parse_line("server.4=10.0.0.4:2888:3888;2181").unwrap();
        assert_eq!(
            s.line(),
            "server.4=10.0.0.4:2888:3888:participant;0.0.0.0:2181"
        );
        let s = ServerSpec::parse_line("server.5=h:1:2:observer;127.0.0.1:3").unwrap();
        assert!(s.observer);
        assert_eq!(s.line(), "server.5=h:1:2:observer;127.0.0.1:3");
        for bad in [
            "server.x=h:1:2",
            "server.1=h:1",
            "server.1=h:1:2:boss",
            "srv.1=h:1:2",
        ] {
            assert!(ServerSpec::parse_line(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn incremental_and_non_incremental_changes() {
        let c = DynamicConfig::parse(THREE).unwrap();
        let all = view(&[1, 2, 3, 4]);
        let next = next_config(&c, &args(None, Some("3"), None, -1), &all).unwrap();
        assert_eq!(next.keys().copied().collect::<Vec<_>>(), [1, 2]);
        let joining = "server.4=127.0.0.1:1:2:observer;127.0.0.1:3";
        let next = next_config(&c, &args(Some(joining), None, None, c.version), &all).unwrap();
        assert!(next[&4].observer && next.len() == 4);
        let grown = DynamicConfig {
            servers: next,
            version: 0x100000005,
        };
        assert_eq!(grown.observers().into_iter().collect::<Vec<_>>(), [4]);
        assert!(grown.text().ends_with("\nversion=100000005"));
        let members = "server.1=127.0.0.1:19035:19038;19032,server.2=127.0.0.1:19036:19039;19033";
        let next = next_config(&c, &args(None, None, Some(members), -1), &all).unwrap();
        assert_eq!(next.len(), 2);
    }

    #[test]
    fn refusals_in_zookeepers_order() {
        let c = DynamicConfig::parse(THREE).unwrap();
        let all = view(&[1, 2, 3]);
        let busy = View {
            busy: true,
            ..view(&[1, 2, 3])
        };
        let remove3 = args(None, Some("3"), None, 7);
        assert_eq!(
            next_config(&c, &remove3, &busy),
            Err(ErrorCode::ReconfigInProgress)
        );
        assert_eq!(next_config(&c, &remove3, &all), Err(ErrorCode::BadVersion));
        let everyone = args(None, Some("1,2,3"), None, -1);
        assert_eq!(
            next_config(&c, &everyone, &all),
            Err(ErrorCode::BadArguments)
        );
        let no_client = args(Some("server.4=h:1:2"), None, None, -1);
        assert_eq!(
            next_config(&c, &no_client, &all),
            Err(ErrorCode::BadArguments)
        );
        let clash = args(Some("server.4=127.0.0.1:19035:9;1"), None, None, -1);
        assert_eq!(next_config(&c, &clash, &all), Err(ErrorCode::BadArguments));
        // Two joiners that never started: 3 of 5 voters synced is still a quorum; three
        // are not.
        let two = "server.4=h:1:2;3,server.5=h:4:5;6";
        assert!(next_config(&c, &args(Some(two), None, None, -1), &all).is_ok());
        let three = format!("{two},server.6=h:7:8;9");
        assert_eq!(
            next_config(&c, &args(Some(&three), None, None, -1), &all),
            Err(ErrorCode::NewConfigNoQuorum)
        );
        for (bad, code) in [
            (args(None, None, Some(""), -1), ErrorCode::MarshallingError),
            (args(None, Some("x"), None, -1), ErrorCode::MarshallingError),
            (
                args(None, None, Some("server.1=h"), -1),
                ErrorCode::BadArguments,
            ),
        ] {
            assert_eq!(next_config(&c, &bad, &all), Err(code), "{bad:?}");
        }
    }

    #[test]
    fn a_members_own_view_is_served_but_not_committed() {
        let mut tree = DataTree::default();
        assert_eq!(committed(&tree), None);
        let local = THREE.replace("version=100000000", "version=0");
        show_local(&mut tree, &local);
        let node = tree.get(CONFIG).unwrap();
        assert_eq!(node.data(), Some(local.as_bytes()));
        assert_eq!(node.mzxid(), LOCAL_VERSION);
        assert_eq!(committed(&tree), None, "a local view is not committed");
        state_first(&mut tree, 1_700_000_000_000, THREE, &mut Vec::new());
        assert_eq!(committed(&tree), DynamicConfig::parse(THREE).ok());
        // A committed configuration is never overwritten by a local view.
        show_local(&mut tree, "server.9=h:1:2;3\nversion=100000000");
        assert_eq!(committed(&tree), DynamicConfig::parse(THREE).ok());
    }

    #[test]
    fn null_and_empty_strings_are_told_apart() {
        let mut b = bytes::BytesMut::new();
        use bytes::BufMut;
        b.put_i32(-1);
        b.put_i32(1);
        b.put_slice(b"3");
        b.put_i32(0);
        b.put_i64(-1);
        let a = ReconfigArgs::decode(b.freeze()).unwrap();
        assert_eq!(a, args(None, Some("3"), Some(""), -1));
        assert!(ReconfigArgs::decode(Bytes::from_static(b"\0\0")).is_err());
    }
}
