//! HTTP/1.1 for the operator endpoints (the AdminServer and Prometheus), on hyper: one task
//! per connection, keep-alive, and the request line and headers bounded in size and time, so a
//! slow, oversized or malformed request gets hyper's 4xx (400, 408, 414, 431) and costs the
//! server nothing else. TLS as ZooKeeper's AdminServer offers it: only, or beside plain HTTP
//! on the one port (told apart by the first byte).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::tls::Acceptor;

/// The subject (RFC 2253) of the client certificate a TLS connection presented, in the
/// extensions of each request on it (the AdminServer's x509 auth).
#[derive(Debug, Clone)]
pub struct PeerSubject(pub String);

/// A response body: every answer here is built whole before it is sent.
pub type Body = Full<Bytes>;

/// What answers a request (its peer given).
pub type Handler =
    Arc<dyn Fn(Request<Incoming>, SocketAddr) -> BoxedAnswer + Send + Sync + 'static>;

/// A handler's pending answer.
pub type BoxedAnswer = Pin<Box<dyn Future<Output = Response<Body>> + Send>>;

/// Plain, TLS, or both on one port.
#[derive(Clone)]
pub enum Mode {
    Plain,
    Tls(Arc<Acceptor>),
    Unified(Arc<Acceptor>),
}

/// The largest request head (request line and headers) read: beyond it, 431 or 414.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send a request head, or the TLS handshake.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 64;
/// A TLS record of type handshake starts with this byte; an HTTP method never does.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A response with a body and its content type.
pub fn answer(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

/// Serves `listener` until `shutdown` turns true.
pub async fn serve(
    what: &'static str,
    listener: TcpListener,
    mode: Mode,
    handler: Handler,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!("{what}: accept failed: {e}");
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let (handler, mode, shutdown) = (handler.clone(), mode.clone(), shutdown.clone());
        tokio::spawn(async move {
            connection(what, stream, peer, mode, handler, shutdown).await;
            drop(permit);
        });
    }
}

async fn connection(
    what: &'static str,
    stream: TcpStream,
    peer: SocketAddr,
    mode: Mode,
    handler: Handler,
    shutdown: watch::Receiver<bool>,
) {
    let acceptor = match mode {
        Mode::Plain => return http(stream, peer, None, handler, shutdown).await,
        Mode::Tls(a) => a,
        Mode::Unified(a) => {
            let mut first = [0u8; 1];
            match tokio::time::timeout(HEAD_TIMEOUT, stream.peek(&mut first)).await {
                Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => a,
                Ok(Ok(1)) => return http(stream, peer, None, handler, shutdown).await,
                _ => return,
            }
        }
    };
    let accept = tokio_rustls::TlsAcceptor::from(acceptor.config()).accept(stream);
    match tokio::time::timeout(HEAD_TIMEOUT, accept).await {
        Ok(Ok(tls)) => {
            let subject = crate::tls::x509_id(tls.get_ref().1.peer_certificates()).map(PeerSubject);
            http(tls, peer, subject, handler, shutdown).await
        }
        Ok(Err(e)) => tracing::debug!(%peer, "{what}: TLS handshake failed: {e}"),
        Err(_) => tracing::debug!(%peer, "{what}: no TLS handshake within 10 s"),
    }
}

/// Serves HTTP/1.1 on one connection until the client closes it, it idles past the head
/// timeout, or the server stops.
async fn http<S>(
    stream: S,
    peer: SocketAddr,
    subject: Option<PeerSubject>,
    handler: Handler,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |mut req: Request<Incoming>| {
        if let Some(s) = &subject {
            req.extensions_mut().insert(s.clone());
        }
        let answer = handler(req, peer);
        async move { Ok::<_, Infallible>(answer.await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%peer, "HTTP connection ended: {e}");
            }
        }
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(1), conn).await;
        }
    }
}
