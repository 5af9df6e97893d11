//! Property tests: every record round-trips through encode/decode, and no byte string makes a
//! decoder panic or allocate beyond the frame it was given.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use jute::*;
use proptest::prelude::*;

// ---- allocation tracking: the largest single allocation made while `TRACK` is set ----

struct Tracking;

thread_local! {
    static TRACK: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is passed on to the system allocator unchanged; the tracking only
// reads sizes into thread-locals, which allocate nothing (`try_with` also copes with a
// thread being torn down).
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = TRACK.try_with(|t| {
            if t.get() {
                let _ = LARGEST.try_with(|l| l.set(l.get().max(layout.size())));
            }
        });
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = TRACK.try_with(|t| {
            if t.get() {
                let _ = LARGEST.try_with(|l| l.set(l.get().max(new_size)));
            }
        });
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// Runs `f` and returns the largest single allocation it made.
fn largest_allocation(f: impl FnOnce()) -> usize {
    LARGEST.with(|l| l.set(0));
    TRACK.with(|t| t.set(true));
    f();
    TRACK.with(|t| t.set(false));
    LARGEST.with(|l| l.get())
}

// ---- strategies ----

/// Strings as they round-trip through jute: any text in the Basic Multilingual Plane
/// (outside it, Java's encoding writes surrogates, which read back as replacement
/// characters, as in ZooKeeper).
fn ustring() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        Just(String::new()),
        "[a-z/_\\-0-9]{0,12}",
        any::<String>().prop_map(|s| s.chars().filter(|c| (*c as u32) < 0x10000).collect()),
    ]
}

fn buffer() -> impl Strategy<Value = Option<Bytes>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from))
}

fn strings() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(ustring(), 0..5)
}

fn id() -> impl Strategy<Value = Id> {
    (ustring(), ustring()).prop_map(|(scheme, id)| Id { scheme, id })
}

fn acls() -> impl Strategy<Value = Vec<Acl>> {
    proptest::collection::vec(
        (any::<i32>(), id()).prop_map(|(perms, id)| Acl { perms, id }),
        0..4,
    )
}

prop_compose! {
    fn stat()(a in any::<i64>(), b in any::<i64>(), c in any::<i64>(), d in any::<i64>(),
              e in any::<i32>(), f in any::<i32>(), g in any::<i32>(), h in any::<i64>(),
              i in any::<i32>(), j in any::<i32>(), k in any::<i64>()) -> Stat {
        Stat { czxid: a, mzxid: b, ctime: c, mtime: d, version: e, cversion: f, aversion: g,
               ephemeral_owner: h, data_length: i, num_children: j, pzxid: k }
    }
}

fn create() -> impl Strategy<Value = CreateRequest> {
    (ustring(), buffer(), acls(), any::<i32>()).prop_map(|(path, data, acl, flags)| CreateRequest {
        path,
        data,
        acl,
        flags,
    })
}

