//! The run's substrate step: before the first agent invocation, stage the plugin's assets, skill
//! context and MCP configuration into the working folder (`engine::substrate`) and record
//! `substrate_staged` — once per run (a resumed run or a fork finds it in its history; a fork's
//! folder was restored from its blobs).

use od_events::Event;
use serde_json::Value;

use super::{store_end, Ctx, Ending};
use crate::engine::substrate::OdMcpServer;

/// The od binary the MCP configuration names: the `OD_BIN` the run gives its agent (the od it is
/// told to call back with), else this process's own executable.
fn od_binary(config: &Value) -> String {
    if let Some(bin) = config["env"]["OD_BIN"].as_str().filter(|b| !b.is_empty()) {
        return bin.to_string();
    }
    std::env::current_exe().map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|_| "od".into())
}

pub(super) async fn stage(ctx: &mut Ctx) -> Result<(), Ending> {
    let history = ctx.history().map_err(|e| Ending::failed("run-setup", format!("reading the run: {e}")))?;
    if history.iter().any(|s| matches!(s.event, Event::SubstrateStaged(_))) {
        return Ok(());
    }
    let data_dir = ctx.engine.store().dir().to_string_lossy().into_owned();
    let od = OdMcpServer {
        command: od_binary(&ctx.config),
        args: vec![
            "--data-dir".into(),
            data_dir,
            "--daemon-url".into(),
            ctx.daemon_url.clone(),
            "mcp".into(),
            "--run".into(),
            ctx.run_id.clone(),
        ],
    };
    let staged = ctx
        .engine
        .stage_substrate(&ctx.snap, &ctx.run_id, &ctx.project_id, &ctx.project_dir, &od)
        .map_err(|e| Ending::failed("substrate", e.to_string()))?;
    if let Some(e) = staged {
        ctx.record(vec![Event::SubstrateStaged(e)]).await.map_err(store_end)?;
    }
    Ok(())
}
