//! SKILL.md frontmatter: finding the `---` block (UTF-8 BOM and CRLF safe) and parsing it as YAML
//! with `yaml_serde` (the YAML organisation's maintained serde_yaml fork) into a JSON object.
//! Pure; the YAML parser's own limits (recursion depth 128, alias jumps) apply, and a counting
//! pass first bounds the values the block expands to (aliases replay whole subtrees).

use serde_json::{Map, Number, Value};

use super::{MAX_FRONTMATTER_BYTES, MAX_FRONTMATTER_DEPTH};
use crate::limits::MAX_FRONTMATTER_NODES;

/// Why a frontmatter block cannot be used. Lines are 1-based lines of SKILL.md.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontmatterError {
    /// An opening `---` line without a closing one.
    #[error("frontmatter opened on line 1 is never closed by a `---` line")]
    Unterminated,
    /// The block is over [`MAX_FRONTMATTER_BYTES`].
    #[error("frontmatter is {0} bytes, over the {MAX_FRONTMATTER_BYTES}-byte limit")]
    TooLarge(usize),
    /// The YAML parser rejected the block.
    #[error("invalid YAML{}: {message}", .line.map(|l| format!(" at line {l}, column {}", .column)).unwrap_or_default())]
    Yaml {
        /// Line in SKILL.md, when the parser knows it.
        line: Option<usize>,
        /// Column on that line (1-based).
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The block parsed to something other than a mapping.
    #[error("frontmatter must be a YAML mapping, found {0}")]
    NotMapping(&'static str),
    /// `[`/`{` nest deeper than [`MAX_FRONTMATTER_DEPTH`] (brackets in quotes count too).
    #[error("frontmatter nests `[`/`{{` deeper than {MAX_FRONTMATTER_DEPTH} levels")]
    TooDeep,
    /// The block expands to more than [`MAX_FRONTMATTER_NODES`] values (through aliases).
    #[error("frontmatter expands to more than {MAX_FRONTMATTER_NODES} values (YAML aliases repeat their anchor)")]
    TooManyNodes,
    /// A mapping key that is itself a list or a mapping.
    #[error("frontmatter key at `{0}` is not a scalar")]
    ComplexKey(String),
}

/// A SKILL.md split into its frontmatter block (if any) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'a> {
    /// The YAML text between the `---` lines (line endings as in the file).
    pub yaml: Option<&'a str>,
    /// Everything after the closing `---` line (or the whole text without frontmatter).
    pub body: &'a str,
}

/// Finds the frontmatter: a first line that is `---` (after an optional BOM), up to the next line
/// that is `---`. Trailing spaces and `\r` on the delimiter lines are ignored.
pub fn split(text: &str) -> Result<Split<'_>, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let Some(first) = lines.next() else { return Ok(Split { yaml: None, body: text }) };
    if !is_delimiter(first) || !first.ends_with('\n') {
        return Ok(Split { yaml: None, body: text });
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        if is_delimiter(line) {
            return Ok(Split { yaml: Some(&text[start..offset]), body: &text[offset + line.len()..] });
        }
        offset += line.len();
    }
    Err(FrontmatterError::Unterminated)
}

fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches(['\n', '\r', ' ', '\t']) == "---"
}

/// Parses a frontmatter block into a JSON object (an empty block is an empty object). Keys that
/// are numbers or booleans become strings; tags are dropped; non-finite floats become strings.
pub fn parse(yaml: &str) -> Result<Map<String, Value>, FrontmatterError> {
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Err(FrontmatterError::TooLarge(yaml.len()));
    }
    if flow_depth(yaml) > MAX_FRONTMATTER_DEPTH {
        return Err(FrontmatterError::TooDeep);
    }
    let normalized = yaml.replace("\r\n", "\n").replace('\r', "\n");
    // The parser is libyaml transpiled to Rust; a panic in it must not take the daemon down.
    if std::panic::catch_unwind(|| expands_past_limit(&normalized)).unwrap_or(false) {
        return Err(FrontmatterError::TooManyNodes);
    }
    let parsed = std::panic::catch_unwind(|| yaml_serde::from_str::<yaml_serde::Value>(&normalized));
    let value = match parsed {
        Ok(Ok(value)) => value,
        Ok(Err(err)) => {
            let location = err.location();
            return Err(FrontmatterError::Yaml {
                // +1: SKILL.md line 1 is the opening `---`.
                line: location.as_ref().map(|l| l.line() + 1),
                column: location.as_ref().map_or(0, |l| l.column()),
                message: first_line(&err.to_string()),
            });
        }
        Err(_) => {
            return Err(FrontmatterError::Yaml { line: None, column: 0, message: "the YAML parser failed".into() })
        }
    };
    match to_json(value, "")? {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        Value::Array(_) => Err(FrontmatterError::NotMapping("a list")),
        Value::String(_) => Err(FrontmatterError::NotMapping("a string")),
        Value::Number(_) => Err(FrontmatterError::NotMapping("a number")),
        Value::Bool(_) => Err(FrontmatterError::NotMapping("a boolean")),
    }
}