fn multi_op() -> impl Strategy<Value = MultiOp> {
    prop_oneof![
        create().prop_map(MultiOp::Create),
        create().prop_map(MultiOp::Create2),
        create().prop_map(MultiOp::CreateContainer),
        (create(), any::<i64>()).prop_map(|(c, ttl)| MultiOp::CreateTtl(CreateTtlRequest {
            path: c.path,
            data: c.data,
            acl: c.acl,
            flags: c.flags,
            ttl
        })),
        (ustring(), any::<i32>())
            .prop_map(|(path, version)| MultiOp::Delete(DeleteRequest { path, version })),
        (ustring(), buffer(), any::<i32>()).prop_map(|(path, data, version)| MultiOp::SetData(
            SetDataRequest {
                path,
                data,
                version
            }
        )),
        (ustring(), any::<i32>())
            .prop_map(|(path, version)| MultiOp::Check(CheckVersionRequest { path, version })),
        ustring().prop_map(|path| MultiOp::GetChildren(GetChildrenRequest { path, watch: false })),
        ustring().prop_map(|path| MultiOp::GetData(GetDataRequest { path, watch: false })),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    let path_watch = (ustring(), any::<bool>());
    prop_oneof![
        create().prop_map(Request::Create),
        create().prop_map(Request::Create2),
        create().prop_map(Request::CreateContainer),
        (create(), any::<i64>()).prop_map(|(c, ttl)| Request::CreateTtl(CreateTtlRequest {
            path: c.path,
            data: c.data,
            acl: c.acl,
            flags: c.flags,
            ttl
        })),
        (ustring(), any::<i32>())
            .prop_map(|(path, version)| Request::Delete(DeleteRequest { path, version })),
        path_watch
            .clone()
            .prop_map(|(path, watch)| Request::Exists(ExistsRequest { path, watch })),
        path_watch
            .clone()
            .prop_map(|(path, watch)| Request::GetData(GetDataRequest { path, watch })),
        (ustring(), buffer(), any::<i32>()).prop_map(|(path, data, version)| Request::SetData(
            SetDataRequest {
                path,
                data,
                version
            }
        )),
        ustring().prop_map(|path| Request::GetAcl(GetAclRequest { path })),
        (ustring(), acls(), any::<i32>())
            .prop_map(|(path, acl, version)| Request::SetAcl(SetAclRequest { path, acl, version })),
        path_watch
            .clone()
            .prop_map(|(path, watch)| Request::GetChildren(GetChildrenRequest { path, watch })),
        path_watch
            .prop_map(|(path, watch)| Request::GetChildren2(GetChildrenRequest { path, watch })),
        proptest::option::of(ustring()).prop_map(|path| Request::Sync(SyncRequest { path })),
        Just(Request::Ping),
        (ustring(), any::<i32>())
            .prop_map(|(path, version)| Request::Check(CheckVersionRequest { path, version })),
        proptest::collection::vec(multi_op(), 0..5).prop_map(Request::Multi),
        proptest::collection::vec(multi_op(), 0..5).prop_map(Request::MultiRead),
        (ustring(), ustring(), ustring(), any::<i64>()).prop_map(|(a, b, c, d)| Request::Reconfig(
            ReconfigRequest {
                joining_servers: a,
                leaving_servers: b,
                new_members: c,
                cur_config_id: d
            }
        )),
        (ustring(), any::<i32>()).prop_map(|(path, watcher_type)| Request::CheckWatches(
            CheckWatchesRequest { path, watcher_type }
        )),
        (ustring(), any::<i32>()).prop_map(|(path, watcher_type)| Request::RemoveWatches(
            RemoveWatchesRequest { path, watcher_type }
        )),
        (any::<i32>(), ustring(), buffer()).prop_map(|(auth_type, scheme, auth)| Request::Auth(
            AuthPacket {
                auth_type,
                scheme,
                auth
            }
        )),
        (any::<i64>(), strings(), strings(), strings()).prop_map(|(z, d, e, c)| {
            Request::SetWatches(SetWatches {
                relative_zxid: z,
                data_watches: d,
                exist_watches: e,
                child_watches: c,
                null_entry: false,
            })
        }),
        (
            any::<i64>(),
            strings(),
            strings(),
            strings(),
            strings(),
            strings()
        )
            .prop_map(|(z, d, e, c, p, r)| Request::SetWatches2(SetWatches2 {
                relative_zxid: z,
                data_watches: d,
                exist_watches: e,
                child_watches: c,
                persistent_watches: p,
                null_entry: false,
                persistent_recursive_watches: r
            })),
        ustring().prop_map(|prefix_path| Request::GetEphemerals(GetEphemeralsRequest {
            prefix_path: Some(prefix_path)
        })),
        ustring()
            .prop_map(|path| Request::GetAllChildrenNumber(GetAllChildrenNumberRequest { path })),
        (ustring(), any::<i32>())
            .prop_map(|(path, mode)| Request::AddWatch(AddWatchRequest { path, mode })),
        Just(Request::WhoAmI),
        Just(Request::CloseSession),
    ]
}

fn multi_result() -> impl Strategy<Value = MultiResult> {
    prop_oneof![
        ustring().prop_map(MultiResult::Create),
        (ustring(), stat()).prop_map(|(p, s)| MultiResult::Create2(p, s)),
        Just(MultiResult::Delete),
        stat().prop_map(MultiResult::SetData),
        Just(MultiResult::Check),
        strings().prop_map(MultiResult::GetChildren),
        (buffer(), stat()).prop_map(|(d, s)| MultiResult::GetData(d, s)),
        any::<i32>().prop_map(MultiResult::Error),
    ]
}

/// Responses paired with the opcode that selects their decoder.
fn response() -> impl Strategy<Value = (OpCode, Response)> {
    prop_oneof![
        Just((OpCode::Delete, Response::Empty)),
        ustring().prop_map(|p| (OpCode::Create, Response::Create(p))),
        (ustring(), stat()).prop_map(|(p, s)| (OpCode::Create2, Response::Create2(p, s))),
        stat().prop_map(|s| (OpCode::Exists, Response::Stat(s))),
        (buffer(), stat()).prop_map(|(d, s)| (OpCode::GetData, Response::GetData(d, s))),
        strings().prop_map(|c| (OpCode::GetChildren, Response::GetChildren(c))),
        (strings(), stat()).prop_map(|(c, s)| (OpCode::GetChildren2, Response::GetChildren2(c, s))),
        (acls(), stat()).prop_map(|(a, s)| (OpCode::GetAcl, Response::GetAcl(a, s))),
        proptest::option::of(ustring()).prop_map(|p| (OpCode::Sync, Response::Sync(p))),
        proptest::collection::vec(multi_result(), 0..5)
            .prop_map(|r| (OpCode::Multi, Response::Multi(r))),
        any::<i32>().prop_map(|n| (OpCode::GetAllChildrenNumber, Response::AllChildrenNumber(n))),
        strings().prop_map(|e| (OpCode::GetEphemerals, Response::Ephemerals(e))),
        proptest::collection::vec((ustring(), ustring()), 0..3).prop_map(|v| (
            OpCode::WhoAmI,
            Response::WhoAmI(
                v.into_iter()
                    .map(|(auth_scheme, user)| ClientInfo { auth_scheme, user })
                    .collect()
            )
        )),
    ]
}

fn round_trip<R: Record + PartialEq + std::fmt::Debug>(value: &R) {
    let bytes = value.to_bytes();
    let mut r = Reader::new(bytes);
    assert_eq!(&R::decode(&mut r).unwrap(), value);
    assert_eq!(r.remaining(), 0, "decoder left bytes behind");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn requests_round_trip(req in request(), xid in any::<i32>()) {
        let mut out = BytesMut::new();
        req.encode(xid, &mut out);
        let mut r = Reader::new(out.freeze());
        let h = RequestHeader::decode(&mut r).unwrap();
        prop_assert_eq!(h.xid, xid);
        prop_assert_eq!(Request::decode(h.op, &mut r).unwrap(), req);
        prop_assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn responses_round_trip((op, resp) in response()) {
        let mut out = BytesMut::new();
        resp.encode(&mut out);
        let mut r = Reader::new(out.freeze());
        prop_assert_eq!(Response::decode(op, &mut r).unwrap(), resp);
        prop_assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn plain_records_round_trip(s in stat(), a in acls(), z in any::<i64>(), e in any::<i32>(),
                                 x in any::<i32>(), t in any::<i32>(), p in ustring(), b in any::<bool>()) {
        round_trip(&s);
        round_trip(&ReplyHeader { xid: x, zxid: z, err: e });
        round_trip(&RequestHeader { xid: x, op: t });
        round_trip(&MultiHeader { op: t, done: b, err: e });
        round_trip(&WatcherEvent { event_type: t, state: e, path: p.clone() });
        round_trip(&GetAclResponse { acl: a.clone(), stat: s.clone() });
        round_trip(&SetAclRequest { path: p.clone(), acl: a, version: x });
        round_trip(&ErrorResponse { err: e });
        round_trip(&CreateResponse { path: p.clone() });
        round_trip(&Create2Response { path: p.clone(), stat: s.clone() });
        round_trip(&SetDataResponse { stat: s.clone() });
        round_trip(&SetAclResponse { stat: s.clone() });
        round_trip(&ExistsResponse { stat: s });
        round_trip(&SyncResponse { path: Some(p.clone()) });
        round_trip(&SyncResponse { path: None });
        round_trip(&GetAllChildrenNumberResponse { total_number: x });
        round_trip(&GetEphemeralsResponse { ephemerals: vec![p] });
    }

    #[test]
    fn handshakes_round_trip(v in any::<i32>(), z in any::<i64>(), t in any::<i32>(), s in any::<i64>(),
                             pw in proptest::collection::vec(any::<u8>(), 0..20), ro in proptest::option::of(any::<bool>())) {
        round_trip(&ConnectRequest { protocol_version: v, last_zxid_seen: z, timeout: t, session_id: s,
                                     passwd: Bytes::from(pw.clone()), read_only: ro });
        round_trip(&ConnectResponse { protocol_version: v, timeout: t, session_id: s,
                                      passwd: Bytes::from(pw), read_only: ro });
    }

    #[test]
    fn arbitrary_bytes_never_panic_nor_overallocate(body in proptest::collection::vec(any::<u8>(), 0..512),
                                                      op in prop_oneof![-12i32..=110, any::<i32>()]) {
        let frame = Bytes::from(body);
        let limit = frame.len() * 8 + 256;
        let largest = largest_allocation(|| {
            let _ = Request::decode(op, &mut Reader::new(frame.clone()));
            let _ = ConnectRequest::decode(&mut Reader::new(frame.clone()));
            if let Some(code) = OpCode::from_code(op) {
                let _ = Response::decode(code, &mut Reader::new(frame.clone()));
            }
        });
        prop_assert!(largest <= limit, "allocated {} bytes for a {}-byte frame", largest, frame.len());
    }

    #[test]
    fn mutated_valid_requests_never_panic(req in request(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6)) {
        let mut out = BytesMut::new();
        req.encode(1, &mut out);
        for (at, v) in flips {
            if !out.is_empty() {
                let i = at % out.len();
                out[i] = v;
            }
        }
        let mut r = Reader::new(out.freeze());
        if let Ok(h) = RequestHeader::decode(&mut r) {
            let _ = Request::decode(h.op, &mut r);
        }
    }
}

#[test]
fn hostile_counts_allocate_nothing_large() {
    // A multi whose create op claims 2^31-1 ACLs in a 40-byte frame.
    let mut body = BytesMut::new();
    MultiHeader {
        op: 1,
        done: false,
        err: -1,
    }
    .encode(&mut body);
    WriteExt::put_ustring(&mut body, "/a");
    WriteExt::put_buffer(&mut body, None);
    bytes::BufMut::put_i32(&mut body, i32::MAX);
    let frame = body.freeze();
    let largest = largest_allocation(|| {
        assert!(Request::decode(14, &mut Reader::new(frame.clone())).is_err());
    });
    assert!(largest < 1024, "allocated {largest} bytes");
}
