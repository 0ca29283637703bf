//! Paging a tool search: the cursor and where a page resumes.
//!
//! A search lists a run's live browser tools first (part 0, in advertisement order), then the
//! catalog (part 1): by name when there is no query, else ranked best first with ties by name. The
//! cursor (`tools.<hex>`, see `crate::page`) anchors on the last item shown: its part, its position,
//! its score and its name. The next page starts right after that item in the list as it stands
//! then:
//! - by name (no query): the tools whose name sorts after the anchor's; exact whatever was
//!   registered or removed meanwhile (a new tool lands in its place by name).
//! - ranked: the anchor is found by name near its old position (else anywhere in the ranking) and
//!   the page starts after it; ties rank by name, so the anchor is one place. A tool registered
//!   meanwhile shows on a later page when it ranks after the anchor, and not in this walk when it
//!   ranks before. A registration also changes BM25's statistics (tool count, average length, how
//!   many tools hold a term), which moves every score: the order of tools already ranked is kept
//!   unless those statistics move two of them past each other, so an item can at worst cross the
//!   anchor (skipped or seen twice), never reorder a page. If the anchor itself was removed, the
//!   page starts after its (score, name) in the new ranking.
//! - live tools: after the anchor's name in the run's live list, else after its position.

use crate::page::{decode_cursor, encode_cursor};

/// The cursor scope of tool searches.
pub const SCOPE: &str = "tools";

/// Ranked results read around the anchor's old position before the whole ranking is read.
pub use crate::limits::TOOL_SEARCH_ANCHOR_WINDOW as WINDOW;

/// The last item of a page.
#[derive(Debug, Clone, PartialEq)]
pub struct Anchor {
    /// 0: the run's live browser tools; 1: the catalog.
    pub part: u8,
    /// Position in its part's list when shown.
    pub pos: u32,
    /// Rank score (ranked searches; 0 otherwise).
    pub score: f32,
    pub name: String,
}

impl Anchor {
    /// The opaque cursor.
    pub fn cursor(&self) -> String {
        let mut k = vec![self.part];
        k.extend_from_slice(&self.pos.to_be_bytes());
        k.extend_from_slice(&self.score.to_bits().to_be_bytes());
        k.extend_from_slice(self.name.as_bytes());
        encode_cursor(SCOPE, &k)
    }

    /// Decodes a cursor; None for one that is not a tool search's.
    pub fn parse(cursor: &str) -> Option<Anchor> {
        let k = decode_cursor(SCOPE, cursor).ok()?;
        let (&part, rest) = k.split_first()?;
        if part > 1 || rest.len() < 8 {
            return None;
        }
        let pos = u32::from_be_bytes(rest[..4].try_into().ok()?);
        let score = f32::from_bits(u32::from_be_bytes(rest[4..8].try_into().ok()?));
        let name = String::from_utf8(rest[8..].to_vec()).ok()?;
        (score.is_finite() && !name.is_empty()).then_some(Anchor { part, pos, score, name })
    }
}

/// Whether (score, name) ranks after the anchor's (best first, ties by name).
pub fn ranks_after(score: f32, name: &str, a: &Anchor) -> bool {
    match a.score.total_cmp(&score) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => name > a.name.as_str(),
    }
}

/// Where a page of ranked hits starts: the index just after the anchor in `hits` (a slice of the
/// ranking beginning at `hits_from`), or None when the anchor is not in the slice.
pub fn after_anchor_in(hits: &[(&str, f32)], a: &Anchor) -> Option<usize> {
    hits.iter().position(|(n, _)| *n == a.name).map(|i| i + 1)
}

/// Where a page of ranked hits starts in the whole ranking when the anchor is gone from it.
pub fn after_removed(hits: &[(&str, f32)], a: &Anchor) -> usize {
    hits.iter().position(|(n, s)| ranks_after(*s, n, a)).unwrap_or(hits.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_others() {
        let a = Anchor { part: 1, pos: 7, score: 2.5, name: "x.y".into() };
        assert_eq!(Anchor::parse(&a.cursor()), Some(a));
        assert_eq!(Anchor::parse("5"), None);
        assert_eq!(Anchor::parse(&encode_cursor("runs", &[1, 0, 0, 0, 0, 0, 0, 0, 0, b'a'])), None);
        assert_eq!(Anchor::parse(&encode_cursor(SCOPE, &[2, 0, 0, 0, 0, 0, 0, 0, 0, b'a'])), None);
    }

    #[test]
    fn a_removed_anchor_resumes_after_its_rank() {
        let a = Anchor { part: 1, pos: 1, score: 2.0, name: "b".into() };
        let hits = [("a", 3.0), ("a2", 2.0), ("c", 2.0), ("d", 1.0)];
        assert_eq!(after_removed(&hits, &a), 2);
        assert_eq!(after_anchor_in(&hits, &a), None);
    }
}
