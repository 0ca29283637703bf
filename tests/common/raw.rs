//! Raw HTTP/1.1 over TCP, for tests that must control every header byte (Host, Origin,
//! Content-Type …) or hold a connection half-written.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A response read off the wire.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl RawResponse {
    /// The body as JSON (Null when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
    /// The envelope's `error.code`, or "" for a success.
    pub fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or("").to_string()
    }
}

/// `host:port` of a base URL.
pub fn addr_of(url: &str) -> String {
    url.trim_start_matches("http://").trim_end_matches('/').to_string()
}

/// Connects with a generous read timeout (a hang fails the test instead of stalling it).
pub fn connect(url: &str) -> TcpStream {
    let s = TcpStream::connect(addr_of(url)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Sends one request (`Connection: close`) with exactly these headers and body; reads the answer.
pub fn request(url: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> RawResponse {
    let mut s = connect(url);
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_response(&mut s)
}

/// Reads until the peer closes; parses status, head and (de-chunked) body.
pub fn read_response(s: &mut TcpStream) -> RawResponse {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("the daemon answers and closes");
    parse(&raw)
}

fn parse(raw: &[u8]) -> RawResponse {
    let text = String::from_utf8_lossy(raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body =
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(body) } else { body.into() };
    RawResponse { status, head: head.to_string(), body }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Whether the peer has closed `s` (EOF or reset) — waits up to the socket's read timeout.
pub fn closed_by_peer(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}
