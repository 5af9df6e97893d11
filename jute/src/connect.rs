//! The handshake records. Both carry a trailing raw `readOnly` byte that is not in the jute
//! schema: a 3.x client sends it (45-byte request) and expects it back (37-byte response);
//! an older client omits it (44 bytes) and must not receive it (36 bytes).

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader, Record, WriteExt};

/// Length of a session password.
pub const HANDSHAKE_PASSWORD_LEN: usize = 16;

/// The first frame a client sends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectRequest {
    pub protocol_version: i32,
    pub last_zxid_seen: i64,
    pub timeout: i32,
    pub session_id: i64,
    pub passwd: Bytes,
    /// `Some` when the client sent the trailing readOnly byte.
    pub read_only: Option<bool>,
}

impl Record for ConnectRequest {
    fn encode(&self, out: &mut BytesMut) {
        out.put_i32(self.protocol_version);
        out.put_i64(self.last_zxid_seen);
        out.put_i32(self.timeout);
        out.put_i64(self.session_id);
        out.put_buffer(Some(&self.passwd));
        if let Some(ro) = self.read_only {
            out.put_bool_jute(ro);
        }
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let protocol_version = r.read_i32()?;
        let last_zxid_seen = r.read_i64()?;
        let timeout = r.read_i32()?;
        let session_id = r.read_i64()?;
        let passwd = r.read_buffer()?.unwrap_or_default();
        // Java reads the flag with readBool, which takes any non-zero byte as true.
        let read_only = if r.remaining() > 0 {
            Some(r.read_u8()? != 0)
        } else {
            None
        };
        Ok(ConnectRequest {
            protocol_version,
            last_zxid_seen,
            timeout,
            session_id,
            passwd,
            read_only,
        })
    }
}

/// The server's answer to a handshake. A timeout of 0 tells the client its session is
/// expired or unknown.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub timeout: i32,
    pub session_id: i64,
    pub passwd: Bytes,
    /// Written only when the client's request carried the flag.
    pub read_only: Option<bool>,
}

impl ConnectResponse {
    /// The answer for an expired, unknown or wrongly authenticated session: timeout 0,
    /// session id 0 and sixteen zero bytes of password (`ZooKeeperServer.finishSessionInit`).
    pub fn expired(read_only: Option<bool>) -> ConnectResponse {
        ConnectResponse {
            protocol_version: 0,
            timeout: 0,
            session_id: 0,
            passwd: Bytes::from_static(&[0u8; HANDSHAKE_PASSWORD_LEN]),
            read_only: read_only.map(|_| false),
        }
    }
}

impl Record for ConnectResponse {
    fn encode(&self, out: &mut BytesMut) {
        out.put_i32(self.protocol_version);
        out.put_i32(self.timeout);
        out.put_i64(self.session_id);
        out.put_buffer(Some(&self.passwd));
        if let Some(ro) = self.read_only {
            out.put_bool_jute(ro);
        }
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let protocol_version = r.read_i32()?;
        let timeout = r.read_i32()?;
        let session_id = r.read_i64()?;
        let passwd = r.read_buffer()?.unwrap_or_default();
        let read_only = if r.remaining() > 0 {
            Some(r.read_u8()? != 0)
        } else {
            None
        };
        Ok(ConnectResponse {
            protocol_version,
            timeout,
            session_id,
            passwd,
            read_only,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_sizes_match_zookeeper() {
        let mut req = ConnectRequest {
            passwd: Bytes::from_static(&[0; 16]),
            timeout: 30000,
            ..Default::default()
        };
        assert_eq!(req.to_bytes().len(), 44);
        req.read_only = Some(false);
        assert_eq!(req.to_bytes().len(), 45);
        let mut resp = ConnectResponse::expired(None);
        assert_eq!(resp.to_bytes().len(), 36);
        resp.read_only = Some(false);
        assert_eq!(resp.to_bytes().len(), 37);
        let back = ConnectRequest::from_bytes(req.to_bytes()).unwrap();
        assert_eq!(back, req);
    }
}
