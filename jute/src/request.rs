//! Client requests: the header's opcode selects the body record.
//!
//! The server decodes with [`Request::decode`]; clients (tests, the bench, the recipes)
//! encode with [`Request::encode`]. Multi requests are a run of [`MultiHeader`]s each
//! followed by an op, ended by the header `{-1, true, -1}` (`MultiOperationRecord`).

use bytes::{BufMut, BytesMut};

use crate::codec::{DecodeError, Reader, Record};
use crate::opcode::OpCode;
use crate::records::*;

/// The header that ends a multi request or response.
pub const MULTI_END: MultiHeader = MultiHeader {
    op: -1,
    done: true,
    err: -1,
};

/// One operation inside a multi (14) or multiRead (22).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiOp {
    Create(CreateRequest),
    Create2(CreateRequest),
    CreateContainer(CreateRequest),
    CreateTtl(CreateTtlRequest),
    Delete(DeleteRequest),
    SetData(SetDataRequest),
    Check(CheckVersionRequest),
    GetChildren(GetChildrenRequest),
    GetData(GetDataRequest),
}

impl MultiOp {
    pub fn opcode(&self) -> OpCode {
        match self {
            MultiOp::Create(_) => OpCode::Create,
            MultiOp::Create2(_) => OpCode::Create2,
            MultiOp::CreateContainer(_) => OpCode::CreateContainer,
            MultiOp::CreateTtl(_) => OpCode::CreateTtl,
            MultiOp::Delete(_) => OpCode::Delete,
            MultiOp::SetData(_) => OpCode::SetData,
            MultiOp::Check(_) => OpCode::Check,
            MultiOp::GetChildren(_) => OpCode::GetChildren,
            MultiOp::GetData(_) => OpCode::GetData,
        }
    }

    /// The path the op names.
    pub fn path(&self) -> &str {
        match self {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => &r.path,
            MultiOp::CreateTtl(r) => &r.path,
            MultiOp::Delete(r) => &r.path,
            MultiOp::SetData(r) => &r.path,
            MultiOp::Check(r) => &r.path,
            MultiOp::GetChildren(r) => &r.path,
            MultiOp::GetData(r) => &r.path,
        }
    }

    /// True for the ops a multiRead carries.
    pub fn is_read(&self) -> bool {
        matches!(self, MultiOp::GetChildren(_) | MultiOp::GetData(_))
    }

    fn encode_body(&self, out: &mut BytesMut) {
        match self {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => r.encode(out),
            MultiOp::CreateTtl(r) => r.encode(out),
            MultiOp::Delete(r) => r.encode(out),
            MultiOp::SetData(r) => r.encode(out),
            MultiOp::Check(r) => r.encode(out),
            MultiOp::GetChildren(r) => r.encode(out),
            MultiOp::GetData(r) => r.encode(out),
        }
    }

    fn decode_body(op: i32, r: &mut Reader) -> Result<MultiOp, DecodeError> {
        // Every op's record starts with its path.
        if r.peek_i32() == Some(-1) {
            return Err(DecodeError::NullPathInMulti);
        }
        Ok(match OpCode::from_code(op) {
            Some(OpCode::Create) => MultiOp::Create(CreateRequest::decode(r)?),
            Some(OpCode::Create2) => MultiOp::Create2(CreateRequest::decode(r)?),
            Some(OpCode::CreateContainer) => MultiOp::CreateContainer(CreateRequest::decode(r)?),
            Some(OpCode::CreateTtl) => MultiOp::CreateTtl(CreateTtlRequest::decode(r)?),
            Some(OpCode::Delete) => MultiOp::Delete(DeleteRequest::decode(r)?),
            Some(OpCode::SetData) => MultiOp::SetData(SetDataRequest::decode(r)?),
            Some(OpCode::Check) => MultiOp::Check(CheckVersionRequest::decode(r)?),
            Some(OpCode::GetChildren) => MultiOp::GetChildren(GetChildrenRequest::decode(r)?),
            Some(OpCode::GetData) => MultiOp::GetData(GetDataRequest::decode(r)?),
            _ => return Err(DecodeError::BadMulti("invalid type of op")),
        })
    }
}

fn decode_multi(r: &mut Reader) -> Result<Vec<MultiOp>, DecodeError> {
    let mut ops = Vec::new();
    loop {
        let h = MultiHeader::decode(r)?;
        if h.done {
            return Ok(ops);
        }
        // Each op needs at least a header and a path length; this bounds the loop by the frame.
        ops.push(MultiOp::decode_body(h.op, r)?);
    }
}

