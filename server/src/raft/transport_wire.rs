//! The member-to-member wire format: frames (`u32 length | u8 kind | payload`), the hello
//! that opens a connection either way, and what a member says of its data directory in it
//! (see `transport.rs` for how connections are used).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::input::PeerIdentity;

pub const KIND_HELLO: u8 = 0;
pub const KIND_RAFT: u8 = 1;
pub const KIND_FORWARD: u8 = 2;
pub const KIND_TOUCH: u8 = 3;
/// What a peer says of its data directory, when it changes (the hello says it first).
pub const KIND_STATUS: u8 = 4;
pub const PROTOCOL: u32 = 1;
/// The hello's length up to the protocol number (an earlier build's whole hello).
pub const HELLO_BASE: usize = 12;
/// What follows it in ours: incarnation (u64), flags (u8: bit 0 trusted, bit 1 seed, bit 2
/// in a hello: the sender reads what comes back on this connection), last index (u64).
const IDENTITY_LEN: usize = 17;
const DUPLEX: u8 = 4;
/// Frames up to 1 GiB (a snapshot travels as one frame).
pub const MAX_FRAME: usize = 1 << 30;
pub const QUEUE: usize = 4096;

pub struct OutFrame {
    pub bytes: Bytes,
    /// Set for a snapshot message: report the outcome to Raft.
    pub snapshot_to: Option<u64>,
}

/// The first frame of a connection, either way: who we are and what we say of our data
/// directory; `duplex` (dialling): we read what the peer sends back on it.
pub fn hello(me: u64, said: &PeerIdentity, duplex: bool) -> Bytes {
    frame(KIND_HELLO, |b| {
        b.put_u64(me);
        b.put_u32(PROTOCOL);
        put_identity(b, said, duplex);
    })
}

pub fn frame(kind: u8, payload: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut b = BytesMut::with_capacity(64);
    b.put_u32(0);
    b.put_u8(kind);
    payload(&mut b);
    let len = (b.len() - 4) as u32;
    b[..4].copy_from_slice(&len.to_be_bytes());
    b.freeze()
}

/// What this member says of itself in each hello (the Raft thread keeps it current).
#[derive(Default)]
pub struct Announced {
    incarnation: AtomicU64,
    trusted: AtomicBool,
    seed: AtomicBool,
    last_index: AtomicU64,
}

impl Announced {
    pub fn set(&self, me: PeerIdentity) {
        self.incarnation.store(me.incarnation, Ordering::Relaxed);
        self.trusted.store(me.trusted, Ordering::Relaxed);
        self.seed.store(me.seed, Ordering::Relaxed);
        self.last_index.store(me.last_index, Ordering::Relaxed);
    }

    pub fn get(&self) -> PeerIdentity {
        PeerIdentity {
            incarnation: self.incarnation.load(Ordering::Relaxed),
            trusted: self.trusted.load(Ordering::Relaxed),
            seed: self.seed.load(Ordering::Relaxed),
            last_index: self.last_index.load(Ordering::Relaxed),
        }
    }
}

pub fn put_identity(b: &mut BytesMut, me: &PeerIdentity, duplex: bool) {
    b.put_u64(me.incarnation);
    b.put_u8(u8::from(me.trusted) | u8::from(me.seed) << 1 | if duplex { DUPLEX } else { 0 });
    b.put_u64(me.last_index);
}

/// Reads what [`put_identity`] wrote, and the duplex flag; `None` if there are not enough
/// bytes.
pub fn get_identity(b: &mut Bytes) -> Option<(PeerIdentity, bool)> {
    if b.len() < IDENTITY_LEN {
        return None;
    }
    let incarnation = b.get_u64();
    let flags = b.get_u8();
    let said = PeerIdentity {
        incarnation,
        trusted: flags & 1 != 0,
        seed: flags & 2 != 0,
        last_index: b.get_u64(),
    };
    Some((said, flags & DUPLEX != 0))
}