/// Whether the block expands to more than [`MAX_FRONTMATTER_NODES`] values. Counts without
/// building anything and stops at the limit: `a: &a [1, …]` and `b: [*a, *a, …]` of 13,000 items
/// each fit in 64 KiB and would expand to 169 million values (gigabytes). Any other problem is
/// left to the real parse to report.
fn expands_past_limit(yaml: &str) -> bool {
    use serde::de::DeserializeSeed;
    let mut n = 0;
    let _ = Count(&mut n).deserialize(yaml_serde::Deserializer::from_str(yaml));
    n > MAX_FRONTMATTER_NODES
}

/// A visitor that counts values and fails once past the limit.
struct Count<'a>(&'a mut usize);

impl Count<'_> {
    fn bump<E: serde::de::Error>(&mut self) -> Result<(), E> {
        *self.0 += 1;
        match *self.0 > MAX_FRONTMATTER_NODES {
            true => Err(E::custom("too many values")),
            false => Ok(()),
        }
    }
    fn again(&mut self) -> Count<'_> {
        Count(&mut *self.0)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Count<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Count<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: serde::de::Error>(mut self, _: bool) -> Result<(), E> {
        self.bump()
    }
    fn visit_i64<E: serde::de::Error>(mut self, _: i64) -> Result<(), E> {
        self.bump()
    }
    fn visit_u64<E: serde::de::Error>(mut self, _: u64) -> Result<(), E> {
        self.bump()
    }
    fn visit_i128<E: serde::de::Error>(mut self, _: i128) -> Result<(), E> {
        self.bump()
    }
    fn visit_u128<E: serde::de::Error>(mut self, _: u128) -> Result<(), E> {
        self.bump()
    }
    fn visit_f64<E: serde::de::Error>(mut self, _: f64) -> Result<(), E> {
        self.bump()
    }
    fn visit_str<E: serde::de::Error>(mut self, _: &str) -> Result<(), E> {
        self.bump()
    }
    fn visit_bytes<E: serde::de::Error>(mut self, _: &[u8]) -> Result<(), E> {
        self.bump()
    }
    fn visit_unit<E: serde::de::Error>(mut self) -> Result<(), E> {
        self.bump()
    }
    fn visit_none<E: serde::de::Error>(mut self) -> Result<(), E> {
        self.bump()
    }
    fn visit_some<D: serde::Deserializer<'de>>(mut self, d: D) -> Result<(), D::Error> {
        self.bump()?;
        d.deserialize_any(self)
    }
    fn visit_newtype_struct<D: serde::Deserializer<'de>>(mut self, d: D) -> Result<(), D::Error> {
        self.bump()?;
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut a: A) -> Result<(), A::Error> {
        self.bump()?;
        while a.next_element_seed(self.again())?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut a: A) -> Result<(), A::Error> {
        self.bump()?;
        while a.next_key_seed(self.again())?.is_some() {
            a.next_value_seed(self.again())?;
        }
        Ok(())
    }
    /// A tagged value (`!tag value`): the tag, then the value.
    fn visit_enum<A: serde::de::EnumAccess<'de>>(mut self, a: A) -> Result<(), A::Error> {
        use serde::de::VariantAccess;
        self.bump()?;
        let ((), value) = a.variant_seed(self.again())?;
        value.newtype_variant_seed(self)
    }
}

/// The deepest `[`/`{` nesting, counting every bracket (a conservative bound for the parser).
fn flow_depth(yaml: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for b in yaml.bytes() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The parser's message without its own position (it counts lines from the block, not the file).
fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default();
    line.split(" at line ").next().unwrap_or(line).to_string()
}

