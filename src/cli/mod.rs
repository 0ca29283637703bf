//! The `od` command line: the canonical interface. One file per subcommand group. Each command
//! prints for people on a terminal (tables, local times, colours, short ids: `human.rs`) and one
//! exact JSON document with `--json` or when stdout is a pipe or a file (`OD_OUTPUT` forces
//! either); streaming commands print ND-JSON (`{"event","data"}` per line).

mod agents_cmd;
mod args;
mod ask;
mod atoms_cmd;
mod autostart;
mod backend;
mod conn;
mod connectors_cmd;
mod daemon_cmd;
mod daemon_logs;
mod discover;
mod docs;
mod doctor_cmd;
pub mod error;
mod files_cmd;
mod follow;
mod follow_view;
mod fork_cmd;
pub mod human;
mod interrupt;
mod log_cmd;
mod log_copy;
mod marketplace_cmd;
mod mcp_cmd;
mod mcp_oauth_cmd;
mod oauth_wait;
mod open_cmd;
mod paging;
mod plugin_cmd;
mod plugin_lifecycle;
mod project_cmd;
mod projections_cmd;
mod run_cmd;
mod run_start;
mod snapshot_cmd;
mod tools_cmd;
mod ui_cmd;

use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;

pub use error::{CliError, CliResult};

/// `od --version`: the package version and the git commit it was built from (build.rs).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("OD_GIT_COMMIT"), ")");

/// od — OpenDesign's plugin and run engine.
#[derive(Parser, Debug)]
#[command(name = "od", version = VERSION, about)]
pub struct Cli {
    /// Data directory (default: OD_DATA_DIR, else the user data dir + /od).
    #[arg(long, global = true, env = "OD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// URL of a running daemon (default: the data dir's daemon, else http://127.0.0.1:7456, else embedded).
    #[arg(long, global = true, env = "OD_DAEMON_URL")]
    pub daemon_url: Option<String>,
    /// Print machine-readable JSON (the default when stdout is not a terminal; OD_OUTPUT=human|json
    /// forces either).
    #[arg(long, global = true)]
    pub json: bool,
    /// Where the log lives: `embedded` (the data dir) or a `postgres://` URL shared by several
    /// daemons (default: OD_DATABASE_URL, else OD_DAEMON_DB=postgres with OD_PG_*, else embedded).
    #[arg(long, global = true)]
    pub store: Option<String>,
    /// Where plugins and projects live when several daemons share a log: a folder every daemon
    /// mounts (default: the data dir).
    #[arg(long, global = true, env = "OD_SHARED_DIR")]
    pub shared_dir: Option<PathBuf>,
    /// Without a command: a short status of this data dir and its daemon, with hints.
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Start, inspect and stop the daemon.
    #[command(subcommand)]
    Daemon(daemon_cmd::DaemonCmd),
    /// Read, follow, verify and summarise the event log.
    #[command(subcommand)]
    Log(log_cmd::LogCmd),
    /// The read models: list them (version, seq) and rebuild one or all from the log.
    #[command(subcommand)]
    Projections(projections_cmd::ProjectionsCmd),
    /// The bundled atoms and reference pipelines.
    #[command(subcommand)]
    Atoms(atoms_cmd::AtomsCmd),
    /// Marketplace indexes: add, list, refresh, trust, remove, search.
    #[command(subcommand)]
    Marketplace(marketplace_cmd::MarketplaceCmd),
    /// Connectors: the catalog, connecting and disconnecting accounts (OAuth), and (for agents)
    /// calling their tools.
    #[command(subcommand)]
    Connectors(connectors_cmd::ConnectorsCmd),
    /// Install, inspect, check and remove plugins.
    #[command(subcommand)]
    Plugin(plugin_cmd::PluginCmd),
    /// Projects: create (optionally with a plugin), import, list, info, delete.
    #[command(subcommand)]
    Project(project_cmd::ProjectCmd),
    /// Conversations of a project.
    #[command(subcommand)]
    Conversation(project_cmd::ConversationCmd),
    /// A project's files (always inside its directory).
    #[command(subcommand)]
    Files(files_cmd::FilesCmd),
    /// The agents a run may name: list, info, test (a tiny real invocation).
    #[command(subcommand)]
    Agents(agents_cmd::AgentsCmd),
    /// Runs: start, watch, list, info, cancel, logs, signal, respond, devloop, replay.
    #[command(subcommand)]
    Run(run_cmd::RunCmd),
    /// GenUI surfaces: list, show, respond, request, revoke, prefill.
    #[command(subcommand)]
    Ui(ui_cmd::UiCmd),
    /// Agent tools: search, show, import, index, call, a run's manifest and browser actions.
    #[command(subcommand)]
    Tools(tools_cmd::ToolsCmd),
    /// The web UI: start the daemon if none runs, print its URL and open it in a browser
    /// (xdg-open / open on a terminal; OD_BROWSER, a command, whenever set; not with --no-browser).
    Open(open_cmd::OpenArgs),
    /// Serve od's tools over MCP on stdio (od_list / od_call; --flat for the whole catalog).
    Mcp(mcp_cmd::McpArgs),
    /// Check od's derived copies (bundled and installed plugin folders, projects' copies of
    /// artifacts) against their digests and rebuild those that do not match.
    Doctor,
    /// Print a shell completion script: `od completions bash > /etc/bash_completion.d/od`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print od's man page (roff): `od man > ~/.local/share/man/man1/od-engine.1`.
    Man,
}

