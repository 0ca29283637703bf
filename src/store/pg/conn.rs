//! Connections of the PostgreSQL backend, replaced when the server went away (a restart, a
//! dropped network): the next use of a closed connection opens a new one. Nothing is retried
//! behind the caller's back — a query or commit that failed is reported as failed (an append that
//! may have committed is never acked; a retry with its op id returns the first result). Every
//! connection od makes to PostgreSQL opens here, with the TLS its URL's `sslmode` asks for
//! (`tls.rs`) and libpq's fallbacks between TLS and plain (only `allow` and `prefer` have any).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, Mutex};
use tokio_postgres::config::{Host, SslMode as PgSslMode};
use tokio_postgres::{Client, Socket};

use super::tls::{self, HandshakeError, SslMode, Tls};
use super::{describe, pg_error, tail};
use crate::store::StoreError;

/// A connection to the server, plain or TLS (driven by its own task).
pub(super) type Connection = tokio_postgres::Connection<Socket, tls::TlsStream>;

/// A connection that LISTENs on `od_log`, with its notifications as wake-ups (each carrying the
/// last seq its commit made, `u64::MAX` when the payload does not say).
pub(super) type Listener = (Client, mpsc::UnboundedReceiver<u64>);

/// Where and how to connect: tokio-postgres' settings and the TLS of the URL's `sslmode`.
#[derive(Clone)]
pub(crate) struct Target {
    config: tokio_postgres::Config,
    tls: Tls,
}

impl Target {
    /// Reads `url` (`postgres://…[?sslmode=…&sslrootcert=…]`) and the roots it names. A malformed
    /// URL or TLS setting is `Config`, its `setting` the parameter at fault (`sslmode`,
    /// `sslrootcert`, or `url`); the caller names where the URL came from.
    pub fn parse(url: &str) -> Result<Target, StoreError> {
        let param = |e: tls::ParamError| StoreError::Config { setting: e.param, reason: e.reason };
        let (rest, params) = tls::split_url(url).map_err(param)?;
        let tls = Tls::new(&params, dirs::home_dir().as_deref()).map_err(param)?;
        let mut config: tokio_postgres::Config =
            rest.parse().map_err(|e| StoreError::Config { setting: "url", reason: chain(&e) })?;
        config.ssl_mode(match tls.mode {
            SslMode::Disable | SslMode::Allow => PgSslMode::Disable,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
        });
        // libpq never asks for TLS on a Unix socket (the server does not offer it there).
        let hosts = config.get_hosts();
        if !hosts.is_empty() && hosts.iter().all(|h| matches!(h, Host::Unix(_))) && config.get_hostaddrs().is_empty() {
            config.ssl_mode(PgSslMode::Disable);
        }
        Ok(Target { config, tls })
    }

    /// One connection, with libpq's fallbacks: `allow` tries plain first and TLS if the server
    /// refused it; `prefer` falls back to plain when the TLS handshake failed. Every other mode
    /// has exactly one try.
    async fn open(&self, what: &'static str) -> Result<(Client, Connection), StoreError> {
        let with = |mode: PgSslMode| {
            let mut c = self.config.clone();
            c.ssl_mode(mode);
            c
        };
        let r = match self.tls.mode {
            SslMode::Allow => match self.config.connect(self.tls.clone()).await {
                Err(e) if e.as_db_error().is_some() => with(PgSslMode::Require).connect(self.tls.clone()).await,
                r => r,
            },
            SslMode::Prefer => match self.config.connect(self.tls.clone()).await {
                Err(e) if find::<HandshakeError>(&e).is_some() => {
                    with(PgSslMode::Disable).connect(self.tls.clone()).await
                }
                r => r,
            },
            _ => self.config.connect(self.tls.clone()).await,
        };
        r.map_err(|e| StoreError::io(what, self.explain(&e)))
    }

