//! The agent's reply as its conversation's next message (`conversation_message`, role `agent`),
//! recorded with the run's end: for runs that recorded the user's message, when the agent said
//! something (its text output, joined: `engine/conversations.rs`).

use od_events::Event;

use super::Ctx;
use crate::engine::conversations::{agent_reply, message};

/// Queues the reply (it lands with `end`). Nothing is queued when the run's output cannot be read:
/// the end reports why recording failed.
pub(super) async fn record_reply(ctx: &mut Ctx) {
    // The agent's output still buffered is part of the reply.
    if ctx.flush().await.is_err() {
        return;
    }
    let Ok(own) = ctx.engine.run_events(&ctx.run_id, 0) else { return };
    let asked = own.iter().any(|s| matches!(&s.event, Event::ConversationMessage(m) if m.role == "user"));
    let replied = own.iter().any(|s| matches!(&s.event, Event::ConversationMessage(m) if m.role == "agent"));
    let created = own.iter().find_map(|s| match &s.event {
        Event::RunCreated(c) => Some(c),
        _ => None,
    });
    let (true, false, Some(created)) = (asked, replied, created) else { return };
    let text = agent_reply(&own);
    if text.is_empty() {
        return;
    }
    let _ = ctx.submit(vec![message(created, "agent", text, ctx.now())]);
}
