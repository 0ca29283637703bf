//! Text trimming for the prompt budget: a design system's `##` sections (pruning by the `sections`
//! hint) and a tail cut at a line boundary. Pure string work; what to trim when is `stack`'s.

/// Splits markdown into its preamble (before the first `## ` line) and its level-2 sections, each
/// with its heading line; deeper headings stay inside their section. Concatenated, the parts give
/// back the text.
pub fn split_sections(text: &str) -> (String, Vec<(String, String)>) {
    let mut pre = String::new();
    let mut sections: Vec<(String, String)> = Vec::new();
    let mut fence = false;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        if !fence && line.starts_with("## ") {
            sections.push((line[3..].trim().to_string(), line.to_string()));
            continue;
        }
        match sections.last_mut() {
            Some((_, body)) => body.push_str(line),
            None => pre.push_str(line),
        }
    }
    (pre, sections)
}

/// Whether a section heading is one the hint names (case-insensitive; a hint names a heading it
/// starts: `Color` keeps `## Colors and tokens`).
fn named(heading: &str, hint: &[String]) -> bool {
    let h = heading.to_lowercase();
    hint.iter().any(|n| {
        let n = n.trim().trim_start_matches('#').trim().to_lowercase();
        !n.is_empty() && h.starts_with(&n)
    })
}

/// The text with only the preamble and the `##` sections the hint names. None when the hint is
/// empty or keeps everything (nothing to prune).
pub fn prune_to_hint(text: &str, hint: &[String]) -> Option<String> {
    if hint.is_empty() {
        return None;
    }
    let (pre, sections) = split_sections(text);
    if sections.iter().all(|(h, _)| named(h, hint)) {
        return None;
    }
    let mut out = pre;
    for (h, body) in &sections {
        if named(h, hint) {
            out.push_str(body);
        }
    }
    Some(out)
}

/// The longest prefix of `text` made of whole lines for which `fits` holds (`fits` must be
/// monotone: a prefix of a fitting prefix fits). None when not even the first line fits.
pub fn truncate_lines(text: &str, fits: impl Fn(&str) -> bool) -> Option<String> {
    let ends: Vec<usize> = text.match_indices('\n').map(|(i, _)| i + 1).chain(std::iter::once(text.len())).collect();
    let (mut lo, mut hi) = (0usize, ends.len());
    // Invariant: the prefix of `lo` lines fits (0 lines trivially), `hi` lines is the most to try.
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(&text[..ends[mid - 1]]) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    (lo > 0).then(|| text[..ends[lo - 1]].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DS: &str = "# Brand\nIntro.\n## Colors\nred\n```\n## not a heading\n```\n## Type\nInter\n## Motion\nslow\n";

    #[test]
    fn sections_split_at_level_two_outside_fences_and_join_back() {
        let (pre, s) = split_sections(DS);
        assert_eq!(pre, "# Brand\nIntro.\n");
        assert_eq!(s.iter().map(|(h, _)| h.as_str()).collect::<Vec<_>>(), ["Colors", "Type", "Motion"]);
        let joined: String = std::iter::once(pre).chain(s.into_iter().map(|(_, b)| b)).collect();
        assert_eq!(joined, DS);
    }

    #[test]
    fn pruning_keeps_the_preamble_and_the_named_sections_only() {
        let kept = prune_to_hint(DS, &["colors".into(), "## Motion".into()]).unwrap();
        assert_eq!(kept, "# Brand\nIntro.\n## Colors\nred\n```\n## not a heading\n```\n## Motion\nslow\n");
        assert_eq!(prune_to_hint(DS, &[]), None);
        assert_eq!(prune_to_hint(DS, &["Col".into(), "Type".into(), "Motion".into()]), None);
    }

    #[test]
    fn truncation_cuts_at_a_line_boundary() {
        let t = truncate_lines("aa\nbb\ncc\n", |p| p.len() <= 7).unwrap();
        assert_eq!(t, "aa\nbb\n");
        assert_eq!(truncate_lines("aaaa\nb\n", |p| p.len() <= 2), None);
        assert_eq!(truncate_lines("aa\nbb", |_| true).unwrap(), "aa\nbb");
    }
}
