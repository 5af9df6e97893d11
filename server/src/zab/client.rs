//! A small blocking ZooKeeper client for `zooraft migrate`: one session, one request at a
//! time (create, delete, getData), and four-letter words. The coordinator writes the
//! cut-over's steps with it through a zooraft member, as any client would.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use jute::{
    Acl, ConnectRequest, ConnectResponse, CreateRequest, DeleteRequest, ErrorCode,
    GetChildrenRequest, GetDataRequest, OpCode, Reader, Record, ReplyHeader, Request, Response,
    Stat,
};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("the server answered {0:?}")]
    Keeper(ErrorCode),
    #[error("the server's answer does not decode: {0}")]
    Decode(String),
    #[error("the server refused the session")]
    Refused,
}

/// A session on one server.
pub struct Client {
    stream: TcpStream,
    xid: i32,
    max: usize,
}

/// Resolves `host:port`.
pub fn resolve(server: &str) -> io::Result<SocketAddr> {
    server
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("cannot resolve {server}")))
}

fn read_frame(stream: &mut TcpStream, max: usize) -> io::Result<Bytes> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    if len < 0 || len as usize > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes"),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    stream.read_exact(&mut buf)?;
    Ok(Bytes::from(buf))
}

impl Client {
    /// Opens a session (`timeout` is its timeout and every call's).
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Client, ClientError> {
        let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout: timeout.as_millis() as i32,
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: Some(false),
        };
        let mut out = BytesMut::new();
        jute::write_frame(&mut out, |b| req.encode(b));
        stream.write_all(&out)?;
        let max = jute::DEFAULT_MAX_BUFFER;
        let resp = ConnectResponse::from_bytes(read_frame(&mut stream, max)?)
            .map_err(|e| ClientError::Decode(e.to_string()))?;
        if resp.session_id == 0 {
            return Err(ClientError::Refused);
        }
        Ok(Client {
            stream,
            xid: 0,
            max,
        })
    }

    /// One request and its answer: (the reply's zxid, its body).
    fn call(&mut self, req: &Request) -> Result<(i64, Response), ClientError> {
        self.xid += 1;
        let xid = self.xid;
        let mut out = BytesMut::new();
        jute::write_frame(&mut out, |b| req.encode(xid, b));
        self.stream.write_all(&out)?;
        loop {
            let frame = read_frame(&mut self.stream, self.max)?;
            let mut r = Reader::new(frame);
            let h = ReplyHeader::decode(&mut r).map_err(|e| ClientError::Decode(e.to_string()))?;
            // Watch events (-1) and pings (-2) are not ours.
            if h.xid != xid {
                continue;
            }
            if h.err != 0 {
                return Err(ClientError::Keeper(
                    ErrorCode::from_code(h.err).unwrap_or(ErrorCode::SystemError),
                ));
            }
            let body = Response::decode(req.opcode(), &mut r)
                .map_err(|e| ClientError::Decode(e.to_string()))?;
            return Ok((h.zxid, body));
        }
    }

    /// Creates a persistent node; the zxid it was created at.
    pub fn create(&mut self, path: &str, data: &[u8]) -> Result<i64, ClientError> {
        let req = Request::Create2(CreateRequest {
            path: path.into(),
            data: Some(Bytes::copy_from_slice(data)),
            acl: vec![Acl::open_unsafe()],
            flags: 0,
        });
        match self.call(&req)? {
            (_, Response::Create2(_, stat)) => Ok(stat.czxid),
            (zxid, _) => Ok(zxid),
        }
    }

    pub fn delete(&mut self, path: &str) -> Result<(), ClientError> {
        let req = Request::Delete(DeleteRequest {
            path: path.into(),
            version: -1,
        });
        self.call(&req).map(drop)
    }

    pub fn children(&mut self, path: &str) -> Result<Vec<String>, ClientError> {
        let req = Request::GetChildren(GetChildrenRequest {
            path: path.into(),
            watch: false,
        });
        match self.call(&req)? {
            (_, Response::GetChildren(c)) => Ok(c),
            (_, other) => Err(ClientError::Decode(format!(
                "getChildren answered {other:?}"
            ))),
        }
    }

    /// Deletes `path` and whatever is below it (children first).
    pub fn delete_tree(&mut self, path: &str) -> Result<(), ClientError> {
        for child in self.children(path)? {
            self.delete_tree(&format!("{path}/{child}"))?;
        }
        self.delete(path)
    }

    pub fn get_data(&mut self, path: &str) -> Result<(Option<Bytes>, Stat), ClientError> {
        let req = Request::GetData(GetDataRequest {
            path: path.into(),
            watch: false,
        });
        match self.call(&req)? {
            (_, Response::GetData(data, stat)) => Ok((data, stat)),
            (_, other) => Err(ClientError::Decode(format!("getData answered {other:?}"))),
        }
    }

    /// Closes the session.
    pub fn close(mut self) {
        let mut out = BytesMut::new();
        self.xid += 1;
        let xid = self.xid;
        jute::write_frame(&mut out, |b| {
            jute::RequestHeader {
                xid,
                op: OpCode::CloseSession.code(),
            }
            .encode(b)
        });
        let _ = self.stream.write_all(&out);
        let _ = read_frame(&mut self.stream, self.max);
    }
}

/// A four-letter word's answer (empty if the server does not answer).
pub fn four_letter_word(addr: SocketAddr, word: &str, timeout: Duration) -> io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.write_all(word.as_bytes())?;
    let mut text = String::new();
    s.take(1 << 20).read_to_string(&mut text)?;
    Ok(text)
}
