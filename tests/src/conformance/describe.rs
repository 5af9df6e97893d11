//! How requests and incoming frames are written into a transcript line.

use jute::{MultiOp, OpCode, Request};

use super::transcript::{fmt_acls, fmt_data, fmt_err, hex, LineBuf};
use crate::raw_client::{Body, ConnectOptions, Event, Handshake, Incoming, Reply};

fn data(d: &Option<bytes::Bytes>) -> String {
    fmt_data(d.as_ref())
}

fn list(v: &[String]) -> String {
    format!("{v:?}")
}

fn multi_op(op: &MultiOp) -> String {
    match op {
        MultiOp::Create(r) => format!("create {:?} {} flags={}", r.path, data(&r.data), r.flags),
        MultiOp::Create2(r) => format!("create2 {:?} {} flags={}", r.path, data(&r.data), r.flags),
        MultiOp::CreateContainer(r) => format!("createContainer {:?} {}", r.path, data(&r.data)),
        MultiOp::CreateTtl(r) => format!(
            "createTTL {:?} {} flags={} ttl={}",
            r.path,
            data(&r.data),
            r.flags,
            r.ttl
        ),
        MultiOp::Delete(r) => format!("delete {:?} version={}", r.path, r.version),
        MultiOp::SetData(r) => {
            format!(
                "setData {:?} {} version={}",
                r.path,
                data(&r.data),
                r.version
            )
        }
        MultiOp::Check(r) => format!("check {:?} version={}", r.path, r.version),
        MultiOp::GetChildren(r) => format!("getChildren {:?} watch={}", r.path, r.watch),
        MultiOp::GetData(r) => format!("getData {:?} watch={}", r.path, r.watch),
    }
}

/// Appends a description of `req` to `l`.
pub fn request(req: &Request, l: &mut LineBuf) {
    use Request::*;
    let text = match req {
        Create(r) | Create2(r) | CreateContainer(r) => format!(
            "{} {:?} {} acl={} flags={}",
            match req {
                Create(_) => "create",
                Create2(_) => "create2",
                _ => "createContainer",
            },
            r.path,
            data(&r.data),
            fmt_acls(&r.acl),
            r.flags
        ),
        CreateTtl(r) => format!(
            "createTTL {:?} {} acl={} flags={} ttl={}",
            r.path,
            data(&r.data),
            fmt_acls(&r.acl),
            r.flags,
            r.ttl
        ),
        Delete(r) => format!("delete {:?} version={}", r.path, r.version),
        Exists(r) => format!("exists {:?} watch={}", r.path, r.watch),
        GetData(r) => format!("getData {:?} watch={}", r.path, r.watch),
        SetData(r) => format!(
            "setData {:?} {} version={}",
            r.path,
            data(&r.data),
            r.version
        ),
        GetAcl(r) => format!("getACL {:?}", r.path),
        SetAcl(r) => format!(
            "setACL {:?} acl={} version={}",
            r.path,
            fmt_acls(&r.acl),
            r.version
        ),
        GetChildren(r) => format!("getChildren {:?} watch={}", r.path, r.watch),
        GetChildren2(r) => format!("getChildren2 {:?} watch={}", r.path, r.watch),
        Sync(r) => format!("sync {:?}", r.path),
        Ping => "ping".into(),
        Check(r) => format!("check {:?} version={}", r.path, r.version),
        Multi(ops) | MultiRead(ops) => {
            let name = if matches!(req, Multi(_)) {
                "multi"
            } else {
                "multiRead"
            };
            let parts: Vec<String> = ops.iter().map(multi_op).collect();
            format!("{name}[{}]", parts.join(" | "))
        }
        Reconfig(r) => format!("reconfig {r:?}"),
        CheckWatches(r) => format!("checkWatches {:?} type={}", r.path, r.watcher_type),
        RemoveWatches(r) => format!("removeWatches {:?} type={}", r.path, r.watcher_type),
        Auth(a) => format!(
            "auth type={} scheme={:?} auth={}",
            a.auth_type,
            a.scheme,
            data(&a.auth)
        ),
        SetWatches(s) => {
            l.t("setWatches relativeZxid=").zxid(s.relative_zxid);
            format!(
                " data={} exist={} child={}",
                list(&s.data_watches),
                list(&s.exist_watches),
                list(&s.child_watches)
            )
        }
        SetWatches2(s) => {
            l.t("setWatches2 relativeZxid=").zxid(s.relative_zxid);
            format!(
                " data={} exist={} child={} persistent={} recursive={}",
                list(&s.data_watches),
                list(&s.exist_watches),
                list(&s.child_watches),
                list(&s.persistent_watches),
                list(&s.persistent_recursive_watches)
            )
        }
        GetEphemerals(r) => format!("getEphemerals {:?}", r.prefix_path),
        GetAllChildrenNumber(r) => format!("getAllChildrenNumber {:?}", r.path),
        AddWatch(r) => format!("addWatch {:?} mode={}", r.path, r.mode),
        WhoAmI => "whoAmI".into(),
        CloseSession => "closeSession".into(),
    };
    l.t(text);
}

