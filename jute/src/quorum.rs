//! ZooKeeper's server-to-server records on the quorum port: `QuorumPacket` (every message
//! between a learner and its leader) and `LearnerInfo` (what a follower or observer says
//! about itself when it connects), with the packet type numbers of `Leader.java`.
//!
//! The quorum port frames nothing: packets follow each other as bare records, so a reader
//! must parse each one to find where the next starts.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader, Record, WriteExt};
use crate::records::Id;

/// The `type` of a [`QuorumPacket`] (`Leader.java`).
pub mod packet {
    /// A client write forwarded by a learner: session, cxid, op, then the request body.
    pub const REQUEST: i32 = 1;
    pub const PROPOSAL: i32 = 2;
    pub const ACK: i32 = 3;
    pub const COMMIT: i32 = 4;
    /// Leader: a heartbeat. Learner: the answer, with the sessions it saw since.
    pub const PING: i32 = 5;
    /// A client reconnecting with a session: is it valid, and move it here.
    pub const REVALIDATE: i32 = 6;
    /// A learner's `sync` is done (everything before it was sent).
    pub const SYNC: i32 = 7;
    /// A committed transaction, to an observer.
    pub const INFORM: i32 = 8;
    pub const COMMIT_AND_ACTIVATE: i32 = 9;
    pub const NEW_LEADER: i32 = 10;
    pub const FOLLOWER_INFO: i32 = 11;
    pub const UP_TO_DATE: i32 = 12;
    pub const DIFF: i32 = 13;
    pub const TRUNC: i32 = 14;
    pub const SNAP: i32 = 15;
    pub const OBSERVER_INFO: i32 = 16;
    pub const LEADER_INFO: i32 = 17;
    pub const ACK_EPOCH: i32 = 18;
    pub const INFORM_AND_ACTIVATE: i32 = 19;

    /// The packet's name, for logs and errors.
    pub fn name(kind: i32) -> &'static str {
        match kind {
            REQUEST => "REQUEST",
            PROPOSAL => "PROPOSAL",
            ACK => "ACK",
            COMMIT => "COMMIT",
            PING => "PING",
            REVALIDATE => "REVALIDATE",
            SYNC => "SYNC",
            INFORM => "INFORM",
            COMMIT_AND_ACTIVATE => "COMMITANDACTIVATE",
            NEW_LEADER => "NEWLEADER",
            FOLLOWER_INFO => "FOLLOWERINFO",
            UP_TO_DATE => "UPTODATE",
            DIFF => "DIFF",
            TRUNC => "TRUNC",
            SNAP => "SNAP",
            OBSERVER_INFO => "OBSERVERINFO",
            LEADER_INFO => "LEADERINFO",
            ACK_EPOCH => "ACKEPOCH",
            INFORM_AND_ACTIVATE => "INFORMANDACTIVATE",
            _ => "unknown",
        }
    }
}

/// The learner protocol version of ZooKeeper 3.4 to 3.9 (`0x10000`).
pub const LEARNER_PROTOCOL: i32 = 0x10000;

/// The signature after a SNAP's snapshot (`Learner.syncWithLeader`).
pub const SNAP_SIGNATURE: &str = "BenWasHere";

/// `QuorumPacket { int type; long zxid; buffer data; vector<Id> authinfo }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumPacket {
    pub kind: i32,
    pub zxid: i64,
    pub data: Option<Bytes>,
    /// The identities a forwarded request runs under (a REQUEST's client ids).
    pub auth: Option<Vec<Id>>,
}

impl QuorumPacket {
    /// A packet with no auth ids.
    pub fn new(kind: i32, zxid: i64, data: Option<Bytes>) -> QuorumPacket {
        QuorumPacket {
            kind,
            zxid,
            data,
            auth: None,
        }
    }
}

