//! Where the process's diagnostics go: `tracing` events filtered by `RUST_LOG` (target=level
//! directives such as `od=debug,sled=warn`; default `info` for a daemon, `warn` for other commands),
//! written to stderr — and, for a daemon given a log file (`od daemon start` in the background, or
//! one started on demand), to `<data-dir>/daemon.log` with a size cap: past
//! [`DAEMON_LOG_MAX_BYTES`] the file is renamed `daemon.log.1` (replacing the previous one) and a
//! new one is started, so the two never hold more than twice the cap.
//!
//! A daemon's stdout and stderr are the log file itself (`dup2`), so what does not go through
//! `tracing` — a panic message, the error envelope of a failed start — lands in the same file and is
//! rotated with it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::prelude::*;

use crate::limits::DAEMON_LOG_MAX_BYTES;

/// The daemon's log file in a data dir.
pub fn log_file(data_dir: &Path) -> PathBuf {
    data_dir.join("daemon.log")
}

/// The rotated predecessor of a log file (`daemon.log.1`).
pub fn rotated(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".1");
    file.with_file_name(name)
}

/// The filter from `RUST_LOG`, else `default` for od's own targets and `warn` for the rest. An
/// unreadable `RUST_LOG` is reported once and the default used.
fn filter(default: tracing::Level) -> Targets {
    let fallback = Targets::new().with_default(tracing::Level::WARN).with_target("od", default);
    match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => spec.parse::<Targets>().unwrap_or_else(|e| {
            eprintln!("od: RUST_LOG={spec:?} is not a list of target=level directives ({e}); using the default");
            fallback
        }),
        _ => fallback,
    }
}

/// Sends `tracing` events to stderr (a command, a foreground daemon). Called once per process.
pub fn to_stderr(default: tracing::Level) {
    let layer = tracing_subscriber::fmt::layer().with_writer(io::stderr).with_ansi(false).with_target(false);
    let _ = tracing_subscriber::registry().with(layer.with_filter(filter(default))).try_init();
}

/// Makes `file` this process's stdout, stderr and `tracing` output, rotated by size.
pub fn to_file(file: &Path, default: tracing::Level) -> io::Result<()> {
    let log = Capped::open(file.to_path_buf(), DAEMON_LOG_MAX_BYTES)?;
    let writer = CappedWriter(std::sync::Arc::new(Mutex::new(log)));
    let layer = tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(false).with_target(false);
    let _ = tracing_subscriber::registry().with(layer.with_filter(filter(default))).try_init();
    Ok(())
}

/// A log file (behind fds 1 and 2 when `redirect`), rotated when it grows past `max` bytes.
struct Capped {
    path: PathBuf,
    file: File,
    max: u64,
    redirect: bool,
}

impl Capped {
    fn open(path: PathBuf, max: u64) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        redirect_std(&file)?;
        Ok(Self { path, file, max, redirect: true })
    }

    /// Renames the file to `<name>.1` and starts a new one when it is past the cap (its size read
    /// from the file: writes that bypass `tracing` count too).
    fn rotate_if_full(&mut self) -> io::Result<()> {
        if self.file.metadata()?.len() < self.max {
            return Ok(());
        }
        std::fs::rename(&self.path, rotated(&self.path))?;
        let file = OpenOptions::new().create(true).append(true).open(&self.path)?;
        if self.redirect {
            redirect_std(&file)?;
        }
        self.file = file;
        Ok(())
    }
}

/// Points fds 1 and 2 at `file`.
fn redirect_std(file: &File) -> io::Result<()> {
    for fd in [1, 2] {
        // SAFETY: dup2 only replaces descriptor `fd` with a duplicate of an open one we own.
        if unsafe { libc::dup2(file.as_raw_fd(), fd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The `MakeWriter` over the capped file: one write per event, rotation checked before it.
#[derive(Clone)]
struct CappedWriter(std::sync::Arc<Mutex<Capped>>);

impl Write for CappedWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A failed rotation (a full disk) keeps writing where it was: never lose the line for it.
        let _ = log.rotate_if_full();
        log.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for CappedWriter {
    type Writer = CappedWriter;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_log_is_rotated_once_and_the_pair_stays_within_twice_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.log");
        let file = OpenOptions::new().create(true).append(true).open(&path).unwrap();
        let mut log = Capped { path: path.clone(), file, max: 1000, redirect: false };
        for i in 0..100 {
            log.rotate_if_full().unwrap();
            writeln!(log.file, "line {i:04} {}", "x".repeat(40)).unwrap();
        }
        let now = std::fs::metadata(&path).unwrap().len();
        let old = std::fs::metadata(rotated(&path)).unwrap().len();
        assert!(now <= 1000 + 60 && old <= 1000 + 60, "{now} {old}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with(&format!("line 0099 {}\n", "x".repeat(40))), "the newest line is in the current file");
        assert!(!dir.path().join("daemon.log.2").exists());
    }

    #[test]
    fn rust_log_directives_filter_by_target() {
        let t: Targets = "od=debug,sled=warn".parse().unwrap();
        assert!(t.would_enable("od::daemon", &tracing::Level::DEBUG));
        assert!(!t.would_enable("sled::tree", &tracing::Level::INFO));
    }
}
