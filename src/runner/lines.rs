//! An exec agent's output on its way to the executor: each pipe is read line by line (a line is
//! kept up to [`MAX_LINE_BYTES`], the rest read and dropped, so a reader never holds more), stdout
//! lines are parsed by the agent's protocol, stderr lines kept as `stderr` output and in a short
//! tail for crash reports, and everything passes the invocation's [`OutputBudget`] before it is
//! sent on — so memory stays bounded however much an agent prints.

use serde_json::json;
use std::collections::VecDeque;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

use super::agent::{AgentEvent, EventSink};
use super::dialects::{LineParser, Parsed};
use super::output::{status, OutputBudget};

/// A longer stdout/stderr line is truncated (the rest of it is read and dropped, and a
/// `line-truncated` status says how much).
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Lines read ahead of the executor, per invocation (each at most [`MAX_LINE_BYTES`]).
pub const LINE_QUEUE: usize = 64;
/// The stderr tail kept for a crash report: at most this many lines …
const TAIL_LINES: usize = 20;
/// … and this many bytes.
const TAIL_BYTES: usize = 4096;

/// One line of the agent's output (lossy UTF-8, without its ending).
pub enum Line {
    /// A stdout line, and how many bytes past [`MAX_LINE_BYTES`] were dropped from it.
    Out(String, u64),
    /// A stderr line, likewise.
    Err(String, u64),
}

/// What the agent's output amounted to so far.
pub struct Lines {
    pub parser: LineParser,
    pub budget: OutputBudget,
    /// The first error the agent reported on stdout.
    pub reported: Option<String>,
    /// The last stderr lines (≤ `TAIL_LINES` lines, ≤ `TAIL_BYTES` bytes).
    pub tail: VecDeque<String>,
}

impl Lines {
    pub fn new(parser: LineParser, budget: OutputBudget) -> Lines {
        Lines { parser, budget, reported: None, tail: VecDeque::new() }
    }

    fn send(&mut self, ev: AgentEvent, sink: &EventSink) {
        for piece in self.budget.admit(ev) {
            let _ = sink.send(piece);
        }
    }

    fn cut(&mut self, channel: &str, kept: usize, dropped: u64, sink: &EventSink) {
        if dropped > 0 {
            let detail = json!({ "channel": channel, "keptBytes": kept, "droppedBytes": dropped });
            self.send(status("line-truncated", detail), sink);
        }
    }

    pub fn handle(&mut self, line: Line, sink: &EventSink) {
        match line {
            Line::Out(line, dropped) => {
                self.cut("stdout", line.len(), dropped, sink);
                for parsed in self.parser.feed(&line) {
                    match parsed {
                        Parsed::Event(ev) => self.send(ev, sink),
                        Parsed::Error(msg) => {
                            self.reported.get_or_insert(msg);
                        }
                        // The exit status is what ends an invocation; `done` is informational.
                        Parsed::Done => {}
                    }
                }
            }
            Line::Err(line, dropped) => {
                self.cut("stderr", line.len(), dropped, sink);
                let mut end = line.len().min(TAIL_BYTES);
                while !line.is_char_boundary(end) {
                    end -= 1;
                }
                self.tail.push_back(line[..end].to_string());
                while self.tail.len() > TAIL_LINES
                    || (self.tail.len() > 1 && self.tail.iter().map(|l| l.len() + 1).sum::<usize>() > TAIL_BYTES)
                {
                    self.tail.pop_front();
                }
                self.send(AgentEvent::Output { channel: "stderr".to_string(), payload: json!({"chunk": line}) }, sink);
            }
        }
    }

    /// The output ended: sends what the parser still owed (see [`LineParser::finish`]).
    pub fn finish(&mut self, sink: &EventSink) {
        for parsed in self.parser.finish() {
            if let Parsed::Event(ev) = parsed {
                self.send(ev, sink);
            }
        }
    }

    pub fn tail(&self) -> String {
        self.tail.iter().map(String::as_str).collect::<Vec<_>>().join("\n")
    }
}

/// Sends every line of `reader` until EOF or the receiver is gone.
pub async fn pump<R: AsyncRead + Unpin>(reader: R, tx: mpsc::Sender<Line>, wrap: fn(String, u64) -> Line) {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    while let Ok(Some(dropped)) = read_line_capped(&mut reader, &mut buf, MAX_LINE_BYTES).await {
        let mut line = String::from_utf8_lossy(&buf).into_owned();
        if line.ends_with('\r') {
            line.pop();
        }
        if tx.send(wrap(line, dropped)).await.is_err() {
            return;
        }
    }
}

/// Reads one line into `buf` (cleared first), keeping at most `cap` bytes of it and discarding
/// the rest up to the newline; returns how many bytes were discarded, `None` at EOF with nothing read.
pub async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Option<u64>> {
    buf.clear();
    let mut read_any = false;
    let mut dropped = 0u64;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(read_any.then_some(dropped));
        }
        read_any = true;
        let (chunk, found) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        let room = cap.saturating_sub(buf.len());
        let keep = chunk.len().min(room);
        buf.extend_from_slice(&chunk[..keep]);
        dropped += (chunk.len() - keep) as u64;
        let used = found.unwrap_or(available.len());
        reader.consume(used);
        if found.is_some() {
            return Ok(Some(dropped));
        }
    }
}
