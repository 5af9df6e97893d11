//! Fuzzes everything the server decodes from a client: the length-prefixed framing, the
//! handshake, and request headers with their bodies. Any panic is a bug.
#![no_main]

use bytes::BytesMut;
use jute::{split_frame, ConnectRequest, Reader, Record, Request, RequestHeader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    let mut first = true;
    while let Ok(Some(frame)) = split_frame(&mut buf, jute::DEFAULT_MAX_BUFFER) {
        let mut r = Reader::new(frame);
        if first {
            let _ = ConnectRequest::decode(&mut r);
            first = false;
            continue;
        }
        if let Ok(h) = RequestHeader::decode(&mut r) {
            let _ = Request::decode(h.op, &mut r);
        }
    }
});
