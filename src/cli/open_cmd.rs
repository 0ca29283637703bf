//! `od open`: the web UI. Finds the data dir's daemon or starts one in the background (as
//! `od run start` does: `autostart.rs`), prints the UI's URL, and opens it in a browser — the
//! system's opener (`xdg-open`, `open` on macOS) when stdout is a terminal, or the command in
//! `OD_BROWSER` whenever it is set — unless `--no-browser`.

use clap::Args;
use serde_json::json;
use std::io::IsTerminal;
use std::process::{Command, Stdio};

use super::{CliResult, Ctx};

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

/// Starts the browser on `url` without waiting for it: `OD_BROWSER` (a shell command; the URL is
/// its last argument), else the platform's opener. It runs in its own process group with no
/// terminal I/O, so it outlives this command and cannot draw over its output.
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
    cmd.spawn().map(|_| ()).map_err(|e| format!("{name}: {e}"))
}
