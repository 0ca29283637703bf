//! Tool gating (spec §23.3.1): the tools a stage's agent may call are those its atoms declare in
//! `od.atom.toolGating[]` (a stage whose atoms all declare theirs is limited to their union; one
//! atom that declares none leaves the stage unlimited). Checked on every call a run makes: a tool
//! call through `od_call` / the per-run MCP (`POST /api/tools/call` with `runId`) and a connector
//! call (its tool token names the run). od's own control tools (signals, answers, run status) are
//! the kernel's and never gated.

use serde_json::Value;

use super::{Engine, WorkError};

/// A call the current stage's atoms do not allow.
#[derive(Debug, thiserror::Error)]
#[error("stage {stage_id:?} of run {run_id} may not call {tool:?} ({kind}): its atoms allow only {}", allowed.join(", "))]
pub struct ToolGated {
    pub run_id: String,
    pub stage_id: String,
    pub tool: String,
    pub kind: String,
    pub allowed: Vec<String>,
}

/// The gating kind of an od tool descriptor (None: a kernel tool, never gated).
pub fn tool_kind(d: &Value) -> Option<&'static str> {
    if d["surface"] == "browser" {
        return Some("browser");
    }
    if d["origin"]["kind"] == "mcp" {
        return Some("mcp");
    }
    let name = d["name"].as_str().unwrap_or("");
    if name.starts_with("files.") {
        return Some(if d["readOnly"] == true { "file-read" } else { "file-write" });
    }
    None
}

impl Engine {
    /// The tool kinds run `run_id`'s current stage allows (None: not limited).
    pub fn stage_gating(&self, run_id: &str) -> Result<Option<(String, Vec<String>)>, WorkError> {
        let run = self.run_info(run_id)?;
        if run.snapshot_id.is_empty() || run.stage_id.is_empty() {
            return Ok(None);
        }
        let snap = self.snapshot(&run.snapshot_id)?;
        let stage =
            snap["pipeline"]["stages"].as_array().into_iter().flatten().find(|s| s["id"] == run.stage_id.as_str());
        let Some(stage) = stage else { return Ok(None) };
        let atoms = stage["atoms"].as_array().into_iter().flatten().filter_map(Value::as_str);
        Ok(crate::plugins::bundled::stage_tool_gating(atoms).map(|g| (run.stage_id.clone(), g)))
    }

    /// Refuses a `kind` call of `tool` the run's current stage does not allow.
    pub fn check_gating(&self, run_id: &str, tool: &str, kind: &str) -> Result<Result<(), ToolGated>, WorkError> {
        Ok(match self.stage_gating(run_id)? {
            Some((stage_id, allowed)) if !allowed.iter().any(|a| a == kind) => {
                Err(ToolGated { run_id: run_id.into(), stage_id, tool: tool.into(), kind: kind.into(), allowed })
            }
            _ => Ok(()),
        })
    }
}
