//! A minimal ZooKeeper client over TLS (rustls, blocking) for the refusal tests: it opens
//! a session over a TLS connection, with or without a client certificate, and says what
//! happened, so a test can tell an accepted client from a refused handshake; and for the
//! resumption test, sessions over connections that resume the previous one's TLS session.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jute::{ConnectRequest, ConnectResponse, Reader, Record};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::pki::Issued;

const IO_TIMEOUT: Duration = Duration::from_secs(15);

fn certs(path: &Path) -> Vec<CertificateDer<'static>> {
    let bytes = std::fs::read(path).expect("read certificate file");
    rustls_pemfile::certs(&mut bytes.as_slice())
        .collect::<Result<_, _>>()
        .expect("PEM certificates")
}

fn key(path: &Path) -> PrivateKeyDer<'static> {
    let bytes = std::fs::read(path).expect("read key file");
    rustls_pemfile::private_key(&mut bytes.as_slice())
        .expect("PEM key")
        .expect("a key in the file")
}

fn client_config(ca: &Path, identity: Option<&Issued>) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(ca) {
        roots.add(c).expect("CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots);
    match identity {
        Some(id) => builder
            .with_client_auth_cert(certs(&id.cert), key(&id.key))
            .expect("client certificate"),
        None => builder.with_no_client_auth(),
    }
}

/// A length-prefixed ConnectRequest for a new session (30 s timeout).
pub fn new_session_frame() -> Vec<u8> {
    let body = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout: 30_000,
        session_id: 0,
        passwd: bytes::Bytes::from_static(&[0u8; jute::HANDSHAKE_PASSWORD_LEN]),
        read_only: Some(false),
    }
    .to_bytes();
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// Opens a session over TLS; `Ok(session id)`, or `Err` with what went wrong (a refused
/// handshake, the connection closed before the ConnectResponse, ...).
pub fn tls_session(addr: SocketAddr, ca: &Path, identity: Option<&Issued>) -> Result<i64, String> {
    session_over(Arc::new(client_config(ca, identity)), addr).map(|(id, _)| id)
}

/// What one connection of [`resuming_sessions`] saw.
#[derive(Debug)]
pub struct Resumed {
    /// The TLS handshake resumed an earlier session.
    pub resumed: bool,
    /// `TLSv1_2` or `TLSv1_3`.
    pub version: String,
    /// The `scheme:id` pairs whoAmI answered.
    pub ids: Vec<String>,
}

/// `n` connections one after the other with one client configuration (rustls keeps the
/// sessions servers give it and offers them again), each opening a session and asking
/// whoAmI.
pub fn resuming_sessions(
    addr: SocketAddr,
    ca: &Path,
    identity: Option<&Issued>,
    n: usize,
) -> Result<Vec<Resumed>, String> {
    let config = Arc::new(client_config(ca, identity));
    (0..n)
        .map(|_| {
            let (_, mut tls) = session_over(config.clone(), addr)?;
            // whoAmI: xid 1, opcode 107, no body.
            let mut frame = 8i32.to_be_bytes().to_vec();
            frame.extend_from_slice(&1i32.to_be_bytes());
            frame.extend_from_slice(&(jute::OpCode::WhoAmI as i32).to_be_bytes());
            tls.write_all(&frame).map_err(|e| format!("write: {e}"))?;
            tls.flush().map_err(|e| format!("flush: {e}"))?;
            let mut r = Reader::new(bytes::Bytes::from(read_frame(&mut tls)?));
            let header = jute::ReplyHeader::decode(&mut r).map_err(|e| e.to_string())?;
            if header.err != 0 {
                return Err(format!("whoAmI: error {}", header.err));
            }
            let who = jute::WhoAmIResponse::decode(&mut r).map_err(|e| e.to_string())?;
            let _ = tls.sock.shutdown(std::net::Shutdown::Both);
            Ok(Resumed {
                resumed: tls.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
                version: format!("{:?}", tls.conn.protocol_version()),
                ids: who
                    .client_info
                    .iter()
                    .map(|c| format!("{}:{}", c.auth_scheme, c.user))
                    .collect(),
            })
        })
        .collect()
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn read_frame(tls: &mut Tls) -> Result<Vec<u8>, String> {
    let mut len = [0u8; 4];
    tls.read_exact(&mut len)
        .map_err(|e| format!("no reply: {e}"))?;
    let n = i32::from_be_bytes(len);
    if !(0..=1024).contains(&n) {
        return Err(format!("bad frame length {n}"));
    }
    let mut body = vec![0u8; n as usize];
    tls.read_exact(&mut body)
        .map_err(|e| format!("truncated reply: {e}"))?;
    Ok(body)
}

/// A session over a new TLS connection: its id and the open connection.
/// A TLS client stream to `addr` (the handshake happens with the first write).
fn connect(config: Arc<rustls::ClientConfig>, addr: SocketAddr) -> Result<Tls, String> {
    let name = ServerName::IpAddress(addr.ip().into());
    let conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
    let sock = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    Ok(rustls::StreamOwned::new(conn, sock))
}

fn session_over(config: Arc<rustls::ClientConfig>, addr: SocketAddr) -> Result<(i64, Tls), String> {
    let mut tls = connect(config, addr)?;
    tls.write_all(&new_session_frame())
        .map_err(|e| format!("write: {e}"))?;
    tls.flush().map_err(|e| format!("flush: {e}"))?;
    let body = read_frame(&mut tls).map_err(|e| format!("ConnectResponse: {e}"))?;
    let response = ConnectResponse::decode(&mut Reader::new(bytes::Bytes::from(body)))
        .map_err(|e| format!("bad ConnectResponse: {e}"))?;
    if response.session_id == 0 {
        return Err("session refused".into());
    }
    Ok((response.session_id, tls))
}

/// `GET path` over HTTPS (HTTP/1.1, `Connection: close`) from `addr`, trusting `ca`: the
/// status code and body, or what went wrong (a refused handshake, no answer).
pub fn https_get(addr: SocketAddr, ca: &Path, path: &str) -> Result<(u16, String), String> {
    https_get_as(addr, ca, None, path, &[])
}

/// [`https_get`] presenting `identity`'s client certificate, with extra `headers`.
pub fn https_get_as(
    addr: SocketAddr,
    ca: &Path,
    identity: Option<&Issued>,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String), String> {
    let mut tls = connect(Arc::new(client_config(ca, identity)), addr)?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n");
    tls.write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        // A server that closes without close_notify still sent its whole answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no HTTP status in {text:?}"))?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    Ok((code, body.to_string()))
}

/// A session over TLS kept open while this lives.
pub struct HeldSession {
    pub id: i64,
    _stream: Tls,
}

/// Opens a session over TLS and keeps its connection open (see [`HeldSession`]).
pub fn held_tls_session(addr: SocketAddr, ca: &Path) -> Result<HeldSession, String> {
    let (id, stream) = session_over(Arc::new(client_config(ca, None)), addr)?;
    Ok(HeldSession {
        id,
        _stream: stream,
    })
}
