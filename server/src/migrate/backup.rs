//! Online backup and restore.
//!
//! **Where the backup is served.** On the admin port (`admin.serverPort`, with
//! `admin.serverAddress`), as `GET /commands/snapshot` — the path ZooKeeper 3.9's admin
//! server gives its own streaming snapshot — and only when that port is configured. Not on
//! the peer port: that one carries Raft's framed messages between members and is meant to
//! be reachable by members only, so an operator tool would have to speak its protocol and
//! be let through the members' firewall (the admin server itself is `admin.rs`). Not a
//! four-letter word either: those are
//! answered on the client port with text and cannot be authenticated. The request must
//! carry `Authorization: digest <user>:<password>` or `Authorization: ip`, and that id must
//! hold ALL on the root znode's ACL: ZooKeeper 3.9's rule (`ops/admin/auth.rs`).
//!
//! **Consistency.** The member captures its state under the state's read lock (pointer
//! copies of the znodes, see `state::snapshot`): exactly the state after its last applied
//! zxid, which every member passes through. Encoding happens off the lock.
//!
//! **The file.** `ZRBK`, format version (u32), last zxid (i64), tree digest (u64, the
//! digest `state::snapshot::tree_digest` computes), payload length (u64), the payload
//! (zooraft's own snapshot encoding), and the SHA-1 of the payload. The client decodes the
//! payload before it writes the file, so a backup on disk is known to load; `restore`
//! checks the SHA-1, the zxid and the digest again before it writes a store.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::{BufMut, Bytes, BytesMut};
use sha1::{Digest, Sha1};

use super::{store, Reporter};
use crate::config::Config;
use crate::raft::Replica;
use crate::state::tree::TreeOptions;
use crate::state::{snapshot, StateMachine};

const MAGIC: &[u8; 4] = b"ZRBK";
const VERSION: u32 = 1;
pub(super) const PATH: &str = "/commands/snapshot";
const HEADER_LEN: usize = 4 + 4 + 8 + 8 + 8;

/// A backup file's contents, checked.
#[derive(Debug)]
struct Backup {
    last_zxid: i64,
    digest: u64,
    payload: Bytes,
}

fn encode_file(b: &Backup) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(HEADER_LEN + b.payload.len() + 20);
    out.put_slice(MAGIC);
    out.put_u32(VERSION);
    out.put_i64(b.last_zxid);
    out.put_u64(b.digest);
    out.put_u64(b.payload.len() as u64);
    out.put_slice(&b.payload);
    out.put_slice(&Sha1::digest(&b.payload));
    out.to_vec()
}

/// Parses and checks a backup file; the state it holds.
fn decode_file(bytes: &[u8], options: TreeOptions) -> anyhow::Result<(Backup, StateMachine)> {
    if bytes.len() < HEADER_LEN + 20 || &bytes[..4] != MAGIC {
        bail!("not a zooraft backup (bad magic or too short)");
    }
    let u64_at = |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().unwrap_or_default());
    let version = u32::from_be_bytes(bytes[4..8].try_into().unwrap_or_default());
    if version != VERSION {
        bail!("backup format {version} is not supported (this build reads {VERSION})");
    }
    let last_zxid = u64_at(8) as i64;
    let digest = u64_at(16);
    let len = u64_at(24);
    if len != (bytes.len() - HEADER_LEN - 20) as u64 {
        bail!(
            "the backup says its payload has {len} bytes, the file holds {}: truncated or damaged",
            bytes.len().saturating_sub(HEADER_LEN + 20)
        );
    }
    let payload = &bytes[HEADER_LEN..HEADER_LEN + len as usize];
    if Sha1::digest(payload).as_slice() != &bytes[bytes.len() - 20..] {
        bail!("the backup's checksum does not match its contents: damaged");
    }
    let payload = Bytes::copy_from_slice(payload);
    let state =
        snapshot::decode(payload.clone(), options).context("the backup's state does not load")?;
    if state.last_zxid != last_zxid {
        bail!(
            "the backup says zxid {last_zxid:#x}, its state is at {:#x}",
            state.last_zxid
        );
    }
    let found = snapshot::tree_digest(&state.tree);
    if found != digest {
        bail!("the backup's tree digest {found:#x} differs from the recorded {digest:#x}");
    }
    Ok((
        Backup {
            last_zxid,
            digest,
            payload,
        },
        state,
    ))
}

/// `GET /commands/snapshot` on the admin server (`admin.rs`): the member's state now, and
/// the zxid it is at (the state is captured under the read lock, encoded off it).
pub async fn snapshot_body(replica: &Replica) -> Option<(Bytes, i64)> {
    let view = snapshot::SnapshotView::of(&replica.state.read());
    let zxid = view.last_zxid;
    let body = tokio::task::spawn_blocking(move || snapshot::encode(&view))
        .await
        .ok()?;
    Some((body, zxid))
}

/// What the AdminServer's `restore` was sent, checked, as the snapshot encoding a
/// `Command::Restore` carries: the body of a
/// `snapshot` answer (zooraft's snapshot stream, checksummed) or a `zooraft backup` file
/// (its SHA-1, zxid and digest checked). Blocking: it decodes the whole state.
pub fn restore_payload(bytes: Bytes, options: TreeOptions) -> anyhow::Result<Bytes> {
    if bytes.starts_with(MAGIC) {
        return Ok(decode_file(&bytes, options)?.0.payload);
    }
    snapshot::decode(bytes.clone(), options)
        .context("neither a zooraft snapshot (the snapshot command's answer) nor a backup file")?;
    Ok(bytes)
}

