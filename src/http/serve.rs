//! Serving the router on a TCP listener, with the bounds a long-running local daemon needs:
//!
//! - **Header-read timeout** (hyper's): a request head must be complete within
//!   [`HttpConfig::header_read_timeout`] of the connection opening or its previous response ending,
//!   so half-sent heads and idle keep-alive connections are closed.
//! - **Write-stall guard** ([`StallGuard`], plus `TCP_USER_TIMEOUT` on Linux): a connection whose
//!   peer takes no bytes for [`HttpConfig::write_stall_timeout`] is closed, which ends its stream and
//!   frees its subscription (streams send keep-alives, so a dead peer is written to).
//! - **Connection cap** ([`Registry`]): at most `max_connections` (and half the descriptor limit)
//!   at once. At the cap a new connection sheds the oldest idle one (no request in flight); with
//!   none idle it gets a 503 `too-many-connections` and is closed (under TLS: closed, since a plain
//!   answer on a TLS port is no answer). So `/api/health` still answers
//!   under a flood of idle connections.
//! - **TLS** (when the daemon has a certificate, `tls.rs`): each admitted connection does its
//!   handshake first, within the header-read timeout and holding its slot, so a client that never
//!   finishes one is dropped like one that never sends a head; the guards above sit under TLS.
//! - **Graceful stop**: on shutdown no more connections are taken, idle ones close, in-flight
//!   responses get [`HTTP_SHUTDOWN_DRAIN_MS`] to finish (streams end at once on their own).
//!
//! The body-read deadline is a request layer (`guard.rs` / `body.rs`).

use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tower::ServiceExt;

use super::config::HttpConfig;
use crate::limits::{
    HTTP_ACCEPT_BACKOFF_MS, HTTP_CONNECTIONS_FD_SHARE, HTTP_OVERFLOW_ANSWERS, HTTP_OVERFLOW_LINGER_MS,
    HTTP_SHUTDOWN_DRAIN_MS,
};

/// Live counts of the server, shown by `GET /api/daemon/status` under `http`.
#[derive(Debug, Default)]
pub struct Gauges {
    /// Open connections.
    pub connections: AtomicUsize,
    /// Open streaming responses (SSE, ND-JSON follows).
    pub streams: AtomicUsize,
    /// The effective connection cap.
    pub max_connections: AtomicUsize,
    /// Connections shed (idle at the cap) or refused (503) since start.
    pub shed: AtomicU64,
    pub refused: AtomicU64,
}

/// Counts one open stream while alive.
pub struct StreamCount(Arc<Gauges>);

impl StreamCount {
    pub fn new(g: &Arc<Gauges>) -> Self {
        g.streams.fetch_add(1, Ordering::Relaxed);
        Self(g.clone())
    }
}

impl Drop for StreamCount {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The cap actually applied: the configured one, at most 1/[`HTTP_CONNECTIONS_FD_SHARE`] of the
/// descriptor limit.
pub fn effective_cap(configured: usize) -> usize {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own; no other memory is touched.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0;
    let fd_share = if ok && lim.rlim_cur != libc::RLIM_INFINITY {
        usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX) / HTTP_CONNECTIONS_FD_SHARE
    } else {
        usize::MAX
    };
    configured.min(fd_share).max(1)
}

/// One admitted connection.
#[derive(Default)]
struct Entry {
    /// Requests whose response has not been fully written.
    in_flight: AtomicUsize,
    shed: AtomicBool,
    wake: Notify,
}

/// The admitted connections, oldest first.
struct Registry {
    conns: Mutex<BTreeMap<u64, Arc<Entry>>>,
    next: AtomicU64,
    cap: usize,
    gauges: Arc<Gauges>,
}

