//! A fake model server for real agent CLIs: Anthropic Messages, OpenAI Responses, OpenAI Chat
//! Completions and Gemini `streamGenerateContent?alt=sse` (plus their non-streaming forms), on
//! plain HTTP/1.1 over loopback — put [`super::tls::TlsFront`] in front for HTTPS.
//!
//! Stateless and scripted, deciding from the request alone (the rules in
//! `shared/reference/agent-clis.md`): a tool result in the last turn → the final text
//! ([`FINAL_TEXT`]); in an od prompt of a stage other than `generate` → a short text; tools
//! offered and no result yet → one call of the CLI's write-file tool
//! (`Write`, `write_file`, `write`, `create`, or the shell: `exec_command` / `shell`) writing
//! [`PAGE`] to `index.html` in the working folder the CLI's own prompt names; no tools (titles, side
//! queries) → a short text. Every answer reports usage ([`INPUT_TOKENS`], [`OUTPUT_TOKENS`]).
//! `HEAD /` answers 200 (Claude Code probes it). Each request is kept (method, path, JSON body)
//! for the test to look at.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the page the fake asks for holds (the test checks the artifact's bytes against it).
pub const PAGE: &str = "<!doctype html><title>fake</title><h1>Hello from the fake model</h1>\n";
/// The text after the tool result.
pub const FINAL_TEXT: &str = "I wrote index.html for you.";
/// The text of a request without tools.
pub const PLAIN_TEXT: &str = "Fake title";
/// How od's prompt names its stage, and the stage that writes the page.
const STAGE_MARK: &str = "## Active stage: ";
const GENERATE_STAGE: &str = "## Active stage: generate";
pub const INPUT_TOKENS: u64 = 100;
pub const OUTPUT_TOKENS: u64 = 20;
/// A request body larger than this is refused (the CLIs' prompts are a few hundred KB at most).
const MAX_BODY: usize = 16 << 20;

/// One request the fake answered.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub body: Value,
}

/// The running fake; stops when dropped.
pub struct FakeModel {
    pub addr: SocketAddr,
    /// Every model call answers 500 (an outage), for error tests.
    pub failing: bool,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeModel {
    pub fn start() -> FakeModel {
        Self::launch(false)
    }

    /// A fake whose every model call (`POST`) answers `500` with an API error body.
    pub fn start_failing() -> FakeModel {
        Self::launch(true)
    }

    fn launch(failing: bool) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let seen = seen2.clone();
                std::thread::spawn(move || serve(conn, &seen, failing));
            }
        });
        FakeModel { addr, failing, seen, stop, thread: Some(thread) }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The paths requested so far, `METHOD path` each.
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().iter().map(|s| format!("{} {}", s.method, s.path)).collect()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves one connection's requests (keep-alive) until the client closes it.
fn serve(conn: TcpStream, seen: &Mutex<Vec<Seen>>, failing: bool) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(120)));
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let mut length = 0usize;
        let mut chunked = false;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap_or((h, ""));
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                _ => {}
            }
        }
        let body = if chunked { read_chunked(&mut reader) } else { read_exact(&mut reader, length) };
        let Some(body) = body else { return };
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        seen.lock().unwrap().push(Seen { method: method.clone(), path: path.clone(), body: body.clone() });
        let reply = if failing && method == "POST" {
            let error = json!({"type": "error", "error": {"type": "api_error", "message": "fake outage", "code": 500}});
            response("500 Internal Server Error", "application/json", &error.to_string())
        } else {
            answer(&method, &path, &body)
        };
        if out.write_all(&reply).is_err() || out.flush().is_err() {
            return;
        }
    }
}

fn read_exact(r: &mut impl Read, n: usize) -> Option<Vec<u8>> {
    if n > MAX_BODY {
        return None;
    }
    let mut buf = vec![0; n];
    r.read_exact(&mut buf).ok()?;
    Some(buf)
}

fn read_chunked(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        r.read_line(&mut size).ok()?;
        let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16).ok()?;
        if body.len() + n > MAX_BODY {
            return None;
        }
        let mut chunk = vec![0; n + 2];
        r.read_exact(&mut chunk).ok()?;
        body.extend_from_slice(&chunk[..n]);
        if n == 0 {
            return Some(body);
        }
    }
}

