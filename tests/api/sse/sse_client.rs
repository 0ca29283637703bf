//! A minimal SSE client over a raw tokio TCP stream for tests and benches: one HTTP/1.1 GET with
//! chosen headers, the response's status and headers, a de-chunked body, and SSE frames parsed as
//! they arrive (`id`, `event`, `data`; comments and `retry`-only frames skipped). It also reports
//! protocol slips a real client would choke on (CR in the framing).
#![allow(dead_code)]

use std::io;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: String,
    pub data: String,
}

impl SseEvent {
    /// The id as a number.
    pub fn n(&self) -> u64 {
        self.id.as_deref().and_then(|i| i.parse().ok()).expect("a numeric id")
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data).expect("data is JSON")
    }
}

/// An open SSE response.
pub struct SseConn {
    reader: BufReader<TcpStream>,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    chunked: bool,
    /// Decoded body bytes not parsed yet.
    buf: Vec<u8>,
    eof: bool,
    /// Comment frames seen (keep-alives).
    pub comments: usize,
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

impl SseConn {
    /// Sends `GET path` to `addr` (`host:port`) with `headers`, reads the status line and headers.
    pub async fn open(addr: &str, path: &str, headers: &[(&str, &str)]) -> io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        Self::open_on(stream, addr, path, headers).await
    }

    /// The same on an already connected stream.
    pub async fn open_on(mut stream: TcpStream, addr: &str, path: &str, headers: &[(&str, &str)]) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        stream.write_all(req.as_bytes()).await?;
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).await?;
        let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| bad(line.clone()))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            reader.read_line(&mut line).await?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':').ok_or_else(|| bad(l.to_string()))?;
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        Ok(Self { reader, status, headers, chunked, buf: Vec::new(), eof: false, comments: 0 })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Reads more body bytes into `buf`; false at the end of the body.
    async fn fill(&mut self) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if !self.chunked {
            let mut tmp = [0u8; 16 * 1024];
            let n = self.reader.read(&mut tmp).await?;
            self.buf.extend_from_slice(&tmp[..n]);
            self.eof = n == 0;
            return Ok(n > 0);
        }
        let mut line = String::new();
        if self.reader.read_line(&mut line).await? == 0 {
            self.eof = true;
            return Ok(false);
        }
        let size = usize::from_str_radix(line.trim(), 16).map_err(|_| bad(format!("chunk size {line:?}")))?;
        if size == 0 {
            self.eof = true;
            return Ok(false);
        }
        let at = self.buf.len();
        self.buf.resize(at + size, 0);
        self.reader.read_exact(&mut self.buf[at..]).await?;
        let mut crlf = [0u8; 2];
        self.reader.read_exact(&mut crlf).await?;
        Ok(true)
    }

    /// The next event; None at the end of the stream.
    pub async fn next(&mut self) -> io::Result<Option<SseEvent>> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = self.buf.drain(..pos + 2).collect();
                let text = String::from_utf8(frame).map_err(|_| bad("not UTF-8"))?;
                if text.contains('\r') {
                    return Err(bad("CR in SSE framing"));
                }
                if let Some(e) = self.parse(&text) {
                    return Ok(Some(e));
                }
                continue;
            }
            if !self.fill().await? {
                return if self.buf.iter().all(u8::is_ascii_whitespace) {
                    Ok(None)
                } else {
                    Err(bad(format!("stream ended mid-frame: {:?}", String::from_utf8_lossy(&self.buf))))
                };
            }
        }
    }

    fn parse(&mut self, frame: &str) -> Option<SseEvent> {
        let (mut id, mut event, mut data): (Option<String>, Option<String>, Vec<&str>) = (None, None, Vec::new());
        for line in frame.lines() {
            if line.starts_with(':') {
                self.comments += 1;
                continue;
            }
            let (k, v) = line.split_once(':').unwrap_or((line, ""));
            let v = v.strip_prefix(' ').unwrap_or(v);
            match k {
                "id" => id = Some(v.to_string()),
                "event" => event = Some(v.to_string()),
                "data" => data.push(v),
                _ => {}
            }
        }
        if data.is_empty() {
            return None;
        }
        Some(SseEvent { id, event: event.unwrap_or_else(|| "message".into()), data: data.join("\n") })
    }

    /// Every event until the stream ends.
    pub async fn collect(mut self) -> io::Result<Vec<SseEvent>> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await? {
            out.push(e);
        }
        Ok(out)
    }

    /// Events until (and including) the first named `name`.
    pub async fn until(&mut self, name: &str) -> io::Result<Vec<SseEvent>> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await? {
            let stop = e.event == name;
            out.push(e);
            if stop {
                break;
            }
        }
        Ok(out)
    }
}

/// `host:port` of an `http://host:port` URL.
pub fn addr_of(url: &str) -> String {
    url.trim_start_matches("http://").trim_end_matches('/').to_string()
}
