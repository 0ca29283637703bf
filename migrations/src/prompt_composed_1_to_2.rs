//! `prompt_composed` schema 1 → 2: the prompt stack is recorded (sections, total tokens, budget,
//! estimator). An old event was composed before any of that was counted: it reads back with no
//! sections, 0 tokens, no budget and an empty estimator — nothing is invented for it.

use crate::v1::PromptComposedV1;
use od_events::runs::PromptComposed;
use rkyv::rancor;

pub(crate) fn hop(payload: &[u8]) -> Result<Vec<u8>, String> {
    let old = rkyv::from_bytes::<PromptComposedV1, rancor::Error>(payload).map_err(|e| e.to_string())?;
    let new = PromptComposed {
        run_id: old.run_id,
        stage_id: old.stage_id,
        iteration: old.iteration,
        digest: old.digest,
        bytes: old.bytes,
        sections: Vec::new(),
        total_tokens: 0,
        budget_tokens: 0,
        estimator: String::new(),
        project_json: String::new(),
    };
    Ok(rkyv::to_bytes::<rancor::Error>(&new).map_err(|e| e.to_string())?.into_vec())
}