/// The name of an opcode, or its number.
pub fn opcode(op: Option<i32>) -> String {
    match op {
        Some(code) => match OpCode::from_code(code) {
            Some(o) => format!("{o:?}"),
            None => format!("op{code}"),
        },
        None => "?".into(),
    }
}

pub fn reply(r: &Reply, l: &mut LineBuf) {
    l.t(format!("reply xid={} zxid=", r.xid))
        .zxid(r.zxid)
        .t(format!(" err={} {}", fmt_err(r.err), opcode(r.opcode)));
    match &r.body {
        Body::None => {}
        Body::Decoded(resp) => {
            l.t(" ");
            l.response(resp);
            // Strings were decoded lossily: show the bytes when that hid something.
            if format!("{resp:?}").contains('\u{fffd}') {
                l.t(format!(" raw={}", long_hex(&r.raw_body)));
            }
        }
        Body::Raw { bytes, .. } => {
            l.t(format!(" raw[{}]={}", bytes.len(), short_hex(bytes)));
        }
    }
    if !r.trailing.is_empty() {
        l.t(format!(
            " trailing[{}]={}",
            r.trailing.len(),
            short_hex(&r.trailing)
        ));
    }
}

pub fn event(e: &Event, l: &mut LineBuf) {
    let ty = jute::EventType::from_code(e.event.event_type)
        .map(|t| format!("{t:?}"))
        .unwrap_or_else(|| format!("type{}", e.event.event_type));
    l.t("event zxid=").zxid(e.zxid).t(format!(
        " err={} {} state={} path={:?}",
        fmt_err(e.err),
        ty,
        e.event.state,
        e.event.path
    ));
    if !e.trailing.is_empty() {
        l.t(format!(" trailing={}", short_hex(&e.trailing)));
    }
}

pub fn handshake(h: &Handshake, l: &mut LineBuf) {
    let r = &h.response;
    let zero = r.passwd.iter().all(|b| *b == 0);
    l.t(format!(
        "handshake response len={} protocolVersion={} timeout={} sessionId=",
        h.len, r.protocol_version, r.timeout
    ))
    .session(r.session_id)
    .t(format!(
        " passwd={}B{} readOnly={:?}",
        r.passwd.len(),
        if zero { " all-zero" } else { "" },
        r.read_only
    ));
}

/// Appends an incoming item (without the label).
pub fn incoming(i: &Incoming, l: &mut LineBuf) {
    match i {
        Incoming::Handshake(h) => handshake(h, l),
        Incoming::Reply(r) => reply(r, l),
        Incoming::Event(e) => event(e, l),
        Incoming::Garbage { bytes, why } => {
            l.t(format!(
                "garbage[{}] {} ({why})",
                bytes.len(),
                short_hex(bytes)
            ));
        }
        Incoming::Closed { .. } => {
            l.t("connection closed by server");
        }
    }
}

pub fn short_hex(b: &[u8]) -> String {
    if b.len() <= 48 {
        hex(b)
    } else {
        format!("{}..", hex(&b[..48]))
    }
}

/// Hex of up to 512 bytes, then truncated.
pub fn long_hex(b: &[u8]) -> String {
    if b.len() <= 512 {
        hex(b)
    } else {
        format!("{}..", hex(&b[..512]))
    }
}

/// The line of a handshake a session sends.
pub fn connect(label: &str, opts: &ConnectOptions) -> LineBuf {
    let mut l = LineBuf::new(format!(
        "{label} -> connect protocolVersion={} lastZxidSeen=",
        opts.protocol_version
    ));
    let zeros = if opts.passwd.iter().all(|b| *b == 0) {
        " all-zero"
    } else {
        ""
    };
    l.zxid(opts.last_zxid_seen)
        .t(format!(" timeout={} sessionId=", opts.timeout_ms))
        .session(opts.session_id)
        .t(format!(
            " passwd={}B{zeros} readOnly={:?}",
            opts.passwd.len(),
            opts.read_only
        ));
    l
}

/// A copy of `inc` with the ACL list of a getACL reply sorted.
pub fn sorted_acls(inc: &Incoming) -> Incoming {
    let mut inc = inc.clone();
    if let Incoming::Reply(r) = &mut inc {
        if let Body::Decoded(jute::Response::GetAcl(acl, _)) = &mut r.body {
            acl.sort_by(|a, b| {
                (&a.id.scheme, &a.id.id, a.perms).cmp(&(&b.id.scheme, &b.id.id, b.perms))
            });
        }
    }
    inc
}
