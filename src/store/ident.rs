//! The one rule for the identifiers callers choose that reach a store as keys — op ids, client
//! request ids — on every backend: not empty, bounded in bytes, and no NUL or other control
//! character (PostgreSQL refuses NUL in `text`; a control character is never part of a key a
//! client means, and it would reach terminals and logs). Stream ids have their own stricter rule
//! (`StreamId`: letters, digits and `:._-`), which passes this one too. The edges (HTTP routes,
//! the engine) check with it first, naming their field; the store's `prepare` checks every append
//! again, so no path below the edge writes what the edge refuses.

/// Why a string is not an identifier a store accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentError {
    /// The identifier is empty.
    #[error("must not be empty")]
    Empty,
    /// The identifier is longer than its bound (a limit of `limits.rs`).
    #[error("is {len} bytes; the limit is {max}")]
    TooLong { len: usize, max: usize },
    /// The identifier holds NUL or another control character (Unicode category Cc).
    #[error("holds the control character U+{code:04X} at byte {at}; identifiers are printable text")]
    Control { code: u32, at: usize },
}

/// Checks `s` against the identifier rule with the bound `max` (bytes).
pub fn check_ident(s: &str, max: usize) -> Result<(), IdentError> {
    if s.is_empty() {
        return Err(IdentError::Empty);
    }
    if s.len() > max {
        return Err(IdentError::TooLong { len: s.len(), max });
    }
    match s.char_indices().find(|(_, c)| c.is_control()) {
        Some((at, c)) => Err(IdentError::Control { code: c as u32, at }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_empty_long_and_control_characters() {
        assert_eq!(check_ident("run:req-1 é", 200), Ok(()));
        assert_eq!(check_ident("", 200), Err(IdentError::Empty));
        assert_eq!(check_ident("abcd", 3), Err(IdentError::TooLong { len: 4, max: 3 }));
        assert_eq!(check_ident("r\0x", 200), Err(IdentError::Control { code: 0, at: 1 }));
        assert_eq!(check_ident("ab\r\n", 200), Err(IdentError::Control { code: 0x0d, at: 2 }));
        assert_eq!(check_ident("a\u{7f}", 200), Err(IdentError::Control { code: 0x7f, at: 1 }));
        assert_eq!(check_ident("a\u{85}", 200), Err(IdentError::Control { code: 0x85, at: 1 }));
    }
}
