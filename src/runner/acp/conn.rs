//! JSON-RPC 2.0 framing with an ACP agent: one JSON object per line on its stdin and stdout.
//!
//! [`Conn`] sends requests (and routes each answer back to its caller by id), notifications and
//! answers to the agent's own requests; a reader task turns every stdout line into an
//! [`Incoming`] for the session driver. Lines are bounded ([`ACP_MAX_LINE_BYTES`]); a line that is
//! not JSON-RPC is passed on as [`Incoming::Junk`] (shown as stdout, never fatal). When the agent's
//! stdout ends, every request still waiting gets [`RpcError::closed`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::limits::ACP_MAX_LINE_BYTES;
use crate::runner::lines::read_line_capped;

/// A JSON-RPC error (from the agent, or od's answer to one of its requests).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} (JSON-RPC error {code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    /// The spec's "invalid params": a path outside the project, content too large.
    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError { code: -32602, message: message.into() }
    }

    /// A method od does not serve.
    pub fn method_not_found(method: &str) -> RpcError {
        RpcError { code: -32601, message: format!("od does not serve {method}") }
    }

    /// od's side failed (a disk error).
    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError { code: -32603, message: message.into() }
    }

    /// The agent's stdout ended before it answered.
    pub fn closed() -> RpcError {
        RpcError { code: -32000, message: "the agent closed its output before answering".into() }
    }

    /// Whether this is [`RpcError::closed`].
    pub fn is_closed(&self) -> bool {
        self.code == -32000 && self.message == RpcError::closed().message
    }
}

/// What the agent sent that is not an answer to od.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request od must answer (`fs/*`, `session/request_permission`, …).
    Request { id: Value, method: String, params: Value },
    /// A notification (`session/update`).
    Notification { method: String, params: Value },
    /// A stdout line that is not JSON-RPC.
    Junk(String),
    /// A stderr line (sent by the caller's own stderr reader, through the same queue).
    Stderr(String),
}

type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>>;

/// The sending half of the connection; cheap to clone (handlers answer from their own tasks).
#[derive(Clone)]
pub struct Conn {
    out: mpsc::UnboundedSender<String>,
    waiting: Waiting,
    next: Arc<AtomicU64>,
}

impl Conn {
    /// Starts the writer and reader tasks over the agent's stdin and stdout; what is not an answer
    /// goes to `tx`.
    pub fn start<W, R>(stdin: W, stdout: R, tx: mpsc::UnboundedSender<Incoming>) -> Conn
    where
        W: AsyncWrite + Unpin + Send + 'static,
        R: AsyncRead + Unpin + Send + 'static,
    {
        let (out, mut lines) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some(mut line) = lines.recv().await {
                line.push('\n');
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });
        let waiting: Waiting = Arc::default();
        tokio::spawn(read(stdout, waiting.clone(), tx));
        Conn { out, waiting, next: Arc::new(AtomicU64::new(0)) }
    }

    /// Sends a request and waits for its answer.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).insert(id, tx);
        let _ = self.out.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string());
        rx.await.unwrap_or_else(|_| Err(RpcError::closed()))
    }

    /// Sends a notification (`session/cancel`).
    pub fn notify(&self, method: &str, params: Value) {
        let _ = self.out.send(json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string());
    }

    /// Answers the agent's request `id`.
    pub fn respond(&self, id: Value, answer: Result<Value, RpcError>) {
        let msg = match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}}),
        };
        let _ = self.out.send(msg.to_string());
    }
}

/// Reads the agent's stdout until EOF: answers go to their waiting request, the rest to `tx`.
async fn read<R: AsyncRead + Unpin>(stdout: R, waiting: Waiting, tx: mpsc::UnboundedSender<Incoming>) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    while let Ok(Some(dropped)) = read_line_capped(&mut reader, &mut buf, ACP_MAX_LINE_BYTES).await {
        if dropped > 0 {
            let _ = tx.send(Incoming::Junk(format!("(a line of {} bytes was dropped)", buf.len() as u64 + dropped)));
            continue;
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match classify(line) {
            Some(Classified::Answer(id, answer)) => {
                let to = waiting.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                if let Some(to) = to {
                    let _ = to.send(answer);
                }
            }
            Some(Classified::Incoming(msg)) => {
                let _ = tx.send(msg);
            }
            None => {
                let _ = tx.send(Incoming::Junk(line.to_string()));
            }
        }
    }
    // Dropping the senders wakes every waiting request with `closed`.
    waiting.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

enum Classified {
    Answer(u64, Result<Value, RpcError>),
    Incoming(Incoming),
}

fn classify(line: &str) -> Option<Classified> {
    let v: Value = serde_json::from_str(line).ok()?;
    let obj = v.as_object()?;
    match (obj.get("method").and_then(Value::as_str), obj.get("id")) {
        (Some(method), Some(id)) if !id.is_null() => Some(Classified::Incoming(Incoming::Request {
            id: id.clone(),
            method: method.to_string(),
            params: obj.get("params").cloned().unwrap_or(Value::Null),
        })),
        (Some(method), _) => Some(Classified::Incoming(Incoming::Notification {
            method: method.to_string(),
            params: obj.get("params").cloned().unwrap_or(Value::Null),
        })),
        (None, Some(id)) => {
            let id = id.as_u64()?;
            let answer = match obj.get("error").filter(|e| !e.is_null()) {
                Some(e) => Err(RpcError {
                    code: e["code"].as_i64().unwrap_or(-32603),
                    message: e["message"].as_str().unwrap_or("error without a message").to_string(),
                }),
                None => Ok(obj.get("result").cloned().unwrap_or(Value::Null)),
            };
            Some(Classified::Answer(id, answer))
        }
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_told_apart() {
        let req = classify(r#"{"jsonrpc":"2.0","id":"a","method":"fs/read_text_file","params":{"path":"/x"}}"#);
        assert!(
            matches!(req, Some(Classified::Incoming(Incoming::Request { method, .. })) if method == "fs/read_text_file")
        );
        let note = classify(r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#);
        assert!(matches!(note, Some(Classified::Incoming(Incoming::Notification { .. }))));
        let ok = classify(r#"{"jsonrpc":"2.0","id":3,"result":{"sessionId":"s"}}"#);
        assert!(matches!(ok, Some(Classified::Answer(3, Ok(v))) if v["sessionId"] == "s"));
        let err = classify(r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"no"}}"#);
        assert!(matches!(err, Some(Classified::Answer(4, Err(e))) if e.code == -32601));
        assert!(classify("hello").is_none());
        assert!(classify("{}").is_none());
    }
}
