//! The prompt token estimator: a pure count of how many tokens a text costs an agent's model,
//! without a tokenizer's vocabulary in the daemon (no model files: RSS and cold start matter,
//! issue 33). It walks the text the way a BPE pre-tokenizer splits it — words with their leading
//! space, digit groups, punctuation runs, whitespace runs, CJK characters — and charges each piece
//! what o200k-class vocabularies charge on average. Its error against `tiktoken-rs` o200k_base is
//! measured on a corpus of skill and design-system files by `tests/runs/prompt_tokens.rs` (the
//! bound it must stay within is [`crate::limits::PROMPT_ESTIMATOR_MAX_ERROR_PCT`]).

/// The estimator's name and version, recorded in `prompt_composed`: a change to how it counts is a
/// new version, so a recorded prompt says which count it was trimmed by.
pub const ESTIMATOR: &str = "od-est/1";

/// Letters a common word spends per token beyond its first (o200k holds most English words whole;
/// long and rare words split into pieces of about this many letters).
const LETTERS_PER_TOKEN: usize = 8;

/// How a character is charged.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// ASCII letters.
    Word,
    /// Letters outside ASCII that are not CJK (accented Latin, Cyrillic, Greek, …).
    Foreign,
    /// Han, kana, hangul: two tokens per three characters (o200k holds many two-character words
    /// whole, and splits rarer characters into bytes).
    Cjk,
    Digit,
    Space,
    Newline,
    Punct,
}

fn class(c: char) -> Class {
    match c {
        'a'..='z' | 'A'..='Z' => Class::Word,
        '0'..='9' => Class::Digit,
        '\n' | '\r' => Class::Newline,
        c if c.is_whitespace() => Class::Space,
        '\u{3040}'..='\u{30ff}'
        | '\u{3400}'..='\u{4dbf}'
        | '\u{4e00}'..='\u{9fff}'
        | '\u{ac00}'..='\u{d7af}'
        | '\u{3000}'..='\u{303f}'
        | '\u{ff00}'..='\u{ffef}' => Class::Cjk,
        c if c.is_alphabetic() => Class::Foreign,
        _ => Class::Punct,
    }
}

fn letters(k: Class) -> bool {
    matches!(k, Class::Word | Class::Foreign | Class::Cjk)
}

/// Estimated tokens of `text` (0 for the empty text). The pieces follow o200k's pre-tokenizer: a
/// word takes one leading non-letter (a space, `-`, `(`) and splits at a lower-to-upper case
/// change; digits go in threes; a punctuation run takes the newlines after it; whitespace holding
/// a newline is one piece, and a run of spaces gives its last one to the word after it.
pub fn estimate(text: &str) -> u64 {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let at = |i: usize| if i < n { Some(class(chars[i])) } else { None };
    let mut tokens = 0usize;
    let mut i = 0;
    while i < n {
        let k = class(chars[i]);
        // One non-letter, non-newline character before a letter belongs to the word.
        let prefixed = !letters(k) && !matches!(k, Class::Newline | Class::Digit) && at(i + 1).is_some_and(letters);
        let start = if prefixed { i + 1 } else { i };
        let k = if prefixed { class(chars[start]) } else { k };
        let mut j = start + 1;
        match k {
            Class::Word => {
                // Upper* lower+: a case change from lower to upper starts the next word.
                while j < n
                    && class(chars[j]) == Class::Word
                    && !(chars[j].is_ascii_uppercase() && chars[j - 1].is_ascii_lowercase())
                {
                    j += 1;
                }
                tokens += 1 + (j - start - 1) / LETTERS_PER_TOKEN;
            }
            Class::Foreign | Class::Cjk => {
                while j < n && class(chars[j]) == k {
                    j += 1;
                }
                tokens += match k {
                    Class::Cjk => (2 * (j - start)).div_ceil(3),
                    _ => (j - start).div_ceil(3),
                };
            }
            Class::Digit => {
                while j < n && class(chars[j]) == Class::Digit {
                    j += 1;
                }
                tokens += (j - start).div_ceil(3);
            }
            Class::Space | Class::Newline => {
                while j < n && matches!(class(chars[j]), Class::Space | Class::Newline) {
                    j += 1;
                }
                let has_newline = chars[start..j].iter().any(|c| class(*c) == Class::Newline);
                if has_newline {
                    // `\s*[\r\n]+`, then any spaces after the last newline as their own piece.
                    let last_nl =
                        start + chars[start..j].iter().rposition(|c| class(*c) == Class::Newline).unwrap_or(0);
                    tokens += 1 + usize::from(j - last_nl > 2);
                } else {
                    tokens += usize::from(j - start > 1 || at(j).is_none());
                }
                // The last space goes to the next piece.
                if j < n && j - start > 1 && class(chars[j - 1]) == Class::Space {
                    j -= 1;
                }
            }
            Class::Punct => {
                while j < n && class(chars[j]) == Class::Punct {
                    j += 1;
                }
                let run = j - start;
                while j < n && (class(chars[j]) == Class::Newline || chars[j] == '/') {
                    j += 1;
                }
                tokens += run.div_ceil(PUNCT_PER_TOKEN);
            }
        }
        i = j;
    }
    // The pieces above undercount long rare words a little: scaled by 21/20 (measured).
    (tokens as u64 * 21).div_ceil(20)
}

/// Punctuation characters per token in a run (`**`, `---`, `](` are single tokens in o200k).
const PUNCT_PER_TOKEN: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_texts_are_within_a_few_tokens_of_o200k() {
        let bpe = tiktoken_rs::o200k_base().unwrap();
        assert_eq!(estimate(""), 0);
        for text in
            ["hello world", "## Design system\n", "2026-12-07", "设计系统", "**Bold** `code`, (aside).\n\n- item\n"]
        {
            let real = bpe.encode_with_special_tokens(text).len() as u64;
            assert!(estimate(text).abs_diff(real) <= 2, "{text:?}: {} vs {real}", estimate(text));
        }
        // Appending never lowers the count (what the budget relies on when it adds parts).
        let a = "Use the brand colours, never gradients.\n";
        assert!(estimate(&format!("{a}{a}")) >= estimate(a));
    }
}
