//! Typed stream ids.
//!
//! A stream id is either a singleton (`plugins`, `marketplaces`, `tools`, `system`) or a typed
//! `<prefix>:<id>` pair (`run:<id>`, `project:<id>`, `snapshot:<id>`, `note:<id>`, …). Ids are
//! ASCII, at most [`StreamId::MAX_LEN`] bytes, and never contain NUL, so they sort and prefix-scan
//! cleanly as storage keys.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a string is not a valid stream id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamIdError {
    /// The id is empty.
    #[error("stream id is empty")]
    Empty,
    /// The id is longer than [`StreamId::MAX_LEN`] bytes.
    #[error("stream id is {len} bytes; the limit is {max}")]
    TooLong { len: usize, max: usize },
    /// The id contains a character outside `[A-Za-z0-9:._-]`.
    #[error("stream id contains {ch:?} at byte {at}; allowed are letters, digits and : . _ -")]
    BadChar { ch: char, at: usize },
    /// The prefix before `:` is empty or the part after it is empty.
    #[error("stream id {0:?} must be `<prefix>:<id>` with both parts non-empty, or a bare name")]
    BadShape(String),
}

/// A validated stream id, e.g. `run:r_123` or `plugins`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct StreamId(String);

impl StreamId {
    /// Longest accepted stream id in bytes (keys stay small; ids are names, not data).
    pub const MAX_LEN: usize = 200;

    /// Validates and wraps `s`.
    pub fn new(s: impl Into<String>) -> Result<Self, StreamIdError> {
        let s = s.into();
        if s.is_empty() {
            return Err(StreamIdError::Empty);
        }
        if s.len() > Self::MAX_LEN {
            return Err(StreamIdError::TooLong { len: s.len(), max: Self::MAX_LEN });
        }
        if let Some((at, ch)) =
            s.char_indices().find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '_' | '-')))
        {
            return Err(StreamIdError::BadChar { ch, at });
        }
        if let Some((prefix, rest)) = s.split_once(':') {
            if prefix.is_empty() || rest.is_empty() {
                return Err(StreamIdError::BadShape(s));
            }
        }
        Ok(Self(s))
    }

    /// Builds `<prefix>:<id>`.
    pub fn typed(prefix: &str, id: &str) -> Result<Self, StreamIdError> {
        Self::new(format!("{prefix}:{id}"))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The part before `:`, or the whole id for a singleton stream.
    pub fn category(&self) -> &str {
        self.0.split_once(':').map_or(self.0.as_str(), |(p, _)| p)
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for StreamId {
    type Error = StreamIdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<StreamId> for String {
    fn from(s: StreamId) -> String {
        s.0
    }
}

impl std::str::FromStr for StreamId {
    type Err = StreamIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_typed_and_singletons() {
        assert!(StreamId::new("run:r_1").is_ok());
        assert!(StreamId::new("plugins").is_ok());
        assert_eq!(StreamId::new("run:abc").unwrap().category(), "run");
    }

    #[test]
    fn rejects_bad_ids() {
        assert_eq!(StreamId::new(""), Err(StreamIdError::Empty));
        assert!(matches!(StreamId::new("run:a b"), Err(StreamIdError::BadChar { ch: ' ', at: 5 })));
        assert!(matches!(StreamId::new(":x"), Err(StreamIdError::BadShape(_))));
        assert!(matches!(StreamId::new("x".repeat(201)), Err(StreamIdError::TooLong { .. })));
    }
}
