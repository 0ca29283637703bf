//! The `od` command line: the canonical interface. One file per subcommand group; every command
//! takes `--json`; streaming commands print ND-JSON (`{"event","data"}` per line).

mod atoms_cmd;
mod conn;
mod daemon_cmd;
pub mod error;
mod log_cmd;
mod marketplace_cmd;
mod plugin_cmd;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

pub use error::{CliError, CliResult};

/// od — OpenDesign's plugin and run engine.
#[derive(Parser, Debug)]
#[command(name = "od", version, about)]
pub struct Cli {
    /// Data directory (default: OD_DATA_DIR, else the user data dir + /od).
    #[arg(long, global = true, env = "OD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// URL of a running daemon (default: the data dir's daemon, else http://127.0.0.1:7456, else embedded).
    #[arg(long, global = true, env = "OD_DAEMON_URL")]
    pub daemon_url: Option<String>,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Start, inspect and stop the daemon.
    #[command(subcommand)]
    Daemon(daemon_cmd::DaemonCmd),
    /// Read, follow, verify and summarise the event log.
    #[command(subcommand)]
    Log(log_cmd::LogCmd),
    /// The bundled atoms and reference pipelines.
    #[command(subcommand)]
    Atoms(atoms_cmd::AtomsCmd),
    /// Marketplace indexes: add, list, refresh, trust, remove, search.
    #[command(subcommand)]
    Marketplace(marketplace_cmd::MarketplaceCmd),
    /// Install, inspect, check and remove plugins.
    #[command(subcommand)]
    Plugin(plugin_cmd::PluginCmd),
}

/// Global options every command sees.
pub struct Ctx {
    pub data_dir: PathBuf,
    pub daemon_url: Option<String>,
    pub json: bool,
    pub token: Option<String>,
}

impl Ctx {
    /// Connects to the engine for this data dir.
    pub fn conn(&self) -> CliResult<conn::Conn> {
        conn::Conn::open(&self.data_dir, self.daemon_url.as_deref(), self.token.clone())
    }

    /// Prints `v` as JSON (with `--json`) or through `human`.
    pub fn print(&self, v: &serde_json::Value, human: impl FnOnce(&serde_json::Value) -> String) {
        if self.json {
            println!("{v}");
        } else {
            println!("{}", human(v));
        }
    }
}

/// The data dir: flag, else `OD_DATA_DIR` (both via clap), else the platform's user data dir.
fn data_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.unwrap_or_else(|| dirs::data_dir().unwrap_or_else(|| PathBuf::from(".")).join("od"))
}

/// Runs the parsed command; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    let ctx = Ctx {
        data_dir: data_dir(cli.data_dir),
        daemon_url: cli.daemon_url.filter(|u| !u.is_empty()),
        json: cli.json,
        token: std::env::var("OD_API_TOKEN").ok().filter(|t| !t.is_empty()),
    };
    let res = match cli.cmd {
        Cmd::Daemon(c) => daemon_cmd::run(&ctx, c),
        Cmd::Log(c) => log_cmd::run(&ctx, c),
        Cmd::Plugin(c) => plugin_cmd::run(&ctx, c),
        Cmd::Atoms(c) => atoms_cmd::run(&ctx, c),
        Cmd::Marketplace(c) => marketplace_cmd::run(&ctx, c),
    };
    match res {
        Ok(()) => 0,
        Err(e) => {
            e.report();
            e.exit_code()
        }
    }
}