fn encode_multi(ops: &[MultiOp], out: &mut BytesMut) {
    for op in ops {
        MultiHeader {
            op: op.opcode().code(),
            done: false,
            err: -1,
        }
        .encode(out);
        op.encode_body(out);
    }
    MULTI_END.encode(out);
}

/// A decoded client request (the body after `RequestHeader`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Create(CreateRequest),
    Create2(CreateRequest),
    CreateContainer(CreateRequest),
    CreateTtl(CreateTtlRequest),
    Delete(DeleteRequest),
    Exists(ExistsRequest),
    GetData(GetDataRequest),
    SetData(SetDataRequest),
    GetAcl(GetAclRequest),
    SetAcl(SetAclRequest),
    GetChildren(GetChildrenRequest),
    GetChildren2(GetChildrenRequest),
    Sync(SyncRequest),
    Ping,
    Check(CheckVersionRequest),
    Multi(Vec<MultiOp>),
    MultiRead(Vec<MultiOp>),
    Reconfig(ReconfigRequest),
    CheckWatches(CheckWatchesRequest),
    RemoveWatches(RemoveWatchesRequest),
    Auth(AuthPacket),
    SetWatches(SetWatches),
    SetWatches2(SetWatches2),
    GetEphemerals(GetEphemeralsRequest),
    GetAllChildrenNumber(GetAllChildrenNumberRequest),
    AddWatch(AddWatchRequest),
    WhoAmI,
    CloseSession,
}

impl Request {
    pub fn opcode(&self) -> OpCode {
        use Request::*;
        match self {
            Create(_) => OpCode::Create,
            Create2(_) => OpCode::Create2,
            CreateContainer(_) => OpCode::CreateContainer,
            CreateTtl(_) => OpCode::CreateTtl,
            Delete(_) => OpCode::Delete,
            Exists(_) => OpCode::Exists,
            GetData(_) => OpCode::GetData,
            SetData(_) => OpCode::SetData,
            GetAcl(_) => OpCode::GetAcl,
            SetAcl(_) => OpCode::SetAcl,
            GetChildren(_) => OpCode::GetChildren,
            GetChildren2(_) => OpCode::GetChildren2,
            Sync(_) => OpCode::Sync,
            Ping => OpCode::Ping,
            Check(_) => OpCode::Check,
            Multi(_) => OpCode::Multi,
            MultiRead(_) => OpCode::MultiRead,
            Reconfig(_) => OpCode::Reconfig,
            CheckWatches(_) => OpCode::CheckWatches,
            RemoveWatches(_) => OpCode::RemoveWatches,
            Auth(_) => OpCode::Auth,
            SetWatches(_) => OpCode::SetWatches,
            SetWatches2(_) => OpCode::SetWatches2,
            GetEphemerals(_) => OpCode::GetEphemerals,
            GetAllChildrenNumber(_) => OpCode::GetAllChildrenNumber,
            AddWatch(_) => OpCode::AddWatch,
            WhoAmI => OpCode::WhoAmI,
            CloseSession => OpCode::CloseSession,
        }
    }

    /// Decodes the body of a request whose header carried `op`.
    /// `Err(UnknownOpcode)` means the server should answer UNIMPLEMENTED.
    pub fn decode(op: i32, r: &mut Reader) -> Result<Request, DecodeError> {
        use Request::*;
        let code = OpCode::from_code(op).ok_or(DecodeError::UnknownOpcode(op))?;
        Ok(match code {
            OpCode::Create => Create(CreateRequest::decode(r)?),
            OpCode::Create2 => Create2(CreateRequest::decode(r)?),
            OpCode::CreateContainer => CreateContainer(CreateRequest::decode(r)?),
            OpCode::CreateTtl => CreateTtl(CreateTtlRequest::decode(r)?),
            OpCode::Delete => Delete(DeleteRequest::decode(r)?),
            OpCode::Exists => Exists(ExistsRequest::decode(r)?),
            OpCode::GetData => GetData(GetDataRequest::decode(r)?),
            OpCode::SetData => SetData(SetDataRequest::decode(r)?),
            OpCode::GetAcl => GetAcl(GetAclRequest::decode(r)?),
            OpCode::SetAcl => SetAcl(SetAclRequest::decode(r)?),
            OpCode::GetChildren => GetChildren(GetChildrenRequest::decode(r)?),
            OpCode::GetChildren2 => GetChildren2(GetChildrenRequest::decode(r)?),
            OpCode::Sync => Sync(SyncRequest::decode(r)?),
            OpCode::Ping => Ping,
            OpCode::Check => Check(CheckVersionRequest::decode(r)?),
            OpCode::Multi => Multi(decode_multi(r)?),
            OpCode::MultiRead => MultiRead(decode_multi(r)?),
            OpCode::Reconfig => Reconfig(ReconfigRequest::decode(r)?),
            OpCode::CheckWatches => CheckWatches(CheckWatchesRequest::decode(r)?),
            OpCode::RemoveWatches => RemoveWatches(RemoveWatchesRequest::decode(r)?),
            OpCode::Auth => Auth(AuthPacket::decode(r)?),
            OpCode::SetWatches => SetWatches(crate::records::SetWatches::decode(r)?),
            OpCode::SetWatches2 => SetWatches2(crate::records::SetWatches2::decode(r)?),
            OpCode::GetEphemerals => GetEphemerals(GetEphemeralsRequest::decode(r)?),
            OpCode::GetAllChildrenNumber => {
                GetAllChildrenNumber(GetAllChildrenNumberRequest::decode(r)?)
            }
            OpCode::AddWatch => AddWatch(AddWatchRequest::decode(r)?),
            OpCode::WhoAmI => WhoAmI,
            OpCode::CloseSession => CloseSession,
            OpCode::Notification
            | OpCode::Sasl
            | OpCode::DeleteContainer
            | OpCode::CreateSession
            | OpCode::Error => return Err(DecodeError::UnknownOpcode(op)),
        })
    }

