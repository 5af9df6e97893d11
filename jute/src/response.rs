//! Response bodies, decoded by the opcode of the request they answer.
//!
//! The server mostly encodes responses straight from its tree (no intermediate values); this
//! enum is what clients (the bench, the conformance suite, the recipes) decode into, and what
//! the server uses for multi results.

use bytes::{Bytes, BytesMut};

use crate::codec::{DecodeError, Reader, Record};
use crate::opcode::OpCode;
use crate::records::*;
use crate::request::MULTI_END;

/// One result inside a multi response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// op 1: the created path.
    Create(String),
    /// op 15 (also createContainer and createTTL inside a multi): path and stat.
    Create2(String, Stat),
    Delete,
    SetData(Stat),
    Check,
    GetChildren(Vec<String>),
    GetData(Option<Bytes>, Stat),
    /// op -1: the op's error code (0 for ops before a failing op).
    Error(i32),
}

impl MultiResult {
    fn opcode(&self) -> i32 {
        match self {
            MultiResult::Create(_) => OpCode::Create.code(),
            MultiResult::Create2(..) => OpCode::Create2.code(),
            MultiResult::Delete => OpCode::Delete.code(),
            MultiResult::SetData(_) => OpCode::SetData.code(),
            MultiResult::Check => OpCode::Check.code(),
            MultiResult::GetChildren(_) => OpCode::GetChildren.code(),
            MultiResult::GetData(..) => OpCode::GetData.code(),
            MultiResult::Error(_) => OpCode::Error.code(),
        }
    }

    /// Encodes the header and body of one result.
    pub fn encode(&self, out: &mut BytesMut) {
        let err = match self {
            MultiResult::Error(e) => *e,
            _ => 0,
        };
        MultiHeader {
            op: self.opcode(),
            done: false,
            err,
        }
        .encode(out);
        match self {
            MultiResult::Create(p) => CreateResponse { path: p.clone() }.encode(out),
            MultiResult::Create2(p, s) => {
                crate::WriteExt::put_ustring(out, p);
                s.encode(out);
            }
            MultiResult::Delete | MultiResult::Check => {}
            MultiResult::SetData(s) => s.encode(out),
            MultiResult::GetChildren(c) => crate::WriteExt::put_string_vec(out, c),
            MultiResult::GetData(d, s) => {
                crate::WriteExt::put_buffer(out, d.as_deref());
                s.encode(out);
            }
            MultiResult::Error(e) => ErrorResponse { err: *e }.encode(out),
        }
    }

    fn decode(h: &MultiHeader, r: &mut Reader) -> Result<MultiResult, DecodeError> {
        Ok(match OpCode::from_code(h.op) {
            Some(OpCode::Create) => MultiResult::Create(CreateResponse::decode(r)?.path),
            Some(OpCode::Create2) => {
                let c = Create2Response::decode(r)?;
                MultiResult::Create2(c.path, c.stat)
            }
            Some(OpCode::Delete) => MultiResult::Delete,
            Some(OpCode::Check) => MultiResult::Check,
            Some(OpCode::SetData) => MultiResult::SetData(SetDataResponse::decode(r)?.stat),
            Some(OpCode::GetChildren) => {
                MultiResult::GetChildren(GetChildrenResponse::decode(r)?.children)
            }
            Some(OpCode::GetData) => {
                let g = GetDataResponse::decode(r)?;
                MultiResult::GetData(g.data, g.stat)
            }
            Some(OpCode::Error) => MultiResult::Error(ErrorResponse::decode(r)?.err),
            _ => return Err(DecodeError::BadMulti("invalid type in multi response")),
        })
    }
}

/// Encodes a whole multi response body: the results, then the end marker.
pub fn encode_multi_results(results: &[MultiResult], out: &mut BytesMut) {
    for r in results {
        r.encode(out);
    }
    MULTI_END.encode(out);
}

