//! The `od` binary: parses the command line and hands it to `od::cli`.

use clap::Parser;

fn main() {
    let cli = od::cli::Cli::parse_from(od::cli::normalize_args(std::env::args()));
    std::process::exit(od::cli::run(cli));
}