/// Fetches a backup from `server` (the admin address) with `credentials`
/// (`<user>:<password>` for digest, or `ip`) if given, and writes it to `out_file`.
pub fn backup(
    server: &str,
    credentials: Option<&str>,
    out_file: &Path,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    use std::net::ToSocketAddrs;
    let mut r = Reporter::new(out);
    let addr = server
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {server}"))?
        .next()
        .with_context(|| format!("{server} resolves to no address"))?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .with_context(|| format!("cannot connect to {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(300)))?;
    let auth = match credentials {
        Some("ip") => "Authorization: ip\r\n".to_string(),
        Some(c) => format!("Authorization: digest {c}\r\n"),
        None => String::new(),
    };
    write!(
        s,
        "GET {PATH} HTTP/1.1\r\nHost: {server}\r\n{auth}Connection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    s.read_to_end(&mut response)
        .with_context(|| format!("reading the backup from {addr}"))?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("the answer is not HTTP")?;
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let body = &response[split + 4..];
    let status = head.lines().next().unwrap_or("");
    if !status.contains(" 200 ") {
        let hint = if status.contains(" 401 ") || status.contains(" 403 ") {
            "\n(--auth USER:PASSWORD or --auth ip: the id must hold ALL on the root znode's ACL)"
        } else {
            ""
        };
        bail!(
            "{addr} answered {status}: {}{hint}",
            String::from_utf8_lossy(body).trim()
        );
    }
    let payload = Bytes::copy_from_slice(body);
    let state = snapshot::decode(
        payload.clone(),
        TreeOptions {
            extended_types: true,
        },
    )
    .context("the member sent a state that does not load")?;
    let b = Backup {
        last_zxid: state.last_zxid,
        digest: snapshot::tree_digest(&state.tree),
        payload,
    };
    zkdata::datadir::write_durably(out_file, &encode_file(&b))?;
    r.line(format_args!(
        "backup of {addr} at zxid {:#x}: {} znodes, {} sessions, {} bytes, digest {:#x}, written to {}",
        b.last_zxid,
        state.tree.node_count() - 1,
        state.sessions.len(),
        b.payload.len(),
        b.digest,
        out_file.display()
    ));
    Ok(())
}

/// Writes a new store from a backup file, after checking it.
pub fn restore(config: &Config, file: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut r = Reporter::new(out);
    store::check_target_empty(config)?;
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let options = TreeOptions {
        extended_types: config.extended_types,
    };
    let (b, state) = decode_file(&bytes, options)
        .with_context(|| format!("{} cannot be restored", file.display()))?;
    let term = store::write_new_store(config, &state)?;
    r.line(format_args!(
        "restored {} znodes and {} sessions at zxid {:#x} (digest {:#x} checked) into {} (Raft term {term})",
        state.tree.node_count() - 1,
        state.sessions.len(),
        b.last_zxid,
        b.digest,
        store::store_dir(config).display()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_file_round_trips_and_damage_is_refused() {
        let sm = StateMachine::new(TreeOptions::default());
        let payload = snapshot::encode(&snapshot::SnapshotView::of(&sm));
        let b = Backup {
            last_zxid: 0,
            digest: snapshot::tree_digest(&sm.tree),
            payload,
        };
        let file = encode_file(&b);
        let (back, state) = decode_file(&file, TreeOptions::default()).unwrap();
        assert_eq!(back.digest, b.digest);
        assert_eq!(state.tree.node_count(), sm.tree.node_count());
        let mut flipped = file.clone();
        flipped[HEADER_LEN + 3] ^= 1;
        assert!(decode_file(&flipped, TreeOptions::default())
            .unwrap_err()
            .to_string()
            .contains("checksum"));
        assert!(decode_file(&file[..file.len() - 1], TreeOptions::default()).is_err());
        let mut wrong_zxid = file.clone();
        wrong_zxid[15] = 9;
        assert!(decode_file(&wrong_zxid, TreeOptions::default())
            .unwrap_err()
            .to_string()
            .contains("zxid"));
    }

    #[test]
    fn a_restore_takes_a_snapshot_or_a_backup_file_and_nothing_else() {
        let sm = StateMachine::new(TreeOptions::default());
        let payload = snapshot::encode(&snapshot::SnapshotView::of(&sm));
        let file = encode_file(&Backup {
            last_zxid: 0,
            digest: snapshot::tree_digest(&sm.tree),
            payload: payload.clone(),
        });
        let options = TreeOptions::default();
        let raw = restore_payload(payload.clone(), options).expect("the snapshot's answer");
        assert_eq!(raw, payload);
        let unwrapped = restore_payload(Bytes::from(file.clone()), options).expect("a backup");
        assert_eq!(unwrapped, payload);
        let mut flipped = payload.to_vec();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(restore_payload(Bytes::from(flipped), options).is_err());
        assert!(restore_payload(Bytes::from(file[..file.len() - 3].to_vec()), options).is_err());
        assert!(restore_payload(Bytes::from_static(b"ZKSN nonsense"), options).is_err());
    }
}