impl Record for QuorumPacket {
    fn encode(&self, out: &mut BytesMut) {
        out.put_i32(self.kind);
        out.put_i64(self.zxid);
        out.put_buffer(self.data.as_deref());
        match &self.auth {
            None => out.put_i32(-1),
            Some(ids) => {
                out.put_i32(ids.len() as i32);
                for id in ids {
                    id.encode(out);
                }
            }
        }
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let kind = r.read_i32()?;
        let zxid = r.read_i64()?;
        let data = r.read_buffer()?;
        let auth = match r.peek_i32() {
            Some(-1) => {
                r.read_i32()?;
                None
            }
            _ => Some(r.read_vec(8, Id::decode)?),
        };
        Ok(QuorumPacket {
            kind,
            zxid,
            data,
            auth,
        })
    }
}

/// `QuorumAuthPacket { long magic; int status; buffer token }`: quorum SASL's messages,
/// sent bare before a learner's first packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumAuthPacket {
    pub magic: i64,
    pub status: i32,
    pub token: Option<Bytes>,
}

impl QuorumAuthPacket {
    /// `QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER`.
    pub const MAGIC: i64 = 0x5F24_3501_3501_EDCC;
    pub const IN_PROGRESS: i32 = 0;
    pub const SUCCESS: i32 = 1;
    pub const ERROR: i32 = -1;
}

impl Record for QuorumAuthPacket {
    fn encode(&self, out: &mut BytesMut) {
        out.put_i64(self.magic);
        out.put_i32(self.status);
        out.put_buffer(self.token.as_deref());
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(QuorumAuthPacket {
            magic: r.read_i64()?,
            status: r.read_i32()?,
            token: r.read_buffer()?,
        })
    }
}

/// `LearnerInfo { long serverid; int protocolVersion; long configVersion }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnerInfo {
    pub server_id: i64,
    pub protocol_version: i32,
    pub config_version: i64,
}

impl Record for LearnerInfo {
    fn encode(&self, out: &mut BytesMut) {
        out.put_i64(self.server_id);
        out.put_i32(self.protocol_version);
        out.put_i64(self.config_version);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LearnerInfo {
            server_id: r.read_i64()?,
            protocol_version: r.read_i32()?,
            config_version: r.read_i64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(p: &QuorumPacket) -> Vec<u8> {
        p.to_bytes().to_vec()
    }

    #[test]
    fn an_empty_packet_is_twenty_bytes_with_nulls() {
        let p = QuorumPacket::new(packet::UP_TO_DATE, -1, None);
        let b = encoded(&p);
        assert_eq!(b.len(), 20);
        assert_eq!(&b[12..], &[0xff; 8]);
        assert_eq!(QuorumPacket::from_bytes(b.into()).unwrap(), p);
    }

    #[test]
    fn packets_follow_each_other_and_a_cut_one_is_an_error() {
        let p = QuorumPacket {
            kind: packet::REQUEST,
            zxid: -1,
            data: Some(Bytes::from_static(b"body")),
            auth: Some(vec![Id {
                scheme: "ip".into(),
                id: "127.0.0.1".into(),
            }]),
        };
        let mut b = encoded(&p);
        let whole = b.len();
        for cut in 0..whole {
            assert!(QuorumPacket::from_bytes(Bytes::from(b[..cut].to_vec())).is_err());
        }
        b.extend_from_slice(&encoded(&QuorumPacket::new(packet::PING, 7, None)));
        let mut r = Reader::new(Bytes::from(b));
        assert_eq!(QuorumPacket::decode(&mut r).unwrap(), p);
        assert_eq!(QuorumPacket::decode(&mut r).unwrap().kind, packet::PING);
    }

    #[test]
    fn learner_info_is_twenty_bytes() {
        let i = LearnerInfo {
            server_id: 4,
            protocol_version: LEARNER_PROTOCOL,
            config_version: 0,
        };
        let b = i.to_bytes();
        assert_eq!(b.len(), 20);
        assert_eq!(LearnerInfo::from_bytes(b).unwrap(), i);
    }
}
