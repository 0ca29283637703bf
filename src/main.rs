//! The `od` binary: parses the command line and hands it to `od::cli`.

// Functions of at most 70 lines (clippy.toml); tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use clap::Parser;

fn main() {
    let cli = od::cli::Cli::parse_from(od::cli::normalize_args(std::env::args()));
    std::process::exit(od::cli::run(cli));
}
