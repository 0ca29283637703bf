//! `od open`: the web UI. Finds the data dir's daemon or starts one in the background (as
//! `od run start` does: `autostart.rs`), prints the UI's URL, and opens it in a browser — the
//! system's opener (`xdg-open`, `open` on macOS) when stdout is a terminal, or the command in
//! `OD_BROWSER` whenever it is set — unless `--no-browser`.

use clap::Args;
use serde_json::json;
use std::io::IsTerminal;
use std::process::{Command, Stdio};

use super::{CliResult, Ctx};
use crate::limits::OPENER_EXIT_WAIT_MS;

#[derive(Args, Debug)]
pub struct OpenArgs {
    /// Print the URL only; do not start a browser.
    #[arg(long)]
    pub no_browser: bool,
}

pub fn run(ctx: &Ctx, args: OpenArgs) -> CliResult {
    let conn = ctx.conn_daemon()?;
    let status = conn.get("/api/daemon/status")?;
    let url = format!("{}/", conn.base.trim_end_matches('/'));
    let browser = std::env::var("OD_BROWSER").ok().filter(|b| !b.trim().is_empty());
    let wanted = !args.no_browser && (browser.is_some() || std::io::stdout().is_terminal());
    let opened = wanted
        && match launch(browser.as_deref(), &url) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("od: could not open a browser ({e}); open {url} yourself");
                false
            }
        };
    let info = json!({ "url": url, "pid": status["pid"], "opened": opened });
    ctx.print(&info, |v| {
        let how = if opened { " (opened in your browser)" } else { "" };
        format!("od web UI: {}{how} — daemon pid {}", v["url"].as_str().unwrap_or(""), v["pid"])
    });
    Ok(())
}

/// Starts the browser on `url`: `OD_BROWSER` (a shell command; the URL is its last argument), else
/// the platform's opener. It runs in its own process group with no terminal I/O, so it outlives
/// this command and cannot draw over its output. An opener that exits with an error within
/// [`OPENER_EXIT_WAIT_MS`] (no browser, no display) is a failure, not "opened".
fn launch(browser: Option<&str>, url: &str) -> Result<(), String> {
    let mut cmd = match browser {
        Some(b) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(format!("{b} \"$1\"")).arg("od-open").arg(url);
            c
        }
        None => {
            let mut c = Command::new(if cfg!(target_os = "macos") { "open" } else { "xdg-open" });
            c.arg(url);
            c
        }
    };
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let name = browser.unwrap_or(if cfg!(target_os = "macos") { "open" } else { "xdg-open" });
    let mut child = cmd.spawn().map_err(|e| format!("{name}: {e}"))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(OPENER_EXIT_WAIT_MS);
    while std::time::Instant::now() < deadline {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(()),
            Ok(Some(st)) => return Err(format!("{name} failed ({st})")),
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(e) => return Err(format!("{name}: {e}")),
        }
    }
    Ok(())
}