/// Global options every command sees.
pub struct Ctx {
    pub data_dir: PathBuf,
    pub daemon_url: Option<String>,
    /// Machine output: `--json`, `OD_OUTPUT=json`, or stdout not a terminal.
    pub json: bool,
    pub token: Option<String>,
    /// `--store` and `--shared-dir`, if given (the environment is read when the engine starts).
    pub backend: backend::Backend,
    /// How human output looks (colours, width, now).
    pub look: human::Look,
}

impl Ctx {
    /// Connects to the engine for this data dir: its daemon, else an engine embedded in this
    /// process for this one command.
    pub fn conn(&self) -> CliResult<conn::Conn> {
        conn::Conn::open(&self.data_dir, self.daemon_url.as_deref(), self.token.clone(), &self.backend)
    }

    /// Connects for a command whose work outlives it (a run, an answer that resumes one, a
    /// long-lived stream): the data dir's daemon, started in the background when none runs.
    pub fn conn_daemon(&self) -> CliResult<conn::Conn> {
        conn::Conn::open_daemon(&self.data_dir, self.daemon_url.as_deref(), self.token.clone(), &self.backend)
    }

    /// The full id of a `kind` (`run`, `project`, `conversation`, `snapshot`) that `prefix` names
    /// (the id itself, or the start of exactly one id), resolved by the engine so HTTP clients
    /// and the CLI agree: several → `ambiguous-id` (exit 2) naming them, none → the kind's not-found.
    pub fn resolve(&self, conn: &conn::Conn, kind: &str, prefix: &str) -> CliResult<String> {
        let v = conn.get(&format!("/api/resolve/{kind}/{}", conn::path_segment(prefix)))?;
        Ok(s(&v["id"]).to_string())
    }

    /// [`Ctx::resolve`] of an optional id.
    pub fn resolve_opt(&self, conn: &conn::Conn, kind: &str, prefix: Option<String>) -> CliResult<Option<String>> {
        prefix.map(|p| self.resolve(conn, kind, &p)).transpose()
    }

    /// Prints `v` as JSON (machine output) or through `human`.
    pub fn print(&self, v: &serde_json::Value, human: impl FnOnce(&serde_json::Value) -> String) {
        // A reader that has gone (`| head`) ends the output quietly (`emit`), never a panic.
        let text = if self.json { v.to_string() } else { human(v) };
        paging::emit(&text);
    }
}

/// The data dir: flag, else `OD_DATA_DIR` (both via clap), else the platform's user data dir.
fn data_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.unwrap_or_else(|| dirs::data_dir().unwrap_or_else(|| PathBuf::from(".")).join("od"))
}

