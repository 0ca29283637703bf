//! Connections of the PostgreSQL backend, replaced when the server went away (a restart, a
//! dropped network): the next use of a closed connection opens a new one. Nothing is retried
//! behind the caller's back — a query or commit that failed is reported as failed (an append that
//! may have committed is never acked; a retry with its op id returns the first result).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, Mutex};
use tokio_postgres::{Client, NoTls};

use super::{pg_error, tail};
use crate::store::StoreError;

/// A connection with `synchronous_commit = on` (acks follow a durable commit).
pub(super) async fn connect(url: &str, what: &'static str) -> Result<Client, StoreError> {
    let (client, conn) = tokio_postgres::connect(url, NoTls).await.map_err(pg_error(what))?;
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
pub(super) async fn listen(url: &str) -> Result<(Client, mpsc::UnboundedReceiver<()>), StoreError> {
    let (client, conn) = tokio_postgres::connect(url, NoTls).await.map_err(pg_error("connecting to listen"))?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(tail::listen(conn, tx));
    client.batch_execute("LISTEN od_log").await.map_err(pg_error("listening for commits"))?;
    Ok((client, rx))
}

/// A small pool of connections, each reopened when it closed: reads are spread over them in turn
/// (a slow read does not hold up the others), and a connection opens on its first use.
pub(super) struct Shared {
    url: String,
    clients: Vec<Mutex<Option<Arc<Client>>>>,
    next: AtomicUsize,
}

impl Shared {
    /// A pool of one: `client`.
    pub fn new(url: String, client: Client) -> Self {
        Self::pool(url, client, 1)
    }

    /// A pool of `size` connections, the first of them `client`.
    pub fn pool(url: String, client: Client, size: usize) -> Self {
        let mut clients = vec![Mutex::new(Some(Arc::new(client)))];
        clients.extend((1..size.max(1)).map(|_| Mutex::new(None)));
        Self { url, clients, next: AtomicUsize::new(0) }
    }

    pub async fn get(&self) -> Result<Arc<Client>, StoreError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        let mut g = self.clients[i].lock().await;
        match g.as_ref() {
            Some(c) if !c.is_closed() => Ok(c.clone()),
            _ => {
                let c = Arc::new(connect(&self.url, "connecting to PostgreSQL").await?);
                *g = Some(c.clone());
                Ok(c)
            }
        }
    }
}