    /// A failed connection in words: TLS failures say so and why; the password never appears
    /// (tokio-postgres' errors do not carry it).
    fn explain(&self, e: &tokio_postgres::Error) -> String {
        if let Some(h) = find::<HandshakeError>(e) {
            return h.to_string();
        }
        let all = chain(e);
        if all.contains("server does not support TLS") {
            return format!("TLS: the server does not support TLS (sslmode={})", self.tls.mode.name());
        }
        if e.as_db_error().is_some() {
            return describe(e);
        }
        all
    }
}

/// `e` and its sources, `: `-separated (tokio-postgres' Display alone omits the cause).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// The first of `e`'s sources that is a `T`.
fn find<'a, T: std::error::Error + 'static>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a T> {
    let mut cur: Option<&'a (dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(t) = c.downcast_ref::<T>() {
            return Some(t);
        }
        cur = c.source();
    }
    None
}

/// A connection with `synchronous_commit = on` (acks follow a durable commit).
pub(super) async fn connect(target: &Target, what: &'static str) -> Result<Client, StoreError> {
    let (client, conn) = target.open(what).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client.batch_execute("SET synchronous_commit = on").await.map_err(pg_error("setting synchronous_commit"))?;
    // A daemon stopped inside a transaction (SIGSTOP, a paused VM) would hold the log's head row,
    // and every other daemon's appends and takes with it: the server ends such a session.
    let idle = format!("SET idle_in_transaction_session_timeout = {}", crate::limits::PG_IDLE_IN_TRANSACTION_MS);
    client.batch_execute(&idle).await.map_err(pg_error("setting idle_in_transaction_session_timeout"))?;
    Ok(client)
}

/// A connection that LISTENs on `od_log`: its notifications arrive on the receiver (which ends
/// when the connection does). Keep the client: dropping it closes the connection.
pub(super) async fn listen(target: &Target) -> Result<Listener, StoreError> {
    let (client, conn) = target.open("connecting to listen").await?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(tail::listen(conn, tx));
    client.batch_execute("LISTEN od_log").await.map_err(pg_error("listening for commits"))?;
    Ok((client, rx))
}

/// A small pool of connections, each reopened when it closed: reads are spread over them in turn
/// (a slow read does not hold up the others), and a connection opens on its first use.
pub(super) struct Shared {
    target: Target,
    clients: Vec<Mutex<Option<Arc<Client>>>>,
    next: AtomicUsize,
}

impl Shared {
    /// A pool of one: `client`.
    pub fn new(target: Target, client: Client) -> Self {
        Self::pool(target, client, 1)
    }

    /// A pool of `size` connections, the first of them `client`.
    pub fn pool(target: Target, client: Client, size: usize) -> Self {
        let mut clients = vec![Mutex::new(Some(Arc::new(client)))];
        clients.extend((1..size.max(1)).map(|_| Mutex::new(None)));
        Self { target, clients, next: AtomicUsize::new(0) }
    }

    pub async fn get(&self) -> Result<Arc<Client>, StoreError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        let mut g = self.clients[i].lock().await;
        match g.as_ref() {
            Some(c) if !c.is_closed() => Ok(c.clone()),
            _ => {
                let c = Arc::new(connect(&self.target, "connecting to PostgreSQL").await?);
                *g = Some(c.clone());
                Ok(c)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_reaches_tokio_postgres_and_a_unix_socket_is_never_tls() {
        let mode = |url: &str| Target::parse(url).unwrap().config.get_ssl_mode();
        assert_eq!(mode("postgres://od@h/db"), PgSslMode::Prefer);
        assert_eq!(mode("postgres://od@h/db?sslmode=allow"), PgSslMode::Disable);
        assert_eq!(mode("postgres://od@h/db?sslmode=require&connect_timeout=3"), PgSslMode::Require);
        assert_eq!(mode("postgres://od@/db?host=/run/postgresql&sslmode=require"), PgSslMode::Disable);
        let e = Target::parse("postgres://od:secret@h:notaport/db").err().unwrap();
        assert!(matches!(&e, StoreError::Config { setting: "url", reason } if !reason.contains("secret")), "{e:?}");
    }
}
