//! The agent's reply as its conversation's next message (`conversation_message`, role `agent`),
//! recorded with the run's end: for runs that recorded the user's message, when the agent said
//! something (its text output, joined: `engine/conversations.rs`). Read from the log and the
//! recorder's buffer, so it costs the run no commit of its own.

use od_events::vocab::Role;
use od_events::Event;

use super::Ctx;
use crate::engine::conversations::{agent_reply, message};

/// Queues the reply (it lands with `end`). Called once everything sent is durable
/// ([`super::Recorder::wait_sent`]); nothing is queued when the run's events cannot be read (the
/// end reports why recording failed).
pub(super) fn record_reply(ctx: &Ctx) {
    let Ok(own) = ctx.engine.run_events(&ctx.run_id, 0) else { return };
    let asked = own.iter().any(|s| matches!(&s.event, Event::ConversationMessage(m) if m.role == Role::User));
    let replied = own.iter().any(|s| matches!(&s.event, Event::ConversationMessage(m) if m.role == Role::Agent));
    let created = own.iter().find_map(|s| match &s.event {
        Event::RunCreated(c) => Some(c),
        _ => None,
    });
    let (true, false, Some(created)) = (asked, replied, created) else { return };
    let buffered = ctx.rec.buffered();
    let text = agent_reply(own.iter().map(|s| &s.event).chain(buffered.iter()));
    if text.is_empty() {
        return;
    }
    let _ = ctx.submit(vec![message(created, "agent", text, ctx.now())]);
}
