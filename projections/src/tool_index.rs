//! `tool_index`: the in-memory inverted index the tool catalog searches with — keyword ranking
//! (BM25 over weighted fields: the name, the description, and the parameter names and
//! descriptions) kept up to date one registration or removal at a time, so a query touches only
//! the posting lists of its own terms and never rescans the catalog. Derived data: it is rebuilt
//! from the catalog when a checkpoint is loaded and never serialised.

use std::collections::HashMap;

/// Weight of a term occurrence in the tool's name.
const NAME_WEIGHT: f32 = 3.0;
/// Weight of a term occurrence in the description.
const DESCRIPTION_WEIGHT: f32 = 1.0;
/// Weight of a term occurrence in a parameter name or description.
const KEYWORD_WEIGHT: f32 = 0.5;
/// BM25 term-frequency saturation.
const K1: f32 = 1.2;
/// BM25 length normalisation.
const B: f32 = 0.75;
/// Tombstoned documents tolerated (beyond the live count) before posting lists are compacted.
const COMPACT_AFTER: usize = 1024;

/// Words too common to say anything about which tool is meant.
const STOPWORDS: &[&str] = &[
    "a", "about", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "by", "can", "could", "did",
    "do", "does", "e", "eg", "etc", "for", "from", "g", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it",
    "its", "me", "my", "of", "on", "or", "our", "please", "she", "should", "so", "some", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "to", "was", "we", "were", "what", "when",
    "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// Which surfaces a search covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceFilter {
    Api,
    Browser,
    All,
}

impl SurfaceFilter {
    fn admits(self, api: bool) -> bool {
        match self {
            SurfaceFilter::Api => api,
            SurfaceFilter::Browser => !api,
            SurfaceFilter::All => true,
        }
    }
}

#[derive(Debug, Clone)]
struct Doc {
    name: String,
    api: bool,
    len: f32,
    terms: Vec<u32>,
}

/// Per-document flags kept apart from [`Doc`] so a query's posting walk touches 8 bytes per doc.
const LIVE: u8 = 1;
const API: u8 = 2;

std::thread_local! {
    /// Score accumulator reused across queries on a thread (only touched slots are reset).
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: f32,
    /// The doc's weighted length, here so a posting walk reads memory in order.
    len: f32,
}

/// The inverted index.
#[derive(Clone, Default)]
pub struct ToolIndex {
    docs: Vec<Doc>,
    /// `len` and `LIVE | API` flags of each doc, in doc order.
    hot: Vec<(f32, u8)>,
    by_name: HashMap<String, u32>,
    terms: HashMap<String, u32>,
    postings: Vec<Vec<Posting>>,
    /// Live documents containing each term.
    df: Vec<u32>,
    live: usize,
    live_api: usize,
    total_len: f64,
}

impl std::fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ToolIndex {{ live: {}, docs: {}, terms: {} }}", self.live, self.docs.len(), self.terms.len())
    }
}

/// One page of ranked names and how many tools matched in all.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked<'a> {
    pub hits: Vec<(&'a str, f32)>,
    pub total: usize,
}

/// Light suffix stemming so `calculate`, `calculating` and `calculated` meet.
fn stem(w: &str) -> String {
    let mut s = w.to_string();
    if s.len() > 4 && s.ends_with("ies") {
        s.truncate(s.len() - 3);
        s.push('y');
    } else if s.ends_with("sses") {
        s.truncate(s.len() - 2);
    } else if s.len() > 3 && s.ends_with('s') && !(s.ends_with("ss") || s.ends_with("us") || s.ends_with("is")) {
        s.pop();
    }
    if s.len() > 5 && s.ends_with("ing") {
        s.truncate(s.len() - 3);
    } else if s.len() > 4 && s.ends_with("ed") {
        s.truncate(s.len() - 2);
    } else if s.len() > 5 && s.ends_with("tion") {
        // `calculation` → `calculat`, like `calculate` and `calculated` below.
        s.truncate(s.len() - 3);
    }
    if s.len() > 4 && s.ends_with('e') {
        s.pop();
    }
    s
}

/// Splits text into search terms: runs of letters and digits, also split at camelCase and
/// letter/digit boundaries, lowercased, stopwords dropped, stemmed.
pub fn terms(text: &str, out: &mut Vec<String>) {
    let mut word = String::new();
    let mut prev: Option<char> = None;
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            let w = word.to_lowercase();
            // Single characters and bare numbers (units, "3 sides", "E.g. $10") name no tool.
            let noise = w.chars().count() < 2 || w.chars().all(|c| c.is_ascii_digit());
            if !noise && !STOPWORDS.contains(&w.as_str()) {
                out.push(stem(&w));
            }
            word.clear();
        }
    };
    for c in text.chars() {
        if !c.is_alphanumeric() {
            flush(&mut word, out);
            prev = None;
            continue;
        }
        if let Some(p) = prev {
            let camel = p.is_lowercase() && c.is_uppercase();
            let digit_edge = p.is_ascii_digit() != c.is_ascii_digit();
            if camel || digit_edge {
                flush(&mut word, out);
            }
        }
        word.push(c);
        prev = Some(c);
    }
    flush(&mut word, out);
}