/// A decoded response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// No body: delete, check, ping, setWatches, auth, closeSession, errors, removeWatches...
    Empty,
    Create(String),
    Create2(String, Stat),
    /// exists, setData, setACL.
    Stat(Stat),
    GetData(Option<Bytes>, Stat),
    GetChildren(Vec<String>),
    GetChildren2(Vec<String>, Stat),
    GetAcl(Vec<Acl>, Stat),
    /// sync's echo of the path (null when the request's path was null).
    Sync(Option<String>),
    Multi(Vec<MultiResult>),
    AllChildrenNumber(i32),
    Ephemerals(Vec<String>),
    WhoAmI(Vec<ClientInfo>),
}

impl Response {
    /// Decodes the body of a successful reply to a request with opcode `op`.
    /// (A reply whose header carries an error has no body; do not call this for it,
    /// except for multi, whose failures travel inside the body.)
    pub fn decode(op: OpCode, r: &mut Reader) -> Result<Response, DecodeError> {
        Ok(match op {
            OpCode::Create => Response::Create(CreateResponse::decode(r)?.path),
            OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => {
                let c = Create2Response::decode(r)?;
                Response::Create2(c.path, c.stat)
            }
            OpCode::Exists | OpCode::SetData | OpCode::SetAcl => Response::Stat(Stat::decode(r)?),
            OpCode::GetData => {
                let g = GetDataResponse::decode(r)?;
                Response::GetData(g.data, g.stat)
            }
            OpCode::GetChildren => Response::GetChildren(GetChildrenResponse::decode(r)?.children),
            OpCode::GetChildren2 => {
                let g = GetChildren2Response::decode(r)?;
                Response::GetChildren2(g.children, g.stat)
            }
            OpCode::GetAcl => {
                let g = GetAclResponse::decode(r)?;
                Response::GetAcl(g.acl, g.stat)
            }
            OpCode::Sync => Response::Sync(SyncResponse::decode(r)?.path),
            OpCode::Multi | OpCode::MultiRead => {
                let mut results = Vec::new();
                loop {
                    let h = MultiHeader::decode(r)?;
                    if h.done {
                        break;
                    }
                    results.push(MultiResult::decode(&h, r)?);
                }
                Response::Multi(results)
            }
            OpCode::GetAllChildrenNumber => {
                Response::AllChildrenNumber(GetAllChildrenNumberResponse::decode(r)?.total_number)
            }
            OpCode::GetEphemerals => {
                Response::Ephemerals(GetEphemeralsResponse::decode(r)?.ephemerals)
            }
            OpCode::WhoAmI => Response::WhoAmI(WhoAmIResponse::decode(r)?.client_info),
            _ => Response::Empty,
        })
    }

    /// Encodes the body (used by tests and by the server for multi).
    pub fn encode(&self, out: &mut BytesMut) {
        use crate::WriteExt;
        match self {
            Response::Empty => {}
            Response::Create(p) => out.put_ustring(p),
            Response::Sync(p) => SyncResponse { path: p.clone() }.encode(out),
            Response::Create2(p, s) => {
                out.put_ustring(p);
                s.encode(out);
            }
            Response::Stat(s) => s.encode(out),
            Response::GetData(d, s) => {
                out.put_buffer(d.as_deref());
                s.encode(out);
            }
            Response::GetChildren(c) | Response::Ephemerals(c) => out.put_string_vec(c),
            Response::GetChildren2(c, s) => {
                out.put_string_vec(c);
                s.encode(out);
            }
            Response::GetAcl(a, s) => {
                GetAclResponse {
                    acl: a.clone(),
                    stat: s.clone(),
                }
                .encode(out);
            }
            Response::Multi(results) => encode_multi_results(results, out),
            Response::AllChildrenNumber(n) => bytes::BufMut::put_i32(out, *n),
            Response::WhoAmI(c) => WhoAmIResponse {
                client_info: c.clone(),
            }
            .encode(out),
        }
    }
}
