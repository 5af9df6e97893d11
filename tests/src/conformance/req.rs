//! Short constructors for requests and multi ops, so scenarios read like the operations
//! they perform.

use bytes::Bytes;
use jute::*;

pub const PERSISTENT: i32 = 0;
pub const EPHEMERAL: i32 = 1;
pub const PERSISTENT_SEQUENTIAL: i32 = 2;
pub const EPHEMERAL_SEQUENTIAL: i32 = 3;
pub const CONTAINER: i32 = 4;
pub const PERSISTENT_WITH_TTL: i32 = 5;
pub const PERSISTENT_SEQUENTIAL_WITH_TTL: i32 = 6;

fn data(d: &[u8]) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(d))
}

pub fn open_acl() -> Vec<Acl> {
    vec![Acl::open_unsafe()]
}

pub fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
    Acl {
        perms,
        id: Id {
            scheme: scheme.into(),
            id: id.into(),
        },
    }
}

pub fn create_req(path: &str, d: Option<&[u8]>, acl: Vec<Acl>, flags: i32) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: d.map(Bytes::copy_from_slice),
        acl,
        flags,
    }
}

/// create (opcode 1), world:anyone ALL.
pub fn create(path: &str, d: &[u8], flags: i32) -> Request {
    Request::Create(create_req(path, Some(d), open_acl(), flags))
}

/// create2 (opcode 15), world:anyone ALL.
pub fn create2(path: &str, d: &[u8], flags: i32) -> Request {
    Request::Create2(create_req(path, Some(d), open_acl(), flags))
}

/// create2 with null data.
pub fn create2_null(path: &str, flags: i32) -> Request {
    Request::Create2(create_req(path, None, open_acl(), flags))
}

pub fn create2_acl(path: &str, d: &[u8], acl: Vec<Acl>, flags: i32) -> Request {
    Request::Create2(create_req(path, Some(d), acl, flags))
}

pub fn create_container(path: &str, d: &[u8]) -> Request {
    Request::CreateContainer(create_req(path, Some(d), open_acl(), CONTAINER))
}

pub fn create_ttl(path: &str, d: &[u8], flags: i32, ttl: i64) -> Request {
    Request::CreateTtl(CreateTtlRequest {
        path: path.into(),
        data: data(d),
        acl: open_acl(),
        flags,
        ttl,
    })
}

pub fn delete(path: &str, version: i32) -> Request {
    Request::Delete(DeleteRequest {
        path: path.into(),
        version,
    })
}

pub fn exists(path: &str, watch: bool) -> Request {
    Request::Exists(ExistsRequest {
        path: path.into(),
        watch,
    })
}

pub fn get_data(path: &str, watch: bool) -> Request {
    Request::GetData(GetDataRequest {
        path: path.into(),
        watch,
    })
}

pub fn set_data(path: &str, d: &[u8], version: i32) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: data(d),
        version,
    })
}

pub fn set_data_null(path: &str, version: i32) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: None,
        version,
    })
}

pub fn get_children(path: &str, watch: bool) -> Request {
    Request::GetChildren(GetChildrenRequest {
        path: path.into(),
        watch,
    })
}

pub fn get_children2(path: &str, watch: bool) -> Request {
    Request::GetChildren2(GetChildrenRequest {
        path: path.into(),
        watch,
    })
}

pub fn sync(path: &str) -> Request {
    Request::Sync(SyncRequest {
        path: Some(path.into()),
    })
}

pub fn check(path: &str, version: i32) -> Request {
    Request::Check(CheckVersionRequest {
        path: path.into(),
        version,
    })
}

pub fn multi(ops: Vec<MultiOp>) -> Request {
    Request::Multi(ops)
}

pub fn multi_read(ops: Vec<MultiOp>) -> Request {
    Request::MultiRead(ops)
}

pub fn get_acl(path: &str) -> Request {
    Request::GetAcl(GetAclRequest { path: path.into() })
}

pub fn set_acl(path: &str, acl: Vec<Acl>, version: i32) -> Request {
    Request::SetAcl(SetAclRequest {
        path: path.into(),
        acl,
        version,
    })
}

pub fn add_watch(path: &str, mode: i32) -> Request {
    Request::AddWatch(AddWatchRequest {
        path: path.into(),
        mode,
    })
}

pub fn remove_watches(path: &str, watcher_type: i32) -> Request {
    Request::RemoveWatches(RemoveWatchesRequest {
        path: path.into(),
        watcher_type,
    })
}