impl ToolIndex {
    /// Live tools indexed.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Live tools of the surfaces `filter` admits.
    pub fn count(&self, filter: SurfaceFilter) -> usize {
        match filter {
            SurfaceFilter::Api => self.live_api,
            SurfaceFilter::Browser => self.live - self.live_api,
            SurfaceFilter::All => self.live,
        }
    }

    fn term_id(&mut self, t: String) -> u32 {
        if let Some(&id) = self.terms.get(&t) {
            return id;
        }
        let id = self.postings.len() as u32;
        self.terms.insert(t, id);
        self.postings.push(Vec::new());
        self.df.push(0);
        id
    }

    /// Adds or replaces a tool.
    pub fn upsert(&mut self, name: &str, api: bool, description: &str, keywords: &str) {
        self.remove(name);
        let mut weights: HashMap<String, f32> = HashMap::new();
        let mut buf = Vec::new();
        for (text, w) in [(name, NAME_WEIGHT), (description, DESCRIPTION_WEIGHT), (keywords, KEYWORD_WEIGHT)] {
            buf.clear();
            terms(text, &mut buf);
            for t in buf.drain(..) {
                *weights.entry(t).or_default() += w;
            }
        }
        let doc = self.docs.len() as u32;
        let len: f32 = weights.values().sum();
        let mut ids = Vec::with_capacity(weights.len());
        for (t, tf) in weights {
            let id = self.term_id(t);
            self.postings[id as usize].push(Posting { doc, tf, len });
            self.df[id as usize] += 1;
            ids.push(id);
        }
        self.docs.push(Doc { name: name.to_string(), api, len, terms: ids });
        self.hot.push((len, LIVE | if api { API } else { 0 }));
        self.by_name.insert(name.to_string(), doc);
        self.live += 1;
        self.live_api += usize::from(api);
        self.total_len += f64::from(len);
    }

    /// Removes a tool (a tombstone until the next compaction).
    pub fn remove(&mut self, name: &str) {
        let Some(doc) = self.by_name.remove(name) else { return };
        let d = &self.docs[doc as usize];
        self.hot[doc as usize].1 &= !LIVE;
        for &t in &d.terms {
            self.df[t as usize] -= 1;
        }
        self.live -= 1;
        self.live_api -= usize::from(d.api);
        self.total_len -= f64::from(d.len);
        if self.docs.len() - self.live > COMPACT_AFTER.max(self.live) {
            self.compact();
        }
    }

    /// Drops tombstoned documents and renumbers the rest.
    fn compact(&mut self) {
        let mut renumber = vec![u32::MAX; self.docs.len()];
        let mut docs = Vec::with_capacity(self.live);
        let mut hot = Vec::with_capacity(self.live);
        for (old, d) in std::mem::take(&mut self.docs).into_iter().enumerate() {
            if self.hot[old].1 & LIVE != 0 {
                renumber[old] = docs.len() as u32;
                hot.push(self.hot[old]);
                docs.push(d);
            }
        }
        self.hot = hot;
        for list in &mut self.postings {
            list.retain(|p| renumber[p.doc as usize] != u32::MAX);
            for p in list.iter_mut() {
                p.doc = renumber[p.doc as usize];
            }
        }
        for (i, d) in docs.iter().enumerate() {
            self.by_name.insert(d.name.clone(), i as u32);
        }
        self.docs = docs;
    }