    /// Encodes the body only (no header).
    pub fn encode_body(&self, out: &mut BytesMut) {
        use Request::*;
        match self {
            Create(r) | Create2(r) | CreateContainer(r) => r.encode(out),
            CreateTtl(r) => r.encode(out),
            Delete(r) => r.encode(out),
            Exists(r) => r.encode(out),
            GetData(r) => r.encode(out),
            SetData(r) => r.encode(out),
            GetAcl(r) => r.encode(out),
            SetAcl(r) => r.encode(out),
            GetChildren(r) | GetChildren2(r) => r.encode(out),
            Sync(r) => r.encode(out),
            Ping | WhoAmI | CloseSession => {}
            Check(r) => r.encode(out),
            Multi(ops) | MultiRead(ops) => encode_multi(ops, out),
            Reconfig(r) => r.encode(out),
            CheckWatches(r) => r.encode(out),
            RemoveWatches(r) => r.encode(out),
            Auth(r) => r.encode(out),
            SetWatches(r) => r.encode(out),
            SetWatches2(r) => r.encode(out),
            GetEphemerals(r) => r.encode(out),
            GetAllChildrenNumber(r) => r.encode(out),
            AddWatch(r) => r.encode(out),
        }
    }

    /// Encodes header and body (no length prefix).
    pub fn encode(&self, xid: i32, out: &mut BytesMut) {
        out.put_i32(xid);
        out.put_i32(self.opcode().code());
        self.encode_body(out);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_null_path_in_a_multi_op_is_its_own_error() {
        use bytes::BufMut;
        let mut b = BytesMut::new();
        MultiHeader {
            op: OpCode::Delete.code(),
            done: false,
            err: -1,
        }
        .encode(&mut b);
        b.put_i32(-1);
        b.put_i32(-1);
        MULTI_END.encode(&mut b);
        assert_eq!(
            Request::decode(OpCode::Multi.code(), &mut Reader::new(b.freeze())),
            Err(DecodeError::NullPathInMulti)
        );
    }

    use super::*;
    use bytes::Bytes;

    #[test]
    fn multi_round_trips() {
        let req = Request::Multi(vec![
            MultiOp::Create(CreateRequest {
                path: "/a".into(),
                data: None,
                acl: vec![Acl::open_unsafe()],
                flags: 0,
            }),
            MultiOp::Check(CheckVersionRequest {
                path: "/a".into(),
                version: -1,
            }),
            MultiOp::Delete(DeleteRequest {
                path: "/a".into(),
                version: 0,
            }),
        ]);
        let mut out = BytesMut::new();
        req.encode(7, &mut out);
        let mut r = Reader::new(out.freeze());
        let h = RequestHeader::decode(&mut r).unwrap();
        assert_eq!(h, RequestHeader { xid: 7, op: 14 });
        assert_eq!(Request::decode(h.op, &mut r).unwrap(), req);
    }

    #[test]
    fn unknown_and_bad_multi_ops_are_errors() {
        let mut r = Reader::new(Bytes::new());
        assert_eq!(
            Request::decode(999, &mut r),
            Err(DecodeError::UnknownOpcode(999))
        );
        let mut body = BytesMut::new();
        MultiHeader {
            op: 3,
            done: false,
            err: -1,
        }
        .encode(&mut body);
        let mut r = Reader::new(body.freeze());
        assert!(matches!(
            Request::decode(14, &mut r),
            Err(DecodeError::BadMulti(_))
        ));
    }
}