impl Registry {
    /// Admits a connection, shedding the oldest idle one at the cap; None: full of busy ones.
    fn admit(&self) -> Option<(u64, Arc<Entry>)> {
        let mut m = self.conns.lock().expect("registry lock");
        if live_count(&m) >= self.cap {
            let idle = m.values().find(|e| !e.shed.load(Ordering::Relaxed) && e.in_flight.load(Ordering::Acquire) == 0);
            let victim = idle?;
            victim.shed.store(true, Ordering::Relaxed);
            victim.wake.notify_one();
            self.gauges.shed.fetch_add(1, Ordering::Relaxed);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let e = Arc::new(Entry::default());
        m.insert(id, e.clone());
        self.gauges.connections.store(live_count(&m), Ordering::Relaxed);
        Some((id, e))
    }

    fn remove(&self, id: u64) {
        let mut m = self.conns.lock().expect("registry lock");
        m.remove(&id);
        self.gauges.connections.store(live_count(&m), Ordering::Relaxed);
    }
}

/// Admitted connections not shed (a shed one is on its way out; it no longer holds a slot).
fn live_count(m: &BTreeMap<u64, Arc<Entry>>) -> usize {
    m.values().filter(|e| !e.shed.load(Ordering::Relaxed)).count()
}

/// Counts a request in flight until its response body is dropped (written or abandoned).
struct Busy(Arc<Entry>);

impl Busy {
    fn new(e: &Arc<Entry>) -> Self {
        e.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(e.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted in flight.
struct Tracked {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A TCP stream that fails a write the peer has not taken for `limit`.
pub struct StallGuard {
    tcp: TcpStream,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl StallGuard {
    pub fn new(tcp: TcpStream, limit: Duration) -> Self {
        Self { tcp, limit, stalled: None }
    }

    fn stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the peer took no bytes"))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending => self.stall(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }
}

impl AsyncRead for StallGuard {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for StallGuard {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.progress(cx, r)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.progress(cx, r)
    }
    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.tcp).poll_flush(cx);
        self.progress(cx, r)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Unacknowledged data older than `limit` drops the connection (Linux `TCP_USER_TIMEOUT`): a peer
/// that vanished without a FIN is found by the next keep-alive.
fn set_user_timeout(tcp: &TcpStream, limit: Duration) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let ms = libc::c_uint::try_from(limit.as_millis()).unwrap_or(libc::c_uint::MAX);
        // SAFETY: a valid socket descriptor, an int-sized option value we own, its exact size.
        unsafe {
            libc::setsockopt(
                tcp.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_USER_TIMEOUT,
                (&ms as *const libc::c_uint).cast(),
                std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (tcp, limit);
}

/// Answers a connection over the cap with a 503 envelope, then closes it (after reading what the
/// client sent, briefly, so the close does not reset the answer away).
async fn refuse(mut tcp: TcpStream) {
    let body = serde_json::json!({ "error": { "code": "too-many-connections",
        "message": "the daemon has as many connections as it serves at once, all busy; retry shortly",
        "data": null } })
    .to_string();
    let resp = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let linger = async {
        tcp.write_all(resp.as_bytes()).await?;
        tcp.shutdown().await?;
        let mut buf = [0u8; 4096];
        while tcp.read(&mut buf).await? > 0 {}
        Ok::<_, io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_millis(HTTP_OVERFLOW_LINGER_MS), linger).await;
}

/// Serves one admitted connection until it ends, is shed, or the daemon stops; over TLS first
/// when the daemon has a certificate.
async fn connection(
    tcp: TcpStream,
    app: Router,
    cfg: Arc<HttpConfig>,
    entry: Arc<Entry>,
    mut stop: watch::Receiver<bool>,
) {
    let _ = tcp.set_nodelay(true);
    set_user_timeout(&tcp, cfg.write_stall_timeout);
    let peer = tcp.peer_addr().ok().map(|a| super::throttle::Peer(a.ip()));
    let guarded = StallGuard::new(tcp, cfg.write_stall_timeout);
    match cfg.tls.clone() {
        None => http(guarded, peer, app, &cfg, entry, stop).await,
        Some(tls) => {
            if let Some(tls) = handshake(guarded, tls, &cfg, &entry, &mut stop).await {
                http(tls, peer, app, &cfg, entry, stop).await;
            }
        }
    }
}

/// The TLS handshake of an admitted connection (it holds its slot meanwhile, and counts as idle:
/// at the cap it is shed first), bounded by the header-read timeout — a client that connects and
/// never finishes the handshake is dropped at the deadline of one that never sends a head. None:
/// the handshake failed (plain HTTP on the TLS port, an untrusting client), timed out, or the
/// connection was shed or the daemon stopped.
async fn handshake(
    io: StallGuard,
    tls: Arc<rustls::ServerConfig>,
    cfg: &HttpConfig,
    entry: &Entry,
    stop: &mut watch::Receiver<bool>,
) -> Option<tokio_rustls::server::TlsStream<StallGuard>> {
    let accept = tokio_rustls::TlsAcceptor::from(tls).accept(io);
    tokio::select! {
        r = tokio::time::timeout(cfg.header_read_timeout, accept) => match r {
            Ok(Ok(stream)) => Some(stream),
            Ok(Err(e)) => {
                tracing::debug!("TLS handshake failed: {e}");
                None
            }
            Err(_) => None,
        },
        _ = entry.wake.notified() => None,
        _ = stop.wait_for(|v| *v) => None,
    }
}

/// HTTP/1.1 on an admitted connection (plain or TLS) until it ends, is shed, or the daemon stops.
async fn http<I>(
    io: I,
    peer: Option<super::throttle::Peer>,
    app: Router,
    cfg: &HttpConfig,
    entry: Arc<Entry>,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(io);
    let e = entry.clone();
    let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let busy = Busy::new(&e);
        let app = app.clone();
        async move {
            let mut req = req.map(Body::new);
            if let Some(p) = peer {
                req.extensions_mut().insert(p);
            }
            let res = app.oneshot(req).await?;
            Ok::<_, std::convert::Infallible>(res.map(|b| Body::new(Tracked { inner: b, _busy: busy })))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(cfg.header_read_timeout);
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = entry.wake.notified(), if !closing => {
                if entry.in_flight.load(Ordering::Acquire) == 0 {
                    return; // shed while idle: dropping the connection closes it
                }
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = stop.wait_for(|v| *v), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Accepts and serves until `stop` flips, then drains.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    cfg: HttpConfig,
    gauges: Arc<Gauges>,
    stop: watch::Receiver<bool>,
) {
    let cap = effective_cap(cfg.max_connections);
    gauges.max_connections.store(cap, Ordering::Relaxed);
    let registry = Arc::new(Registry { conns: Mutex::default(), next: AtomicU64::new(0), cap, gauges: gauges.clone() });
    let overflow = Arc::new(Semaphore::new(HTTP_OVERFLOW_ANSWERS));
    let cfg = Arc::new(cfg);
    let mut tasks = tokio::task::JoinSet::new();
    let mut stopping = stop.clone();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stopping.wait_for(|v| *v) => break,
        };
        while tasks.try_join_next().is_some() {}
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors or a connection reset before accept: back off briefly.
                if !matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset) {
                    tokio::time::sleep(Duration::from_millis(HTTP_ACCEPT_BACKOFF_MS)).await;
                }
                continue;
            }
        };
        let Some((id, entry)) = registry.admit() else {
            gauges.refused.fetch_add(1, Ordering::Relaxed);
            // A TLS port never answers in plain text: the over-cap connection is just closed.
            if cfg.tls.is_some() {
                continue;
            }
            if let Ok(permit) = overflow.clone().try_acquire_owned() {
                tasks.spawn(async move {
                    refuse(tcp).await;
                    drop(permit);
                });
            }
            continue;
        };
        let (app, cfg, stop, registry) = (app.clone(), cfg.clone(), stop.clone(), registry.clone());
        tasks.spawn(async move {
            connection(tcp, app, cfg, entry, stop).await;
            registry.remove(id);
        });
    }
    drop(listener);
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_millis(HTTP_SHUTDOWN_DRAIN_MS), drain).await.is_err() {
        tasks.abort_all();
    }
}