pub fn check_watches(path: &str, watcher_type: i32) -> Request {
    Request::CheckWatches(CheckWatchesRequest {
        path: path.into(),
        watcher_type,
    })
}

pub fn get_ephemerals(prefix: &str) -> Request {
    Request::GetEphemerals(GetEphemeralsRequest {
        prefix_path: Some(prefix.into()),
    })
}

pub fn get_all_children_number(path: &str) -> Request {
    Request::GetAllChildrenNumber(GetAllChildrenNumberRequest { path: path.into() })
}

#[allow(clippy::too_many_arguments)]
pub fn set_watches2(
    rel: i64,
    data: &[&str],
    exist: &[&str],
    child: &[&str],
    persistent: &[&str],
    recursive: &[&str],
) -> SetWatches2 {
    let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
    SetWatches2 {
        relative_zxid: rel,
        data_watches: v(data),
        exist_watches: v(exist),
        child_watches: v(child),
        persistent_watches: v(persistent),
        persistent_recursive_watches: v(recursive),
        null_entry: false,
    }
}

pub fn set_watches(rel: i64, data: &[&str], exist: &[&str], child: &[&str]) -> SetWatches {
    let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
    SetWatches {
        relative_zxid: rel,
        data_watches: v(data),
        exist_watches: v(exist),
        child_watches: v(child),
        null_entry: false,
    }
}

/// Digest ids (`user:base64(sha1("user:password"))`) of the test users, as
/// `DigestAuthenticationProvider.generateDigest` computes them.
pub const ALICE_DIGEST: &str = "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=";
pub const BOB_DIGEST: &str = "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=";
pub const CLEANER_DIGEST: &str = "cleaner:S8yW7s7jFTwT07YmonMAA7SonEA=";

/// An ACL entry giving the cleanup user every permission (see `ctx::TEST_USERS`).
pub fn cleaner() -> Acl {
    acl(jute::perms::ALL, "digest", CLEANER_DIGEST)
}

/// Whether `req` changes the tree or the session (a write, a multi or a close).
pub fn is_write(req: &Request) -> bool {
    use Request::*;
    matches!(
        req,
        Create(_)
            | Create2(_)
            | CreateContainer(_)
            | CreateTtl(_)
            | Delete(_)
            | SetData(_)
            | SetAcl(_)
            | Multi(_)
            | CloseSession
    )
}

/// Multi ops.
pub mod op {
    use super::*;

    pub fn create(path: &str, d: &[u8], flags: i32) -> MultiOp {
        MultiOp::Create(create_req(path, Some(d), open_acl(), flags))
    }

    pub fn create2(path: &str, d: &[u8], flags: i32) -> MultiOp {
        MultiOp::Create2(create_req(path, Some(d), open_acl(), flags))
    }

    pub fn create_container(path: &str, d: &[u8]) -> MultiOp {
        MultiOp::CreateContainer(create_req(path, Some(d), open_acl(), CONTAINER))
    }

    pub fn create_ttl(path: &str, d: &[u8], flags: i32, ttl: i64) -> MultiOp {
        MultiOp::CreateTtl(CreateTtlRequest {
            path: path.into(),
            data: data(d),
            acl: open_acl(),
            flags,
            ttl,
        })
    }

    pub fn delete(path: &str, version: i32) -> MultiOp {
        MultiOp::Delete(DeleteRequest {
            path: path.into(),
            version,
        })
    }

    pub fn set_data(path: &str, d: &[u8], version: i32) -> MultiOp {
        MultiOp::SetData(SetDataRequest {
            path: path.into(),
            data: data(d),
            version,
        })
    }

    pub fn check(path: &str, version: i32) -> MultiOp {
        MultiOp::Check(CheckVersionRequest {
            path: path.into(),
            version,
        })
    }

    pub fn get_data(path: &str) -> MultiOp {
        get_data_w(path, false)
    }

    pub fn get_data_w(path: &str, watch: bool) -> MultiOp {
        MultiOp::GetData(GetDataRequest {
            path: path.into(),
            watch,
        })
    }

    pub fn get_children(path: &str) -> MultiOp {
        get_children_w(path, false)
    }

    pub fn get_children_w(path: &str, watch: bool) -> MultiOp {
        MultiOp::GetChildren(GetChildrenRequest {
            path: path.into(),
            watch,
        })
    }
}