/// A whole HTTP response: status, content type, body (length-delimited, connection kept).
fn response(status: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\ncache-control: no-cache\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn sse(events: &[(Option<&str>, Value)]) -> Vec<u8> {
    let mut body = String::new();
    for (name, data) in events {
        if let Some(n) = name {
            body.push_str(&format!("event: {n}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    response("200 OK", "text/event-stream", &body)
}

fn json_reply(v: Value) -> Vec<u8> {
    response("200 OK", "application/json", &v.to_string())
}

/// What the fake says to one request.
fn answer(method: &str, path: &str, body: &Value) -> Vec<u8> {
    let p = path.split('?').next().unwrap_or("");
    match method {
        "HEAD" => return response("200 OK", "text/plain", ""),
        "GET" if p.ends_with("/models") => {
            return json_reply(json!({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}))
        }
        "GET" => return response("200 OK", "application/json", "{}"),
        _ => {}
    }
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if p.ends_with("/count_tokens") {
        json_reply(json!({"input_tokens": INPUT_TOKENS}))
    } else if p.ends_with(":countTokens") {
        json_reply(json!({"totalTokens": INPUT_TOKENS}))
    } else if p.ends_with("/messages") {
        anthropic(body, stream)
    } else if p.ends_with("/responses") {
        responses(body)
    } else if p.ends_with("/chat/completions") {
        chat(body, stream)
    } else if p.contains(":streamGenerateContent") || p.contains(":generateContent") {
        gemini(body, p.contains(":streamGenerateContent"))
    } else {
        response("404 Not Found", "application/json", "{\"error\":\"not faked\"}")
    }
}

/// What to do next.
enum Turn {
    /// Say this.
    Say(&'static str),
    /// Call `tool` with these arguments.
    Call(String, Value),
}

/// The working folder the CLI's prompt names (each states it), or none (then a relative path).
fn working_folder(body: &Value) -> Option<String> {
    let text = body.to_string();
    let markers = [
        "Working directory: ",
        "working directory: ",
        "<cwd>",
        "I'm currently working in the directory: ",
        "current working directory is ",
        "<current_working_directory>",
        "Current working directory: ",
        "Current directory: ",
    ];
    for m in markers {
        if let Some(i) = text.find(m) {
            let rest = &text[i + m.len()..];
            let end = rest.find(['\\', '<', '"', ' ', '\n']).unwrap_or(rest.len());
            let dir = rest[..end].trim_end_matches(['.', ',', '`']);
            if dir.starts_with('/') {
                return Some(dir.to_string());
            }
        }
    }
    None
}

fn page_path(body: &Value) -> String {
    match working_folder(body) {
        Some(dir) => format!("{}/index.html", dir.trim_end_matches('/')),
        None => "index.html".to_string(),
    }
}

/// The write call for whichever write tool is offered (`names` are the offered tools' names).
fn write_call(names: &[String], body: &Value) -> Option<Turn> {
    let path = page_path(body);
    let has = |n: &str| names.iter().any(|t| t == n);
    let heredoc = format!("cat > {path} <<'OD_EOF'\n{}OD_EOF", PAGE);
    let call = if has("Write") {
        ("Write", json!({"file_path": path, "content": PAGE}))
    } else if has("write_file") {
        ("write_file", json!({"file_path": path, "content": PAGE}))
    } else if has("write") {
        ("write", json!({"filePath": path, "content": PAGE}))
    } else if has("create") {
        ("create", json!({"path": path, "file_text": PAGE}))
    } else if has("exec_command") {
        ("exec_command", json!({"cmd": heredoc}))
    } else if has("shell") {
        ("shell", json!({"command": ["bash", "-lc", heredoc]}))
    } else {
        return None;
    };
    Some(Turn::Call(call.0.to_string(), call.1))
}

fn decide(tool_result_last: bool, tool_names: &[String], body: &Value) -> Turn {
    if tool_result_last {
        return Turn::Say(FINAL_TEXT);
    }
    // od's prompt names its stage: only `generate` writes the page (a second write of a file
    // the CLI has not read is refused by some, e.g. Claude Code's `Write`).
    let text = body.to_string();
    if tool_names.is_empty() || (text.contains(STAGE_MARK) && !text.contains(GENERATE_STAGE)) {
        return Turn::Say(PLAIN_TEXT);
    }
    write_call(tool_names, body).unwrap_or(Turn::Say(PLAIN_TEXT))
}

fn names_at(tools: Option<&Value>, pointer: &str) -> Vec<String> {
    tools
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer(pointer).and_then(Value::as_str).map(str::to_string))
        .collect()
}

// ---- Anthropic Messages ------------------------------------------------------------------------

fn anthropic(body: &Value, stream: bool) -> Vec<u8> {
    let msgs = body.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    let last_user = msgs.iter().rev().find(|m| m["role"] == "user");
    let result_last =
        last_user.and_then(|m| m["content"].as_array()).is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"));
    let turn = decide(result_last, &names_at(body.get("tools"), "/name"), body);
    let model = body.get("model").cloned().unwrap_or(json!("fake-model"));
    let usage = json!({"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS});
    let (block, stop) = match &turn {
        Turn::Say(t) => (json!({"type": "text", "text": t}), "end_turn"),
        Turn::Call(name, input) => {
            (json!({"type": "tool_use", "id": "toolu_fake_1", "name": name, "input": input}), "tool_use")
        }
    };
    if !stream {
        return json_reply(json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage}));
    }
    let start = match &turn {
        Turn::Say(_) => json!({"type": "text", "text": ""}),
        Turn::Call(name, _) => json!({"type": "tool_use", "id": "toolu_fake_1", "name": name, "input": {}}),
    };
    let delta = match &turn {
        Turn::Say(t) => json!({"type": "text_delta", "text": t}),
        Turn::Call(_, input) => json!({"type": "input_json_delta", "partial_json": input.to_string()}),
    };
    sse(&[
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1}}}),
        ),
        (Some("content_block_start"), json!({"type": "content_block_start", "index": 0, "content_block": start})),
        (Some("content_block_delta"), json!({"type": "content_block_delta", "index": 0, "delta": delta})),
        (Some("content_block_stop"), json!({"type": "content_block_stop", "index": 0})),
        (
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": OUTPUT_TOKENS}}),
        ),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ])
}

