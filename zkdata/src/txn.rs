//! Logged transactions: `TxnHeader` and every body a ZooKeeper 3.5–3.9 log can hold, as
//! `SerializeUtils.deserializeTxn` reads them, plus the optional `TxnDigest` after the body.
//!
//! These are *transactions* (what the leader decided), not requests: a create carries the
//! parent's new cversion, a setData the node's new version, a failed write is an `error`
//! transaction, and a multi is a list of typed sub-transactions.

use bytes::{BufMut, Bytes, BytesMut};
use jute::{Acl, DecodeError, Reader, Record, WriteExt};

/// Opcodes as they appear in a transaction header.
pub mod op {
    pub const NOTIFICATION: i32 = 0;
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const SET_DATA: i32 = 5;
    pub const SET_ACL: i32 = 7;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
    pub const ERROR: i32 = -1;
}

/// `TxnHeader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnHeader {
    pub client_id: i64,
    pub cxid: i32,
    pub zxid: i64,
    pub time: i64,
    pub kind: i32,
}

/// A transaction body.
#[derive(Debug, Clone, PartialEq)]
pub enum Txn {
    /// create (1) and create2 (15): `CreateTxn`.
    Create {
        path: String,
        data: Option<Bytes>,
        acl: Vec<Acl>,
        ephemeral: bool,
        parent_cversion: i32,
    },
    /// createContainer (19): `CreateContainerTxn`.
    CreateContainer {
        path: String,
        data: Option<Bytes>,
        acl: Vec<Acl>,
        parent_cversion: i32,
    },
    /// createTTL (21): `CreateTTLTxn`.
    CreateTtl {
        path: String,
        data: Option<Bytes>,
        acl: Vec<Acl>,
        parent_cversion: i32,
        ttl: i64,
    },
    /// delete (2) and deleteContainer (20): `DeleteTxn`.
    Delete { path: String },
    /// setData (5) and reconfig (16, on `/zookeeper/config`): `SetDataTxn`.
    SetData {
        path: String,
        data: Option<Bytes>,
        version: i32,
    },
    /// setACL (7): `SetACLTxn`.
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    /// check (13): `CheckVersionTxn`; changes nothing.
    Check { path: String, version: i32 },
    /// error (-1): `ErrorTxn`; changes nothing.
    Error { err: i32 },
    /// multi (14): sub-transactions with their opcodes.
    Multi(Vec<(i32, Txn)>),
    /// createSession (-10): `CreateSessionTxn`.
    CreateSession { timeout: i32 },
    /// closeSession (-11): `CloseSessionTxn` (3.6+: the ephemerals to delete), or no body.
    CloseSession { paths: Option<Vec<String>> },
}

/// Why a transaction could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    #[error("{0}")]
    Decode(#[from] DecodeError),
    #[error("unsupported transaction type {0}")]
    UnknownType(i32),
    #[error("invalid type {0} inside a multi")]
    BadMultiOp(i32),
}

impl TxnHeader {
    pub fn decode(r: &mut Reader) -> Result<TxnHeader, DecodeError> {
        Ok(TxnHeader {
            client_id: r.read_i64()?,
            cxid: r.read_i32()?,
            zxid: r.read_i64()?,
            time: r.read_i64()?,
            kind: r.read_i32()?,
        })
    }

    pub fn encode(&self, out: &mut BytesMut) {
        out.put_i64(self.client_id);
        out.put_i32(self.cxid);
        out.put_i64(self.zxid);
        out.put_i64(self.time);
        out.put_i32(self.kind);
    }
}

fn acls(r: &mut Reader) -> Result<Vec<Acl>, DecodeError> {
    // A null ACL vector reads as empty, as jute's generated code leaves the list null.
    r.read_vec(12, Acl::decode)
}

fn put_acls(out: &mut BytesMut, acl: &[Acl]) {
    out.put_i32(acl.len() as i32);
    for a in acl {
        a.encode(out);
    }
}

