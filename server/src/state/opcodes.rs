//! The opcode table: for every opcode a client may send, how zooraft handles it, the short
//! name `cons` shows for it (ZooKeeper's `lastOp`), and the latency family it is counted
//! in. One table, so the request path, the operator surface and the metrics agree.

use jute::OpCode;

/// How a request is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpClass {
    /// Goes through the log (create, delete, setData, setACL, check, multi, reconfig; also
    /// createSession and deleteContainer, server-internal in ZooKeeper, which a client can
    /// still send: ZooKeeper then runs them as transactions, consuming a zxid, and so does
    /// zooraft, with the same results).
    Write,
    /// closeSession: through the log, then the connection closes.
    Close,
    /// sync: a ReadIndex round; nothing after it on the connection runs until it is
    /// answered, so none of the session's later writes can overtake it.
    Sync,
    /// Answered from the local tree, in order.
    Local,
    /// Auth packets are handled on arrival, ahead of queued requests, as ZooKeeper does
    /// (clients match them by their reserved xid), so later writes carry the new identity.
    Auth,
    /// An opcode ZooKeeper 3.8 does not define (or that clients may not send).
    Unknown,
}

/// The latency families of the request metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpFamily {
    Create,
    Delete,
    Exists,
    GetData,
    SetData,
    GetChildren,
    Sync,
    Multi,
    Ping,
    Acl,
    Watch,
    Other,
}

impl OpFamily {
    /// Every family, in index order.
    pub const ALL: [OpFamily; 12] = [
        OpFamily::Create,
        OpFamily::Delete,
        OpFamily::Exists,
        OpFamily::GetData,
        OpFamily::SetData,
        OpFamily::GetChildren,
        OpFamily::Sync,
        OpFamily::Multi,
        OpFamily::Ping,
        OpFamily::Acl,
        OpFamily::Watch,
        OpFamily::Other,
    ];

    /// The `op` label of the Prometheus latency histogram.
    pub fn name(self) -> &'static str {
        match self {
            OpFamily::Create => "create",
            OpFamily::Delete => "delete",
            OpFamily::Exists => "exists",
            OpFamily::GetData => "get_data",
            OpFamily::SetData => "set_data",
            OpFamily::GetChildren => "get_children",
            OpFamily::Sync => "sync",
            OpFamily::Multi => "multi",
            OpFamily::Ping => "ping",
            OpFamily::Acl => "acl",
            OpFamily::Watch => "watch",
            OpFamily::Other => "other",
        }
    }

    /// Index into [`OpFamily::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpInfo {
    pub class: OpClass,
    /// ZooKeeper's short name (`Request.op2String` abbreviations as `cons` prints them).
    pub short_name: &'static str,
    pub family: OpFamily,
}

const fn row(class: OpClass, short_name: &'static str, family: OpFamily) -> OpInfo {
    OpInfo {
        class,
        short_name,
        family,
    }
}

/// Looks an opcode up.
pub fn info(op: i32) -> OpInfo {
    use OpClass::*;
    use OpCode as O;
    let Some(code) = OpCode::from_code(op) else {
        return row(Unknown, "NA", OpFamily::Other);
    };
    match code {
        O::Create | O::Create2 | O::CreateContainer | O::CreateTtl => {
            row(Write, "CREA", OpFamily::Create)
        }
        O::Delete => row(Write, "DELE", OpFamily::Delete),
        O::SetData => row(Write, "SETD", OpFamily::SetData),
        O::SetAcl => row(Write, "SETA", OpFamily::Acl),
        O::Check => row(Write, "CHEC", OpFamily::Multi),
        O::Multi => row(Write, "MULT", OpFamily::Multi),
        O::Reconfig | O::CreateSession | O::DeleteContainer => row(Write, "NA", OpFamily::Other),
        O::CloseSession => row(Close, "CLOS", OpFamily::Other),
        O::Sync => row(Sync, "SYNC", OpFamily::Sync),
        O::Ping => row(Local, "PING", OpFamily::Ping),
        O::Exists => row(Local, "EXIS", OpFamily::Exists),
        O::GetData => row(Local, "GETD", OpFamily::GetData),
        O::GetChildren | O::GetChildren2 => row(Local, "GETC", OpFamily::GetChildren),
        O::GetAllChildrenNumber => row(Local, "GETACN", OpFamily::GetChildren),
        O::GetAcl => row(Local, "GETA", OpFamily::Acl),
        O::WhoAmI => row(Local, "HOMI", OpFamily::Acl),
        O::GetEphemerals => row(Local, "GETE", OpFamily::Other),
        O::MultiRead => row(Local, "MLTR", OpFamily::Multi),
        O::SetWatches => row(Local, "SETW", OpFamily::Watch),
        O::SetWatches2 => row(Local, "STW2", OpFamily::Watch),
        O::AddWatch => row(Local, "ADDW", OpFamily::Watch),
        O::CheckWatches => row(Local, "CHKW", OpFamily::Watch),
        O::RemoveWatches => row(Local, "REMW", OpFamily::Watch),
        O::Auth => row(Auth, "AUTH", OpFamily::Acl),
        O::Notification | O::Sasl | O::Error => row(Unknown, "NA", OpFamily::Other),
    }
}

/// True for the requests that answer from the tree (what `linearizableReads` makes wait
/// for a ReadIndex round): not pings, watch bookkeeping or `whoAmI`.
pub fn reads_tree(op: i32) -> bool {
    use OpCode as O;
    matches!(
        OpCode::from_code(op),
        Some(
            O::Exists
                | O::GetData
                | O::GetChildren
                | O::GetChildren2
                | O::GetAllChildrenNumber
                | O::GetAcl
                | O::GetEphemerals
                | O::MultiRead
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_indexed_in_order() {
        for (i, f) in OpFamily::ALL.iter().enumerate() {
            assert_eq!(f.index(), i, "{f:?}");
        }
    }

    #[test]
    fn classes_and_names() {
        assert_eq!(info(OpCode::Create.code()).class, OpClass::Write);
        assert_eq!(info(OpCode::Create.code()).short_name, "CREA");
        assert_eq!(info(OpCode::CreateSession.code()).class, OpClass::Write);
        assert_eq!(info(OpCode::CloseSession.code()).class, OpClass::Close);
        assert_eq!(info(OpCode::Sync.code()).class, OpClass::Sync);
        assert_eq!(info(OpCode::GetData.code()).class, OpClass::Local);
        assert_eq!(info(OpCode::Auth.code()).class, OpClass::Auth);
        assert_eq!(info(OpCode::Sasl.code()).class, OpClass::Unknown);
        assert_eq!(info(12345).class, OpClass::Unknown);
        assert_eq!(info(OpCode::SetData.code()).family, OpFamily::SetData);
    }

    #[test]
    fn tree_reads() {
        for op in [
            OpCode::GetData,
            OpCode::Exists,
            OpCode::GetChildren2,
            OpCode::MultiRead,
        ] {
            assert!(reads_tree(op.code()), "{op:?}");
            assert_eq!(info(op.code()).class, OpClass::Local);
        }
        for op in [
            OpCode::Ping,
            OpCode::SetWatches,
            OpCode::WhoAmI,
            OpCode::SetData,
        ] {
            assert!(!reads_tree(op.code()), "{op:?}");
        }
        assert!(!reads_tree(12345));
    }
}