/// Runs the parsed command; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    // A foreground daemon sets up its own log (a file or the terminal, at `info`); any other
    // command reports the engine's warnings on stderr.
    if !matches!(cli.cmd, Some(Cmd::Daemon(daemon_cmd::DaemonCmd::Start { foreground: true, .. }))) {
        crate::daemon_log::to_stderr(tracing::Level::WARN);
    }
    let json = match human::machine_output(cli.json) {
        Ok(json) => json,
        Err(e) => {
            e.report();
            return e.exit_code();
        }
    };
    let ctx = Ctx {
        data_dir: data_dir(cli.data_dir),
        daemon_url: cli.daemon_url.filter(|u| !u.is_empty()),
        json,
        token: std::env::var("OD_API_TOKEN").ok().filter(|t| !t.is_empty()),
        backend: backend::Backend { store: cli.store, shared_dir: cli.shared_dir },
        look: human::Look::detect(),
    };
    let Some(cmd) = cli.cmd else {
        return match daemon_cmd::overview(&ctx) {
            Ok(()) => 0,
            Err(e) => {
                e.report();
                e.exit_code()
            }
        };
    };
    let res = match cmd {
        Cmd::Daemon(c) => daemon_cmd::run(&ctx, c),
        Cmd::Log(c) => log_cmd::run(&ctx, c),
        Cmd::Projections(c) => projections_cmd::run(&ctx, c),
        Cmd::Plugin(c) => plugin_cmd::run(&ctx, c),
        Cmd::Atoms(c) => atoms_cmd::run(&ctx, c),
        Cmd::Marketplace(c) => marketplace_cmd::run(&ctx, c),
        Cmd::Connectors(c) => connectors_cmd::run(&ctx, c),
        Cmd::Project(c) => project_cmd::run(&ctx, c),
        Cmd::Conversation(c) => project_cmd::run_conversation(&ctx, c),
        Cmd::Files(c) => files_cmd::run_files(&ctx, c),
        Cmd::Run(c) => run_cmd::run(&ctx, c),
        Cmd::Agents(c) => agents_cmd::run(&ctx, c),
        Cmd::Ui(c) => ui_cmd::run(&ctx, c),
        Cmd::Tools(c) => tools_cmd::run(&ctx, c),
        Cmd::Mcp(a) => mcp_cmd::run(&ctx, a),
        Cmd::Open(a) => open_cmd::run(&ctx, a),
        Cmd::Completions { shell } => docs::completions(shell),
        Cmd::Man => docs::man(),
        Cmd::Doctor => doctor_cmd::run(&ctx),
    };
    match res {
        Ok(()) => 0,
        Err(e) => {
            // A person at a terminal reads the error as text; programs (`--json`, a pipe) get the
            // envelope (`docs/exit-codes.md`).
            match !ctx.json && std::io::stderr().is_terminal() {
                true => e.report_human(),
                false => e.report(),
            }
            e.exit_code()
        }
    }
}

/// An object for people: one `field  value` line per field (strings bare, other values as compact
/// JSON, so a human view is never mistaken for the command's one JSON shape), times (`…At` fields
/// holding Unix ms) as local date-times with how long ago, statuses in colour, null fields left out,
/// an `iteration` counted from 1 as the live view counts it (the JSON keeps the wire's 0-based one).
pub(crate) fn info_lines(look: &human::Look, v: &serde_json::Value) -> String {
    let Some(map) = v.as_object() else { return v.to_string() };
    let shown: Vec<(&String, &serde_json::Value)> = map.iter().filter(|(_, v)| !v.is_null()).collect();
    let width = shown.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let value = |k: &str, v: &serde_json::Value| match v {
        serde_json::Value::Number(n) if k.ends_with("At") || k.ends_with("Since") => {
            n.as_i64().map_or_else(|| n.to_string(), |ms| look.when(ms))
        }
        serde_json::Value::Number(n) if k == "iteration" => {
            n.as_u64().map_or_else(|| n.to_string(), |i| (i + 1).to_string())
        }
        serde_json::Value::String(text) if k == "status" => look.status(text),
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    shown.iter().map(|(k, v)| format!("{k:<width$}  {}", value(k, v))).collect::<Vec<_>>().join("\n")
}

/// A JSON string field, or "".
pub(crate) fn s(v: &serde_json::Value) -> &str {
    v.as_str().unwrap_or("")
}

/// Rewrites `--json <object>` (the spec's `od run respond <id> --json '{…}'`) to `--body <object>`,
/// since the global `--json` flag takes no value.
pub fn normalize_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        if a == "--json" && it.peek().is_some_and(|n| n.trim_start().starts_with('{')) {
            out.push("--body".into());
        } else if let Some(v) = a.strip_prefix("--json=").filter(|v| v.trim_start().starts_with('{')) {
            out.push(format!("--body={v}"));
        } else {
            out.push(a);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_lines_count_an_iteration_from_one_as_the_live_view_does() {
        let look = human::Look { colour: false, width: None, now_ms: 0 };
        let v = serde_json::json!({ "runId": "r1", "iteration": 0, "stageId": null });
        assert_eq!(info_lines(&look, &v), "runId      r1\niteration  1");
        let v = serde_json::json!({ "iteration": 2 });
        assert_eq!(info_lines(&look, &v), "iteration  3");
    }
}