impl Txn {
    /// Reads the body of a transaction of type `kind`.
    pub fn decode(kind: i32, r: &mut Reader) -> Result<Txn, TxnError> {
        Ok(match kind {
            op::CREATE | op::CREATE2 => Txn::Create {
                path: r.read_ustring()?,
                data: r.read_buffer()?,
                acl: acls(r)?,
                ephemeral: r.read_bool()?,
                parent_cversion: r.read_i32()?,
            },
            op::CREATE_CONTAINER => Txn::CreateContainer {
                path: r.read_ustring()?,
                data: r.read_buffer()?,
                acl: acls(r)?,
                parent_cversion: r.read_i32()?,
            },
            op::CREATE_TTL => Txn::CreateTtl {
                path: r.read_ustring()?,
                data: r.read_buffer()?,
                acl: acls(r)?,
                parent_cversion: r.read_i32()?,
                ttl: r.read_i64()?,
            },
            op::DELETE | op::DELETE_CONTAINER => Txn::Delete {
                path: r.read_ustring()?,
            },
            op::SET_DATA | op::RECONFIG => Txn::SetData {
                path: r.read_ustring()?,
                data: r.read_buffer()?,
                version: r.read_i32()?,
            },
            op::SET_ACL => Txn::SetAcl {
                path: r.read_ustring()?,
                acl: acls(r)?,
                version: r.read_i32()?,
            },
            op::CHECK => Txn::Check {
                path: r.read_ustring()?,
                version: r.read_i32()?,
            },
            op::ERROR => Txn::Error { err: r.read_i32()? },
            op::CREATE_SESSION => Txn::CreateSession {
                timeout: r.read_i32()?,
            },
            // With `zookeeper.closeSessionTxn.enabled=false` the body is empty and a digest
            // may follow: a path list is taken only if it leaves nothing or exactly a digest.
            op::CLOSE_SESSION => {
                let mut probe = r.clone();
                match probe.read_string_vec() {
                    Ok(paths) if matches!(probe.remaining(), 0 | 12) => {
                        *r = probe;
                        Txn::CloseSession { paths: Some(paths) }
                    }
                    _ => Txn::CloseSession { paths: None },
                }
            }
            op::MULTI => {
                let n = r.read_i32()?;
                if n < 0 || n as usize > r.remaining() / 8 {
                    return Err(DecodeError::InvalidLength(n.into()).into());
                }
                let mut subs = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let sub_kind = r.read_i32()?;
                    let body = r.read_buffer()?.unwrap_or_default();
                    let allowed = matches!(
                        sub_kind,
                        op::CREATE
                            | op::CREATE2
                            | op::CREATE_TTL
                            | op::CREATE_CONTAINER
                            | op::DELETE
                            | op::DELETE_CONTAINER
                            | op::SET_DATA
                            | op::SET_ACL
                            | op::ERROR
                            | op::CHECK
                    );
                    if !allowed {
                        return Err(TxnError::BadMultiOp(sub_kind));
                    }
                    let sub = Txn::decode(sub_kind, &mut Reader::new(body))?;
                    subs.push((sub_kind, sub));
                }
                Txn::Multi(subs)
            }
            other => return Err(TxnError::UnknownType(other)),
        })
    }

    /// Writes the body (the opcode travels in the header, or beside a multi's sub-txn).
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            Txn::Create {
                path,
                data,
                acl,
                ephemeral,
                parent_cversion,
            } => {
                out.put_ustring(path);
                out.put_buffer(data.as_deref());
                put_acls(out, acl);
                out.put_bool_jute(*ephemeral);
                out.put_i32(*parent_cversion);
            }
            Txn::CreateContainer {
                path,
                data,
                acl,
                parent_cversion,
            } => {
                out.put_ustring(path);
                out.put_buffer(data.as_deref());
                put_acls(out, acl);
                out.put_i32(*parent_cversion);
            }
            Txn::CreateTtl {
                path,
                data,
                acl,
                parent_cversion,
                ttl,
            } => {
                out.put_ustring(path);
                out.put_buffer(data.as_deref());
                put_acls(out, acl);
                out.put_i32(*parent_cversion);
                out.put_i64(*ttl);
            }
            Txn::Delete { path } => out.put_ustring(path),
            Txn::SetData {
                path,
                data,
                version,
            } => {
                out.put_ustring(path);
                out.put_buffer(data.as_deref());
                out.put_i32(*version);
            }
            Txn::SetAcl { path, acl, version } => {
                out.put_ustring(path);
                put_acls(out, acl);
                out.put_i32(*version);
            }
            Txn::Check { path, version } => {
                out.put_ustring(path);
                out.put_i32(*version);
            }
            Txn::Error { err } => out.put_i32(*err),
            Txn::CreateSession { timeout } => out.put_i32(*timeout),
            Txn::CloseSession { paths } => {
                if let Some(p) = paths {
                    out.put_string_vec(p);
                }
            }
            Txn::Multi(subs) => {
                out.put_i32(subs.len() as i32);
                for (kind, sub) in subs {
                    out.put_i32(*kind);
                    let mut body = BytesMut::new();
                    sub.encode(&mut body);
                    out.put_buffer(Some(&body));
                }
            }
        }
    }
}

