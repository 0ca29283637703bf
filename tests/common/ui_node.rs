//! Runs a Node.js script of tests/ui_js for the cargo wrappers (ui_genui, conformance_ui_genui,
//! ui_browser): in its own process group, killed as a group when it outlives its deadline, and
//! failing the test with everything it printed when it exits non-zero.
// Each wrapper uses part of it.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Fails, naming the fix, unless tests/ui_js/node_modules holds the pinned packages.
pub fn require_node_modules() {
    let nm = repo().join("tests/ui_js/node_modules");
    for pkg in ["playwright-core", "axe-core"] {
        assert!(
            nm.join(pkg).join("package.json").is_file(),
            "{} is missing: install the pinned packages with `npm ci --prefix tests/ui_js` (.ci/run does)",
            nm.join(pkg).display()
        );
    }
}

/// `node <args>` from the repository root with `env` added; panics with its output unless it
/// exits 0 within `limit`.
pub fn run(args: &[&str], env: &[(&str, &Path)], limit: Duration) {
    let mut cmd = Command::new("node");
    cmd.args(args).current_dir(repo()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    cmd.env_remove("NODE_OPTIONS").env_remove("NODE_TEST_CONTEXT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().unwrap_or_else(|e| panic!("node (v20) on PATH: {e}"));
    let pgid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(out) => out.expect("node ran"),
        Err(_) => {
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            panic!("node {} did not finish within {limit:?}", args.join(" "));
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "node {} failed ({}):\n{stdout}\n{stderr}", args.join(" "), out.status);
    println!("{stdout}");
}
