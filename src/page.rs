//! Paging, shared by every list route and command: a request names `limit` (default
//! [`DEFAULT_PAGE_LIMIT`], at most [`MAX_PAGE_LIMIT`]) and an opaque `cursor`; a response carries
//! `nextCursor` (null on the last page) beside the list's own field.
//!
//! A cursor is the sort key of the last item returned, tagged with the list it belongs to
//! (`<scope>.<hex key>`), so a page resumes strictly after that key: items appended meanwhile never
//! shift a later page (each list sorts by a key new items cannot take below the cursor, or says
//! where they land). A cursor from another list, or one that does not decode, is refused naming
//! `cursor`.

use serde_json::{json, Value};

use crate::limits::{DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT};

/// A bad `limit` or `cursor`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PageError {
    /// `limit` is not an integer in 1..=MAX_PAGE_LIMIT.
    #[error("limit must be an integer in 1..={MAX_PAGE_LIMIT}")]
    Limit,
    /// `cursor` does not decode, or belongs to another list.
    #[error("cursor is not a cursor of this list ({0})")]
    Cursor(String),
}

impl PageError {
    /// The request field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            PageError::Limit => "limit",
            PageError::Cursor(_) => "cursor",
        }
    }
}

/// One page request, decoded: how many items, and the sort key to resume strictly after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageReq {
    pub limit: usize,
    pub after: Option<Vec<u8>>,
}

impl PageReq {
    /// The first page with the default limit.
    pub fn first() -> Self {
        Self { limit: DEFAULT_PAGE_LIMIT, after: None }
    }

    /// Decodes the raw query values of a list whose cursors are tagged `scope`.
    pub fn parse(scope: &str, limit: Option<&str>, cursor: Option<&str>) -> Result<Self, PageError> {
        let limit = match limit {
            None => DEFAULT_PAGE_LIMIT,
            Some(raw) => match raw.trim().parse::<usize>() {
                Ok(n) if (1..=MAX_PAGE_LIMIT).contains(&n) => n,
                _ => return Err(PageError::Limit),
            },
        };
        let after = match cursor.filter(|c| !c.is_empty()) {
            None => None,
            Some(c) => Some(decode_cursor(scope, c)?),
        };
        Ok(Self { limit, after })
    }

    /// Whether an item with sort key `key` comes after the cursor.
    pub fn admits(&self, key: &[u8]) -> bool {
        self.after.as_deref().is_none_or(|a| key > a)
    }
}

/// A cursor for `scope` resuming after `key`.
pub fn encode_cursor(scope: &str, key: &[u8]) -> String {
    let mut s = String::with_capacity(scope.len() + 1 + key.len() * 2);
    s.push_str(scope);
    s.push('.');
    for b in key {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The key inside a cursor of `scope`.
pub fn decode_cursor(scope: &str, cursor: &str) -> Result<Vec<u8>, PageError> {
    let bad = || PageError::Cursor(format!("expected a cursor of `{scope}` returned as nextCursor"));
    let hex = cursor.strip_prefix(scope).and_then(|r| r.strip_prefix('.')).ok_or_else(bad)?;
    if hex.len() % 2 != 0 || hex.len() > 2 * crate::limits::MAX_CURSOR_KEY_BYTES {
        return Err(bad());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2).ok_or_else(bad)?, 16).map_err(|_| bad()))
        .collect()
}

/// One page of items and the cursor of the next (None on the last page).
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// Maps the items, keeping the cursor.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page { items: self.items.into_iter().map(f).collect(), next_cursor: self.next_cursor }
    }

    /// The wire shape: `{<field>: [...], "nextCursor": string|null}`.
    pub fn to_json(&self, field: &str) -> Value
    where
        T: serde::Serialize,
    {
        json!({ field: self.items, "nextCursor": self.next_cursor })
    }
}

/// Builds pages from keyed items that arrive in key order (ascending, or descending with
/// `descending`): takes `limit` items past the cursor and reports whether more remain.
pub struct Pager<'a, T> {
    scope: &'a str,
    req: &'a PageReq,
    descending: bool,
    items: Vec<T>,
    last_key: Option<Vec<u8>>,
    more: bool,
}