/// `TxnDigest`: the tree digest after the transaction (ZooKeeper 3.6+ with digests on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnDigest {
    pub version: i32,
    pub tree_digest: i64,
}

/// One logged record, decoded: header, body and, if present, the digest after it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedTxn {
    pub header: TxnHeader,
    pub txn: Txn,
    pub digest: Option<TxnDigest>,
}

impl LoggedTxn {
    /// Decodes a record's bytes (what the log's length prefix covers).
    pub fn decode(bytes: Bytes) -> Result<LoggedTxn, TxnError> {
        let mut r = Reader::new(bytes);
        let header = TxnHeader::decode(&mut r)?;
        let txn = Txn::decode(header.kind, &mut r)?;
        let digest = if r.remaining() >= 12 {
            Some(TxnDigest {
                version: r.read_i32()?,
                tree_digest: r.read_i64()?,
            })
        } else {
            None
        };
        Ok(LoggedTxn {
            header,
            txn,
            digest,
        })
    }

    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        self.header.encode(&mut out);
        self.txn.encode(&mut out);
        if let Some(d) = self.digest {
            out.put_i32(d.version);
            out.put_i64(d.tree_digest);
        }
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_body_round_trips() {
        let acl = vec![Acl::open_unsafe()];
        let bodies = vec![
            (
                op::CREATE,
                Txn::Create {
                    path: "/a".into(),
                    data: Some(Bytes::from_static(b"x")),
                    acl: acl.clone(),
                    ephemeral: true,
                    parent_cversion: 3,
                },
            ),
            (
                op::CREATE_CONTAINER,
                Txn::CreateContainer {
                    path: "/c".into(),
                    data: None,
                    acl: acl.clone(),
                    parent_cversion: 1,
                },
            ),
            (
                op::CREATE_TTL,
                Txn::CreateTtl {
                    path: "/t".into(),
                    data: None,
                    acl: acl.clone(),
                    parent_cversion: 2,
                    ttl: 500,
                },
            ),
            (op::DELETE_CONTAINER, Txn::Delete { path: "/c".into() }),
            (
                op::RECONFIG,
                Txn::SetData {
                    path: "/zookeeper/config".into(),
                    data: Some(Bytes::from_static(b"server.1=x")),
                    version: -1,
                },
            ),
            (
                op::SET_ACL,
                Txn::SetAcl {
                    path: "/a".into(),
                    acl: acl.clone(),
                    version: 1,
                },
            ),
            (
                op::CHECK,
                Txn::Check {
                    path: "/a".into(),
                    version: 1,
                },
            ),
            (op::ERROR, Txn::Error { err: -110 }),
            (op::CREATE_SESSION, Txn::CreateSession { timeout: 4000 }),
            (
                op::CLOSE_SESSION,
                Txn::CloseSession {
                    paths: Some(vec!["/a".into()]),
                },
            ),
            (op::CLOSE_SESSION, Txn::CloseSession { paths: None }),
            (
                op::MULTI,
                Txn::Multi(vec![
                    (
                        op::CREATE,
                        Txn::Create {
                            path: "/m".into(),
                            data: None,
                            acl,
                            ephemeral: false,
                            parent_cversion: 4,
                        },
                    ),
                    (op::ERROR, Txn::Error { err: 0 }),
                ]),
            ),
        ];
        for (kind, txn) in bodies {
            let t = LoggedTxn {
                header: TxnHeader {
                    client_id: 9,
                    cxid: 1,
                    zxid: 0x1_0000_0002,
                    time: 77,
                    kind,
                },
                txn,
                digest: Some(TxnDigest {
                    version: 2,
                    tree_digest: 1234,
                }),
            };
            assert_eq!(LoggedTxn::decode(t.encode()).unwrap(), t);
        }
    }

    #[test]
    fn bad_bodies_are_errors() {
        let mut out = BytesMut::new();
        TxnHeader {
            client_id: 1,
            cxid: 1,
            zxid: 1,
            time: 1,
            kind: 99,
        }
        .encode(&mut out);
        assert!(matches!(
            LoggedTxn::decode(out.freeze()),
            Err(TxnError::UnknownType(99))
        ));
        let mut out = BytesMut::new();
        TxnHeader {
            client_id: 1,
            cxid: 1,
            zxid: 1,
            time: 1,
            kind: op::MULTI,
        }
        .encode(&mut out);
        out.put_i32(1);
        out.put_i32(op::CREATE_SESSION);
        out.put_buffer(Some(&[0, 0, 0, 1]));
        assert!(matches!(
            LoggedTxn::decode(out.freeze()),
            Err(TxnError::BadMultiOp(-10))
        ));
    }
}
