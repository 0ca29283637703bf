//! Ack means durable, checked at the syscall level: under `strace`, every append's acknowledgement
//! is preceded by a `pwrite64` of its frame into a segment file (`log/*.seg`) and then an `fdatasync` of that
//! file — the commit point — with nothing acknowledged in between.
//!
//! The child is this test binary re-executed (`durability_child`), appending one note at a time and
//! writing `ACK <n>` to stdout after each ack. Needs `strace` (CI installs it); set
//! `OD_SKIP_STRACE=1` to skip on a machine without it.

use crate::common;
use common::*;
use std::io::Write;
use std::process::Command;

const N: usize = 20;

#[test]
#[ignore = "child process for ack_follows_fdatasync_of_the_segment"]
fn durability_child() {
    let Ok(dir) = std::env::var("OD_DURABILITY_DIR") else {
        return;
    };
    let store = open(std::path::Path::new(&dir));
    let mut out = std::io::stdout();
    for n in 0..N {
        append_note(&store, "note:durable", &format!("durable-{n}-marker"));
        writeln!(out, "ACK {n}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn ack_follows_fdatasync_of_the_segment() {
    if std::env::var("OD_SKIP_STRACE").is_ok() {
        eprintln!("skipped: OD_SKIP_STRACE is set");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.txt");
    let data = dir.path().join("data");
    let status = Command::new("strace")
        .args(["-f", "-y", "-s", "4096", "-e", "trace=pwrite64,fdatasync,fsync,write", "-o"])
        .arg(&trace)
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "durability::durability_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("OD_DURABILITY_DIR", &data)
        .status()
        .expect("strace is installed (set OD_SKIP_STRACE=1 to skip)");
    assert!(status.success());
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut pending_write: Option<usize> = None; // event number written to a segment, not yet synced
    let mut synced: Vec<usize> = Vec::new();
    let mut acked = 0;
    for line in text.lines() {
        if line.contains("pwrite64(") && line.contains(".seg>") {
            let n = (0..N).find(|n| line.contains(&format!("durable-{n}-marker")));
            if let Some(n) = n {
                pending_write = Some(n);
            }
        } else if (line.contains("fdatasync(") || line.contains("fsync(")) && line.contains(".seg>") {
            if let Some(n) = pending_write.take() {
                synced.push(n);
            }
        } else if line.contains("write(1") && line.contains("ACK ") {
            let n: usize = line.split("ACK ").nth(1).unwrap().split('\\').next().unwrap().parse().unwrap();
            assert!(synced.contains(&n), "ACK {n} printed before its segment write was fdatasync'ed:\n{text}");
            assert_eq!(n, acked);
            acked += 1;
        }
    }
    assert_eq!(acked, N, "saw {acked} acks in the trace");
}
