//! ZooKeeper's jute wire format, and nothing else.
//!
//! This crate knows how ZooKeeper 3.8 lays out bytes on the wire: the 4-byte length prefix
//! of every frame, the handshake records (with the optional trailing `readOnly` byte that is
//! not part of the jute schema), request and reply headers, every request and response
//! record, watcher events, opcodes, error codes and create modes.
//!
//! It does no I/O and knows nothing of tokio. Records encode into a [`bytes::BytesMut`] and
//! decode from a [`bytes::Bytes`] through a [`Reader`] that checks every length against what
//! is left in the frame, so hostile bytes give a [`DecodeError`], never a panic and never an
//! allocation larger than the frame itself. Data buffers decode as zero-copy slices of the
//! frame.
//!
//! The layouts follow Apache ZooKeeper's `zookeeper-jute/src/main/resources/zookeeper.jute`
//! field by field; multi requests and responses follow `MultiOperationRecord` and
//! `MultiResponse`.

mod codec;
mod connect;
mod error;
mod frame;
mod modes;
mod opcode;
pub mod quorum;
mod records;
mod request;
mod response;

pub use codec::{java_utf8_lossy, DecodeError, Reader, Record, WriteExt};
pub use connect::{ConnectRequest, ConnectResponse, HANDSHAKE_PASSWORD_LEN};
pub use error::ErrorCode;
pub use frame::{split_frame, write_frame, FrameError, LengthPrefix, DEFAULT_MAX_BUFFER};
pub use modes::{AddWatchMode, CreateMode, EventType, KeeperState, WatcherType};
pub use opcode::OpCode;
pub use records::*;
pub use request::{MultiOp, Request, MULTI_END};
pub use response::{MultiResult, Response};

/// Reserved xids (ZooKeeper's `ClientCnxn`).
pub mod xid {
    /// Watch notifications.
    pub const NOTIFICATION: i32 = -1;
    /// Pings.
    pub const PING: i32 = -2;
    /// Auth packets.
    pub const AUTH: i32 = -4;
    /// SetWatches sent on reconnect.
    pub const SET_WATCHES: i32 = -8;
}