    /// Ranks the tools matching `query` (any of its terms) and returns `limit` of them from
    /// `offset`, best first (ties by name), with how many matched in all.
    pub fn search(&self, query: &str, filter: SurfaceFilter, offset: usize, limit: usize) -> Ranked<'_> {
        let mut q = Vec::new();
        terms(query, &mut q);
        q.sort();
        q.dedup();
        SCRATCH.with(|cell| {
            let mut scores = cell.borrow_mut();
            if scores.len() < self.docs.len() {
                scores.resize(self.docs.len(), 0.0);
            }
            self.rank(&q, filter, offset, limit, &mut scores)
        })
    }

    fn rank(&self, q: &[String], filter: SurfaceFilter, offset: usize, limit: usize, scores: &mut [f32]) -> Ranked<'_> {
        let n = self.live.max(1) as f32;
        let avg = (self.total_len / self.live.max(1) as f64) as f32;
        let (base, per_len) = (K1 * (1.0 - B), K1 * B / avg.max(f32::EPSILON));
        let mut touched: Vec<u32> = Vec::new();
        for t in q {
            let Some(&tid) = self.terms.get(t) else { continue };
            let df = self.df[tid as usize] as f32;
            if df == 0.0 {
                continue;
            }
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            // Tombstones and other surfaces are dropped after the walk: it then reads only the
            // posting list in order and one score slot per posting.
            for p in &self.postings[tid as usize] {
                let s = idf * p.tf * (K1 + 1.0) / (p.tf + base + per_len * p.len);
                let slot = &mut scores[p.doc as usize];
                if *slot == 0.0 {
                    touched.push(p.doc);
                }
                *slot += s;
            }
        }
        // One pass over the touched slots: keep the admitted (live, of the surface), reset all.
        let mut pairs: Vec<(f32, u32)> = Vec::with_capacity(touched.len());
        for d in touched {
            let score = std::mem::take(&mut scores[d as usize]);
            let flags = self.hot[d as usize].1;
            if flags & LIVE != 0 && filter.admits(flags & API != 0) {
                pairs.push((score, d));
            }
        }
        let total = pairs.len();
        let want = offset.saturating_add(limit).min(total);
        if want == 0 {
            return Ranked { hits: Vec::new(), total };
        }
        if want < total {
            // Select by score alone (no name lookups in the hot path), then keep every tie at the
            // cut so the final order by name is exact.
            pairs.select_nth_unstable_by(want - 1, |a, b| b.0.total_cmp(&a.0));
            let cut = pairs[want - 1].0;
            let mut top: Vec<(f32, u32)> = pairs[..want].iter().copied().filter(|p| p.0 > cut).collect();
            top.extend(pairs.iter().copied().filter(|p| p.0 == cut));
            pairs = top;
        }
        let name = |d: u32| self.docs[d as usize].name.as_str();
        pairs.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then_with(|| name(a.1).cmp(name(b.1))));
        pairs.truncate(want);
        let hits = pairs.into_iter().skip(offset).map(|(score, d)| (name(d), score)).collect();
        Ranked { hits, total }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Vec<String> {
        let mut v = Vec::new();
        terms(s, &mut v);
        v
    }

    #[test]
    fn terms_split_camel_snake_and_dots_and_stem() {
        assert_eq!(t("math.triangle_area_heron"), ["math", "triangl", "area", "heron"]);
        assert_eq!(t("EuclideanDistance.calculate"), ["euclidean", "distanc", "calculat"]);
        assert_eq!(t("What is the capital of Brazil?"), ["capital", "brazil"]);
        assert_eq!(t("calculating calculated calculation"), ["calculat", "calculat", "calculat"]);
    }

    #[test]
    fn ranks_by_name_then_description_and_pages() {
        let mut ix = ToolIndex::default();
        ix.upsert("geo.capital", true, "The capital city of a country.", "country: the country name");
        ix.upsert("math.area", true, "Area of a triangle from its sides.", "sides");
        ix.upsert("ui.go", false, "Navigate to a page of the capital app.", "");
        let r = ix.search("capital of Brazil", SurfaceFilter::Api, 0, 10);
        assert_eq!(r.total, 1);
        assert_eq!(r.hits[0].0, "geo.capital");
        let r = ix.search("capital", SurfaceFilter::All, 0, 1);
        assert_eq!((r.total, r.hits.len(), r.hits[0].0), (2, 1, "geo.capital"));
        let r2 = ix.search("capital", SurfaceFilter::All, 1, 1);
        assert_eq!(r2.hits[0].0, "ui.go");
        assert!(ix.search("zzz", SurfaceFilter::All, 0, 5).hits.is_empty());
    }

    #[test]
    fn removal_and_replacement_are_seen_and_compaction_keeps_results() {
        let mut ix = ToolIndex::default();
        for i in 0..3000 {
            ix.upsert(&format!("ns.tool{i}"), true, &format!("does thing number {i} with widgets"), "");
        }
        for i in 0..2900 {
            ix.remove(&format!("ns.tool{i}"));
        }
        assert_eq!(ix.len(), 100);
        assert!(ix.docs.len() < 3000, "compacted");
        ix.upsert("ns.tool2950", true, "now about gadgets", "");
        let r = ix.search("widgets", SurfaceFilter::Api, 0, 1000);
        assert_eq!(r.total, 99);
        assert!(r.hits.iter().all(|(n, _)| *n != "ns.tool2950"));
        assert_eq!(ix.search("gadgets", SurfaceFilter::Api, 0, 5).hits[0].0, "ns.tool2950");
        assert_eq!(ix.count(SurfaceFilter::Api), 100);
    }
}