impl<'a, T> Pager<'a, T> {
    /// A pager for `scope`; `descending` lists take the items whose key is below the cursor.
    pub fn new(scope: &'a str, req: &'a PageReq, descending: bool) -> Self {
        Self { scope, req, descending, items: Vec::new(), last_key: None, more: false }
    }

    /// Whether an item with `key` belongs after the cursor in this list's order.
    pub fn admits(&self, key: &[u8]) -> bool {
        match self.req.after.as_deref() {
            None => true,
            Some(a) if self.descending => key < a,
            Some(a) => key > a,
        }
    }

    /// Offers the next item (in order); returns false once the page is full (stop iterating).
    pub fn push(&mut self, key: &[u8], item: T) -> bool {
        if !self.admits(key) {
            return true;
        }
        if self.items.len() == self.req.limit {
            self.more = true;
            return false;
        }
        self.items.push(item);
        self.last_key = Some(key.to_vec());
        true
    }

    /// The page; `nextCursor` is set only when an item past the page was seen.
    pub fn finish(self) -> Page<T> {
        let next_cursor = if self.more { self.last_key.map(|k| encode_cursor(self.scope, &k)) } else { None };
        Page { items: self.items, next_cursor }
    }
}

/// Pages a small list held in memory: sorts by `key` (ascending) and pages it.
pub fn page_sorted<T>(scope: &str, req: &PageReq, mut items: Vec<T>, key: impl Fn(&T) -> Vec<u8>) -> Page<T> {
    let mut keyed: Vec<(Vec<u8>, T)> = items.drain(..).map(|t| (key(&t), t)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut p = Pager::new(scope, req, false);
    for (k, t) in keyed {
        if !p.push(&k, t) {
            break;
        }
    }
    p.finish()
}

/// Pages items an index read returned in list order past the cursor, each with its key: ask the
/// read for `limit + 1` items, so whether a next page exists is known without another read.
pub fn page_keyed<T>(scope: &str, req: &PageReq, items: Vec<(Vec<u8>, T)>, descending: bool) -> Page<T> {
    let mut p = Pager::new(scope, req, descending);
    for (k, t) in items {
        if !p.push(&k, t) {
            break;
        }
    }
    p.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> Vec<u8> {
        n.to_be_bytes().to_vec()
    }

    #[test]
    fn cursors_round_trip_and_are_scoped() {
        let c = encode_cursor("runs", &[0, 1, 0xab]);
        assert_eq!(decode_cursor("runs", &c).unwrap(), vec![0, 1, 0xab]);
        assert_eq!(decode_cursor("projects", &c).unwrap_err().field(), "cursor");
        assert!(decode_cursor("runs", "runs.0").is_err());
        assert!(decode_cursor("runs", "runs.zz").is_err());
    }

    #[test]
    fn limits_are_checked() {
        assert_eq!(PageReq::parse("x", None, None).unwrap().limit, DEFAULT_PAGE_LIMIT);
        assert_eq!(PageReq::parse("x", Some("0"), None).unwrap_err(), PageError::Limit);
        assert_eq!(PageReq::parse("x", Some("1001"), None).unwrap_err(), PageError::Limit);
        assert_eq!(PageReq::parse("x", Some("-1"), None).unwrap_err(), PageError::Limit);
        assert_eq!(PageReq::parse("x", Some("1000"), None).unwrap().limit, 1000);
    }

    #[test]
    fn pages_cover_every_item_once_in_both_orders() {
        for descending in [false, true] {
            let mut all: Vec<u32> = (0..23).collect();
            if descending {
                all.reverse();
            }
            let mut req = PageReq { limit: 5, after: None };
            let mut seen = Vec::new();
            loop {
                let mut p = Pager::new("n", &req, descending);
                for n in &all {
                    if !p.push(&key(*n), *n) {
                        break;
                    }
                }
                let page = p.finish();
                seen.extend(page.items.iter().copied());
                match page.next_cursor {
                    Some(c) => req.after = Some(decode_cursor("n", &c).unwrap()),
                    None => break,
                }
            }
            assert_eq!(seen, all);
        }
    }

    #[test]
    fn a_full_last_page_has_no_next_cursor() {
        let req = PageReq { limit: 3, after: None };
        let page = page_sorted("n", &req, vec![3u32, 1, 2], |n| key(*n));
        assert_eq!(page.items, vec![1, 2, 3]);
        assert_eq!(page.next_cursor, None);
    }
}
