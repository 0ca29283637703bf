//! Runs and the CLI around them: agents, pipelines, forks, bundles, terminal and human output, the layout.
//! One test binary for the area (each file of it is a module), so od is linked once for all of them.

#[path = "../common/mod.rs"]
mod common;

#[path = "../architecture.rs"]
mod architecture;
#[path = "../bare_od.rs"]
mod bare_od;
#[path = "../cli_docs.rs"]
mod cli_docs;
#[path = "../exec_agent.rs"]
mod exec_agent;
#[path = "../forks.rs"]
mod forks;
#[path = "../human_output.rs"]
mod human_output;
#[path = "../orphan_agents.rs"]
mod orphan_agents;
#[path = "../run_agents.rs"]
mod run_agents;
#[path = "../run_bundle.rs"]
mod run_bundle;
#[path = "../run_commits.rs"]
mod run_commits;
#[path = "../runaway_agents.rs"]
mod runaway_agents;
#[path = "../runs.rs"]
mod runs;
#[path = "../runs_cli.rs"]
mod runs_cli;
#[path = "../terminal.rs"]
mod terminal;
