//! `od daemon logs`: the end of the data dir's `daemon.log` (with its rotated `daemon.log.1` when
//! the current file is shorter than asked), and `--follow` to keep printing as it grows, across a
//! rotation. It reads the file, so it works whether or not a daemon runs. With `--json`, one
//! `{"line": …}` object per line.

use serde_json::json;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use super::{CliError, CliResult, Ctx};
use crate::daemon_log::{log_file, rotated};

/// How often `--follow` looks for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

pub fn run(ctx: &Ctx, lines: usize, follow: bool) -> CliResult {
    let file = log_file(&ctx.data_dir);
    if !file.exists() && !follow {
        let mut e = CliError::new(
            "not-found",
            format!("{} does not exist: no daemon has run in the background on this data dir", file.display()),
        );
        e.data = json!({ "file": file });
        return Err(e);
    }
    let current = read(&file)?;
    let mut text = String::new();
    if count_lines(&current) < lines {
        text.push_str(&read(&rotated(&file))?);
    }
    text.push_str(&current);
    let all: Vec<&str> = text.lines().collect();
    for line in &all[all.len().saturating_sub(lines)..] {
        if !emit(ctx, line) {
            return Ok(());
        }
    }
    if follow {
        follow_file(ctx, &file, current.len() as u64)?;
    }
    Ok(())
}

fn read(file: &Path) -> CliResult<String> {
    match std::fs::read(file) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(CliError::new("error", format!("reading {}: {e}", file.display()))),
    }
}

fn count_lines(text: &str) -> usize {
    text.lines().count()
}

/// Prints one line; false once the reader has gone (a closed pipe).
fn emit(ctx: &Ctx, line: &str) -> bool {
    let out = if ctx.json { json!({ "line": line }).to_string() } else { line.to_string() };
    super::paging::emit(&out)
}

/// Prints what is appended after `offset`; a file that shrank or was replaced (rotation) is read
/// from its start.
fn follow_file(ctx: &Ctx, file: &Path, mut offset: u64) -> CliResult {
    let mut partial = String::new();
    loop {
        std::thread::sleep(FOLLOW_POLL);
        let Ok(mut f) = std::fs::File::open(file) else { continue };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < offset {
            offset = 0;
        }
        if len == offset {
            continue;
        }
        let mut buf = Vec::new();
        f.seek(SeekFrom::Start(offset))
            .and_then(|_| f.read_to_end(&mut buf))
            .map_err(|e| CliError::new("error", format!("reading {}: {e}", file.display())))?;
        offset += buf.len() as u64;
        partial.push_str(&String::from_utf8_lossy(&buf));
        while let Some(i) = partial.find('\n') {
            let line: String = partial.drain(..=i).collect();
            if !emit(ctx, line.trim_end_matches('\n')) {
                return Ok(());
            }
        }
    }
}
