//! Runs and the CLI around them: agents, pipelines, forks, bundles, terminal and human output, the layout.
//! One test binary for the area (each file of it is a module), so od is linked once for all of them.
mod acp;
mod architecture;
mod bare_od;
mod cli_docs;
mod cli_imports;
#[path = "../common/mod.rs"]
mod common;
mod exec_agent;
mod followup;
mod forks;
mod hostile_imports;
mod human_output;
mod orphan_agents;
mod prompt_stack;
mod prompt_tokens;
mod real_acp;
mod real_agents;
mod run_agents;
mod run_bundle;
mod run_commits;
mod runaway_agents;
mod runs;
mod runs_cli;
mod staging;
mod terminal;
