//! The run's history as its executor reads it, kept between reads: the lineage (a fork's
//! inherited part, fixed once the fork is recorded) is read once, and each later read decodes only
//! the frames the run's own stream gained since the last one.
//!
//! The executor looks at its history before every stage, invocation and devloop decision; reading
//! and decoding the whole stream each time made a dry run decode its ~60 events some 15 times
//! (issue 33). What a read returns is exactly [`Engine::run_history`]'s answer at that moment: the
//! inherited part without its `end`, then every event of the run's own stream in the log.

use std::sync::{Arc, Mutex};

use crate::engine::{Engine, WorkError};
use od_events::Stored;

/// The cached history (empty until the first read).
#[derive(Default)]
pub(super) struct History {
    cached: Mutex<Option<Cached>>,
}

struct Cached {
    events: Arc<Vec<Stored>>,
    /// The next version of the run's own stream to read.
    next: u64,
}

impl History {
    /// The run's history now (shared; cheap to call again).
    pub(super) fn read(&self, engine: &Engine, run_id: &str) -> Result<Arc<Vec<Stored>>, WorkError> {
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        let c = match cached.as_mut() {
            Some(c) => c,
            None => cached.insert(first_read(engine, run_id)?),
        };
        let new = engine.run_events(run_id, c.next)?;
        if let Some(last) = new.last() {
            c.next = last.envelope.version + 1;
            Arc::make_mut(&mut c.events).extend(new);
        }
        Ok(c.events.clone())
    }
}

/// The whole history, and the version its own stream goes on from.
fn first_read(engine: &Engine, run_id: &str) -> Result<Cached, WorkError> {
    let (mut events, own) = engine.run_history_parts(run_id)?;
    let next = own.last().map_or(0, |s| s.envelope.version + 1);
    events.extend(own);
    Ok(Cached { events: Arc::new(events), next })
}