// ---- OpenAI Responses --------------------------------------------------------------------------

fn responses(body: &Value) -> Vec<u8> {
    let input = body.get("input").and_then(Value::as_array).cloned().unwrap_or_default();
    let last_user = input.iter().rposition(|i| i["role"] == "user").unwrap_or(0);
    let result_last = input[last_user..]
        .iter()
        .any(|i| matches!(i["type"].as_str(), Some("function_call_output" | "custom_tool_call_output")));
    let turn = decide(result_last, &names_at(body.get("tools"), "/name"), body);
    let item = match &turn {
        Turn::Say(t) => json!({"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]}),
        Turn::Call(name, args) => json!({"type": "function_call", "id": "fc_fake", "call_id": "call_fake_1",
            "name": name, "arguments": args.to_string(), "status": "completed"}),
    };
    let usage = json!({"input_tokens": INPUT_TOKENS, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": OUTPUT_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS});
    let mut events = vec![(
        Some("response.created"),
        json!({"type": "response.created", "response": {"id": "resp_fake", "object": "response", "status": "in_progress", "output": []}}),
    )];
    if let Turn::Say(t) = &turn {
        events.push((
            Some("response.output_text.delta"),
            json!({"type": "response.output_text.delta",
            "item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": t}),
        ));
    }
    events.push((
        Some("response.output_item.done"),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ));
    events.push((
        Some("response.completed"),
        json!({"type": "response.completed", "response": {"id": "resp_fake",
        "object": "response", "status": "completed", "output": [item], "usage": usage}}),
    ));
    sse(&events)
}

// ---- OpenAI Chat Completions -------------------------------------------------------------------

fn chat(body: &Value, stream: bool) -> Vec<u8> {
    let msgs = body.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    let result_last = msgs.last().is_some_and(|m| m["role"] == "tool");
    let turn = decide(result_last, &names_at(body.get("tools"), "/function/name"), body);
    let model = body.get("model").cloned().unwrap_or(json!("fake-model"));
    let usage = json!({"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS});
    let (message, finish) = match &turn {
        Turn::Say(t) => (json!({"role": "assistant", "content": t}), "stop"),
        Turn::Call(name, args) => (
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_fake_1", "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]}),
            "tool_calls",
        ),
    };
    if !stream {
        return json_reply(json!({"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}));
    }
    let chunk = |delta: Value, finish: Value, usage: Value| {
        let choices =
            if delta.is_null() { json!([]) } else { json!([{"index": 0, "delta": delta, "finish_reason": finish}]) };
        json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": model,
            "choices": choices, "usage": usage})
    };
    let delta = match &turn {
        Turn::Say(t) => json!({"role": "assistant", "content": t}),
        Turn::Call(name, args) => json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_fake_1",
            "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}),
    };
    let mut body = String::new();
    for c in [
        chunk(delta, Value::Null, Value::Null),
        chunk(json!({}), json!(finish), Value::Null),
        chunk(Value::Null, Value::Null, usage),
    ] {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    response("200 OK", "text/event-stream", &body)
}

// ---- Gemini ------------------------------------------------------------------------------------

fn gemini(body: &Value, stream: bool) -> Vec<u8> {
    let contents = body.get("contents").and_then(Value::as_array).cloned().unwrap_or_default();
    let result_last = contents
        .last()
        .and_then(|c| c["parts"].as_array())
        .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()));
    let names: Vec<String> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|t| names_at(t.get("functionDeclarations"), "/name"))
        .collect();
    // A request for structured JSON (Gemini CLI's side checks) wants JSON text back.
    let wants_json =
        body.pointer("/generationConfig/responseMimeType").and_then(Value::as_str) == Some("application/json");
    let turn = if wants_json && names.is_empty() {
        Turn::Say("{\"next_speaker\":\"user\",\"reasoning\":\"done\"}")
    } else {
        decide(result_last, &names, body)
    };
    let part = match &turn {
        Turn::Say(t) => json!({"text": t}),
        Turn::Call(name, args) => json!({"functionCall": {"name": name, "args": args}}),
    };
    let reply = json!({"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": INPUT_TOKENS, "candidatesTokenCount": OUTPUT_TOKENS,
            "totalTokenCount": INPUT_TOKENS + OUTPUT_TOKENS},
        "modelVersion": "fake-model"});
    if stream {
        sse(&[(None, reply)])
    } else {
        json_reply(reply)
    }
}