/// Converts a YAML value; `path` is the YAML key path for messages. Depth is bounded by the
/// parser's recursion limit.
fn to_json(value: yaml_serde::Value, path: &str) -> Result<Value, FrontmatterError> {
    use yaml_serde::Value as Y;
    Ok(match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => number(&n),
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| to_json(v, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Y::Mapping(mapping) => {
            let mut map = Map::new();
            for (k, v) in mapping {
                let key = match k {
                    Y::String(s) => s,
                    Y::Bool(b) => b.to_string(),
                    Y::Number(n) => n.to_string(),
                    Y::Null => "null".to_string(),
                    Y::Tagged(_) | Y::Sequence(_) | Y::Mapping(_) => {
                        return Err(FrontmatterError::ComplexKey(if path.is_empty() {
                            ".".into()
                        } else {
                            path.into()
                        }))
                    }
                };
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                let v = to_json(v, &child)?;
                map.insert(key, v);
            }
            Value::Object(map)
        }
        Y::Tagged(tagged) => to_json(tagged.value, path)?,
    })
}

fn number(n: &yaml_serde::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::Number(i.into())
    } else if let Some(u) = n.as_u64() {
        Value::Number(u.into())
    } else {
        n.as_f64().and_then(Number::from_f64).map_or_else(|| Value::String(n.to_string()), Value::Number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lf_crlf_and_bom_identically() {
        let lf = "---\nname: a\nod:\n  mode: deck\n---\n# Body\n";
        let crlf = lf.replace('\n', "\r\n");
        let bom = format!("\u{feff}{crlf}");
        for text in [lf.to_string(), crlf, bom] {
            let split = split(&text).unwrap();
            let map = parse(split.yaml.unwrap()).unwrap();
            assert_eq!(map["name"], "a");
            assert_eq!(map["od"]["mode"], "deck");
            assert!(split.body.starts_with("# Body"));
        }
    }

    #[test]
    fn no_frontmatter_and_unterminated() {
        assert_eq!(split("# Title\n").unwrap().yaml, None);
        assert_eq!(split("---").unwrap().yaml, None);
        assert_eq!(split("---\nname: a\n"), Err(FrontmatterError::Unterminated));
        assert_eq!(parse("").unwrap().len(), 0);
    }

    #[test]
    fn errors_name_the_skill_md_line() {
        let text = "---\nname: a\ndescription: x: y\n---\n";
        let err = parse(split(text).unwrap().yaml.unwrap()).unwrap_err();
        match err {
            FrontmatterError::Yaml { line, .. } => assert_eq!(line, Some(3)),
            other => panic!("{other}"),
        }
        assert!(matches!(parse("- a\n- b\n"), Err(FrontmatterError::NotMapping("a list"))));
        assert!(matches!(parse("? [a]\n: b\n"), Err(FrontmatterError::ComplexKey(_))));
        assert_eq!(parse("1: x\ntrue: y\nf: .inf\n").unwrap()["f"], ".inf");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        assert_eq!(parse(&format!("a: {}", "[".repeat(60_000))), Err(FrontmatterError::TooDeep));
        assert!(parse(&"[a, ".repeat(15_000)).is_err());
        assert!(parse(&"- ".repeat(30_000)).is_err());
        assert!(parse(&format!("a: {}", "[".repeat(MAX_FRONTMATTER_DEPTH))).is_err());
    }

    #[test]
    fn an_anchor_repeated_by_aliases_is_refused_before_it_expands() {
        // 5 KB of YAML, a million values once expanded: the alias-jump limit does not see it.
        let (items, aliases) = (vec!["1"; 1000].join(","), vec!["*a"; 1000].join(","));
        let yaml = format!("a: &a [{items}]\nb: [{aliases}]\n");
        assert_eq!(parse(&yaml), Err(FrontmatterError::TooManyNodes));
        let tagged = format!("a: &a [{items}]\nb: !t [{aliases}]\n");
        assert_eq!(parse(&tagged), Err(FrontmatterError::TooManyNodes));
        let few = parse("a: &a [1, 2]\nb: [*a, *a]\nc: !tag [*a]\n").unwrap();
        assert_eq!(few["b"], serde_json::json!([[1, 2], [1, 2]]));
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut yaml = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = (b'a' + i - 1) as char;
            let cur = (b'a' + i) as char;
            yaml.push_str(&format!("{cur}: &{cur} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        assert!(parse(&yaml).is_err());
    }
}
