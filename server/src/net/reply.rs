//! Reply frames: the `ReplyHeader` (xid, zxid, error) and the bodies of write results.
//! Every reply and watch event this member sends starts with a header encoded here.

use bytes::{Bytes, BytesMut};
use jute::{ErrorCode, Record, ReplyHeader};

use super::outbox::Outbox;
use crate::state::WriteResult;

/// Writes a reply header.
pub fn header(b: &mut BytesMut, xid: i32, zxid: i64, err: i32) {
    ReplyHeader { xid, zxid, err }.encode(b);
}

/// Queues a reply; the body is written only for `Ok`, as ZooKeeper does.
pub fn push(out: &Outbox, xid: i32, zxid: i64, err: ErrorCode, body: impl FnOnce(&mut BytesMut)) {
    out.push_frame(|b| {
        header(b, xid, zxid, err.code());
        if err == ErrorCode::Ok {
            body(b);
        }
    });
}

/// Queues a reply with no body.
pub fn push_error(out: &Outbox, xid: i32, zxid: i64, err: ErrorCode) {
    push(out, xid, zxid, err, |_| {});
}

/// Encodes one reply frame (length, header, body) into `buf` and returns it as its own
/// `Bytes` (a slice of the shared buffer: no allocation per reply).
pub fn encode(
    buf: &mut BytesMut,
    xid: i32,
    zxid: i64,
    err: i32,
    body: impl FnOnce(&mut BytesMut),
) -> Bytes {
    jute::write_frame(buf, |b| {
        header(b, xid, zxid, err);
        body(b);
    });
    buf.split().freeze()
}

/// Encodes the reply to a write: its header's error and, for a success, its body.
pub fn encode_write(buf: &mut BytesMut, xid: i32, zxid: i64, result: &WriteResult) -> Bytes {
    let err = match result {
        WriteResult::Error(e) | WriteResult::MultiAborted(e) => e.code(),
        _ => ErrorCode::Ok.code(),
    };
    encode(buf, xid, zxid, err, |b| match result {
        WriteResult::Error(_) | WriteResult::Delete => {}
        WriteResult::Create(p) => jute::WriteExt::put_ustring(b, p),
        WriteResult::Create2(p, s) => {
            jute::WriteExt::put_ustring(b, p);
            s.encode(b);
        }
        WriteResult::Stat(s) | WriteResult::Check(s) => s.encode(b),
        WriteResult::Multi(results) => {
            for r in results {
                r.encode(b);
            }
            jute::MULTI_END.encode(b);
        }
        WriteResult::MultiAborted(_) => jute::MULTI_END.encode(b),
        WriteResult::Config(data, s) => {
            jute::WriteExt::put_buffer(b, Some(data));
            s.encode(b);
        }
    })
}
