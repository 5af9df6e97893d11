//! Packets on a ZooKeeper leader's quorum port, over a blocking stream: the port frames
//! nothing, so a packet is read field by field (every length bounded by `jute.maxbuffer`,
//! as ZooKeeper bounds it), then decoded as the jute record it is.

use std::io::{self, Read, Write};

use bytes::{BufMut, Bytes, BytesMut};
use jute::quorum::{QuorumAuthPacket, QuorumPacket};
use jute::Record;

/// Reads one packet. An error is the end of the connection: the stream is mid-packet.
pub fn read_packet(r: &mut impl Read, max_buffer: usize) -> io::Result<QuorumPacket> {
    let mut buf = BytesMut::with_capacity(64);
    take(r, &mut buf, 12)?;
    let len = take_len(r, &mut buf, max_buffer)?;
    take(r, &mut buf, len)?;
    let count = take_len(r, &mut buf, max_buffer)?;
    for _ in 0..count {
        for _ in 0..2 {
            let len = take_len(r, &mut buf, max_buffer)?;
            take(r, &mut buf, len)?;
        }
    }
    QuorumPacket::from_bytes(buf.freeze())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The longest quorum SASL token taken from the leader (a Kerberos AP-REP or a wrapped
/// offer is far smaller; a DIGEST-MD5 challenge too).
pub const MAX_AUTH_TOKEN: usize = 64 * 1024;

/// Sends one quorum SASL message: a learner's are all IN_PROGRESS, whatever stage its
/// mechanism is at (ZooKeeper's leader alone ends an exchange), and flushes it.
pub fn send_auth(w: &mut impl Write, token: &[u8]) -> io::Result<()> {
    let p = QuorumAuthPacket {
        magic: QuorumAuthPacket::MAGIC,
        status: QuorumAuthPacket::IN_PROGRESS,
        token: Some(Bytes::copy_from_slice(token)),
    };
    w.write_all(&p.to_bytes())?;
    w.flush()
}

/// The leader's next quorum SASL message: its status and token (a null token is empty).
pub fn receive_auth(r: &mut impl Read) -> Result<(i32, Vec<u8>), String> {
    let p = read_auth_packet(r, MAX_AUTH_TOKEN)
        .map_err(|e| format!("reading the leader's answer: {e}"))?;
    if p.magic != QuorumAuthPacket::MAGIC {
        return Err(format!(
            "the leader answered without the magic number ({:#x})",
            p.magic
        ));
    }
    Ok((p.status, p.token.map(|t| t.to_vec()).unwrap_or_default()))
}

/// Reads one quorum SASL message (see [`read_packet`] for the bounds).
pub fn read_auth_packet(r: &mut impl Read, max_token: usize) -> io::Result<QuorumAuthPacket> {
    let mut buf = BytesMut::with_capacity(64);
    take(r, &mut buf, 12)?;
    let len = take_len(r, &mut buf, max_token)?;
    take(r, &mut buf, len)?;
    QuorumAuthPacket::from_bytes(buf.freeze())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn take(r: &mut impl Read, buf: &mut BytesMut, n: usize) -> io::Result<()> {
    let at = buf.len();
    buf.resize(at + n, 0);
    r.read_exact(&mut buf[at..])
}

/// A length or count field, appended to `buf`; null (-1) counts as 0.
fn take_len(r: &mut impl Read, buf: &mut BytesMut, max: usize) -> io::Result<usize> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    buf.put_slice(&b);
    let v = i32::from_be_bytes(b);
    if v == -1 {
        return Ok(0);
    }
    if v < 0 || v as usize > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the leader sent a length of {v} (at most {max} taken)"),
        ));
    }
    Ok(v as usize)
}

/// Writes one packet (the caller flushes).
pub fn write_packet(w: &mut impl Write, p: &QuorumPacket) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(32 + p.data.as_ref().map_or(0, Bytes::len));
    p.encode(&mut buf);
    w.write_all(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jute::quorum::packet;
    use jute::Id;

    #[test]
    fn packets_round_trip_one_after_another() {
        let a = QuorumPacket {
            kind: packet::REQUEST,
            zxid: -1,
            data: Some(Bytes::from_static(b"\x00\x01")),
            auth: Some(vec![Id {
                scheme: "ip".into(),
                id: "127.0.0.1".into(),
            }]),
        };
        let b = QuorumPacket::new(packet::PING, 0x1_0000_0002, None);
        let mut out = Vec::new();
        write_packet(&mut out, &a).unwrap();
        write_packet(&mut out, &b).unwrap();
        let mut r = &out[..];
        assert_eq!(read_packet(&mut r, 1024).unwrap(), a);
        assert_eq!(read_packet(&mut r, 1024).unwrap(), b);
        assert!(read_packet(&mut r, 1024).is_err());
        // Cut anywhere: an error, never a panic.
        for cut in 0..out.len() {
            let mut r = &out[..cut];
            let _ = read_packet(&mut r, 1024);
        }
        // A length past the bound is refused before reading it.
        let mut big = Vec::new();
        big.extend_from_slice(&packet::INFORM.to_be_bytes());
        big.extend_from_slice(&1i64.to_be_bytes());
        big.extend_from_slice(&100_000i32.to_be_bytes());
        assert!(read_packet(&mut &big[..], 1024).is_err());
    }
}
