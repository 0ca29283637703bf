//! The read timeout of outbound https connections: a server that sends nothing for
//! [`OUTBOUND_READ_TIMEOUT_MS`](crate::limits::OUTBOUND_READ_TIMEOUT_MS) is given up, even when the
//! request's overall deadline is further away.
//!
//! ureq 2 applies its own read timeout only to requests without an overall deadline, and od's
//! requests always have one (the deadline bounds a server that trickles). So the read timeout is
//! applied here, under TLS: [`Connector`] wraps the TCP stream before the TLS handshake, and
//! before every read lowers the socket's timeout (which ureq sets to the time left before the
//! deadline) to the read timeout when that is shorter; a read that times out then is
//! [`Stalled`], which [`super::outbound`] names. Plain http (loopback only, by the URL rule) has
//! no TLS layer to hook and is bounded by the deadline alone.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use ureq::{ReadWrite, TlsConnector};

/// A read that waited the whole read timeout for a byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server sent nothing for {ms} ms")]
pub struct Stalled {
    pub ms: u128,
}

/// ureq's rustls connector over a stream with a read timeout.
pub struct Connector {
    pub tls: Arc<ClientConfig>,
    pub read_timeout: Duration,
}

impl TlsConnector for Connector {
    fn connect(&self, dns_name: &str, io: Box<dyn ReadWrite>) -> Result<Box<dyn ReadWrite>, ureq::Error> {
        TlsConnector::connect(&self.tls, dns_name, Box::new(Timed { io, read_timeout: self.read_timeout }))
    }
}

#[derive(Debug)]
struct Timed {
    io: Box<dyn ReadWrite>,
    read_timeout: Duration,
}

impl ReadWrite for Timed {
    fn socket(&self) -> Option<&TcpStream> {
        self.io.socket()
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Ours when it is the shorter one, or already set by an earlier read of this one (TLS
        // reads a record in several reads without ureq setting its own again in between).
        let mut ours = false;
        if let Some(s) = self.io.socket() {
            let set = s.read_timeout()?;
            if set.is_none_or(|t| t > self.read_timeout) {
                s.set_read_timeout(Some(self.read_timeout))?;
            }
            ours = set.is_none_or(|t| t >= self.read_timeout);
        }
        match self.io.read(buf) {
            // A socket read timeout is WouldBlock on Unix, TimedOut elsewhere.
            Err(e) if ours && matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                Err(io::Error::new(io::ErrorKind::TimedOut, Stalled { ms: self.read_timeout.as_millis() }))
            }
            r => r,
        }
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.io.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.io.flush()
    }
}

/// The [`Stalled`] somewhere in `err`'s chain (through `io::Error` wrappers), if a read timed out.
pub fn find(err: &(dyn std::error::Error + 'static)) -> Option<Stalled> {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = at {
        if let Some(s) = e.downcast_ref::<Stalled>() {
            return Some(*s);
        }
        if let Some(inner) = e.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
            if let Some(s) = find(inner) {
                return Some(s);
            }
        }
        at = e.source();
    }
    None
}
