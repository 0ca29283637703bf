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

/// Child of `put_answers_200_after_the_file_and_its_folder_are_fsynced`: an in-process daemon, one
/// project, one `PUT` of a file into a new folder of it.
#[test]
#[ignore = "child process for put_answers_200_after_the_file_and_its_folder_are_fsynced"]
fn durability_put_child() {
    let Ok(dir) = std::env::var("OD_DURABILITY_PUT_DIR") else {
        return;
    };
    let e = common::harness::Engine::start(std::path::Path::new(&dir), 1_800_000_000_000);
    let (_, p) = e.post("/api/projects", serde_json::json!({ "name": "p" }));
    let project = p["project"]["id"].as_str().unwrap().to_string();
    let r = ureq::put(&format!("{}/api/projects/{project}/files/new%2Fdurable-put.txt", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .set("Content-Type", "application/octet-stream")
        .send_bytes(b"durable-put-body");
    assert_eq!(r.unwrap().status(), 200);
    println!("PUT-ACKED {project}");
}

/// Issue 38: `PUT /api/projects/:id/files/*` answers 200 only after the temp file was fsynced,
/// renamed over the target, and both the target's folder and the folder that holds the new folder
/// were fsynced — checked in the syscalls, under `strace`.
#[test]
fn put_answers_200_after_the_file_and_its_folder_are_fsynced() {
    if std::env::var("OD_SKIP_STRACE").is_ok() {
        eprintln!("skipped: OD_SKIP_STRACE is set");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.txt");
    let data = dir.path().join("data");
    let out = Command::new("strace")
        .args([
            "-f",
            "-y",
            "-s",
            "256",
            "-e",
            "trace=fsync,fdatasync,rename,renameat,renameat2,mkdirat,mkdir,write,writev,sendto,sendmsg",
            "-o",
        ])
        .arg(&trace)
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "durability::durability_put_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("OD_DURABILITY_PUT_DIR", &data)
        .output()
        .expect("strace is installed (set OD_SKIP_STRACE=1 to skip)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let project = stdout.lines().find_map(|l| l.split("PUT-ACKED ").nth(1)).expect("the child's ack").trim();
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let find = |from: usize, what: &dyn Fn(&str) -> bool| (from..lines.len()).find(|&i| what(lines[i]));
    let project_dir = format!("/{project}>");
    let mkdir = find(0, &|l| l.contains("mkdirat(") && l.contains(&project_dir) && l.contains("\"new\""))
        .unwrap_or_else(|| panic!("no mkdirat of new/:\n{text}"));
    let rename = find(mkdir, &|l| l.contains("renameat") && l.contains("\"durable-put.txt\""))
        .unwrap_or_else(|| panic!("no rename onto durable-put.txt:\n{text}"));
    let tmp_fsync = (mkdir..rename).find(|&i| lines[i].contains("fsync(") && lines[i].contains(".od-"));
    assert!(tmp_fsync.is_some(), "the temp file is fsynced before the rename:\n{text}");
    let ok =
        find(rename, &|l| l.contains("HTTP/1.1 200")).unwrap_or_else(|| panic!("no 200 after the rename:\n{text}"));
    let synced_dir = |suffix: &str| (rename..ok).any(|i| lines[i].contains("fsync(") && lines[i].contains(suffix));
    assert!(synced_dir(&format!("/{project}/new>")), "the file's folder is fsynced before the 200:\n{text}");
    assert!(synced_dir(&project_dir), "the new folder's parent is fsynced before the 200:\n{text}");
}

/// Files in `src/` that may write a file without `od::durable` (or `safe_fs`), each with its reason.
/// Any other plain write fails `every_file_write_in_src_goes_through_the_durable_primitive`.
const PLAIN_WRITES_ALLOWED: &[(&str, &str)] = &[
    ("src/store/sled/files.rs", "the log's own file layer: it fsyncs each commit itself (tests/store/store_faults.rs)"),
    ("src/store/pg/mod.rs", "a lock file held while the process runs; its contents mean nothing"),
    ("src/store/sled/verify.rs", "a copy of the log for `od log verify --copy`, verified after, never acknowledged"),
    ("src/daemon.rs", "the discovery file: describes a live process, which a power cut ends anyway"),
    ("src/daemon_log.rs", "the diagnostic log, appended; not something od acknowledges"),
    ("src/cli/autostart.rs", "the diagnostic log of a daemon started on demand"),
    ("src/engine/archive.rs", "scratch files of an install under tmp/, removed after it"),
    ("src/engine/fetch.rs", "a download into an install's scratch folder, removed after it"),
    ("src/runner/orphans.rs", "records of live agent processes; no process outlives a power cut"),
    ("src/runner/trial.rs", "`od agents test`'s prompt in a scratch folder of its own, removed after the test"),
];

#[test]
fn every_file_write_in_src_goes_through_the_durable_primitive() {
    let patterns = ["fs::write(", "File::create(", "create(true)", "create_new(true)", "fs::copy(", "fs::rename("];
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stack = vec![root.join("src")];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            if PLAIN_WRITES_ALLOWED.iter().any(|(f, _)| *f == rel) {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            // A file's unit tests (its trailing `mod tests`) write fixtures as they like.
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
            for (n, line) in code.lines().enumerate() {
                if patterns.iter().any(|pat| line.contains(pat)) && !line.trim_start().starts_with("//") {
                    found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "plain file writes outside od::durable (make them durable, or list the file with its reason):\n{}",
        found.join("\n")
    );
}
