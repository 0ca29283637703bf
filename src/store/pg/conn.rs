//! Connections of the PostgreSQL backend, replaced when the server went away (a restart, a
//! dropped network): the next use of a closed connection opens a new one. Nothing is retried
//! behind the caller's back — a query or commit that failed is reported as failed (an append that
//! may have committed is never acked; a retry with its op id returns the first result).

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

/// A shared connection for reads, reopened when it closed.
pub(super) struct Shared {
    url: String,
    client: Mutex<Arc<Client>>,
}

impl Shared {
    pub fn new(url: String, client: Client) -> Self {
        Self { url, client: Mutex::new(Arc::new(client)) }
    }

    pub async fn get(&self) -> Result<Arc<Client>, StoreError> {
        let mut g = self.client.lock().await;
        if g.is_closed() {
            *g = Arc::new(connect(&self.url, "reconnecting to PostgreSQL").await?);
        }
        Ok(g.clone())
    }
}
