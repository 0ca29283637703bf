//! Mutators: byte-level havoc (bit flips, interesting integers, splices, dictionary tokens, cut and
//! repeated ranges), JSON-aware edits (a random node replaced, removed, duplicated or nested), and
//! line-aware edits for ND-JSON. Every mutator keeps inputs under `MAX_LEN` bytes.

use super::harness::Rng;
use serde_json::{json, Map, Value};

/// Largest input a mutation produces (parsers' own limits are far above this for most targets;
/// the targets that need bigger inputs build them on purpose).
pub const MAX_LEN: usize = 64 * 1024;

/// Tokens worth inserting into text inputs: structure of JSON, YAML, the `until` grammar, HTTP.
pub const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "\n",
    "\r\n",
    "\0",
    "\\",
    "\\u0000",
    "\\ud800",
    "---\n",
    "- ",
    ": ",
    "&a",
    "*a",
    "!!binary",
    "|",
    ">",
    "#",
    "'",
    "~",
    "null",
    "true",
    "false",
    "-0",
    "1e999",
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967295",
    "65536",
    "NaN",
    "0x10",
    "&&",
    "||",
    "(",
    ")",
    ">=",
    "<=",
    "==",
    "!=",
    "iterations",
    "critique.score",
    "build.passing",
    "é",
    "\u{202e}",
    "%00",
    "%ff",
    "..",
    "/",
    "?",
    "&",
    "=",
    "after=",
    "cursor=",
    "limit=",
    "$ref",
    "#/",
    "anyOf",
    "oneOf",
];

const INTERESTING: &[u64] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    i64::MAX as u64,
    u64::MAX,
    u64::MAX - 1,
];

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "255",
    "65535",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "1e308",
    "1e309",
    "0.5",
    "-0",
    "00",
    "1_000",
];

/// One to four stacked byte-level mutations of `input`.
pub fn havoc(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        byte_mutation(rng, &mut b, pool);
    }
    b.truncate(MAX_LEN);
    b
}

fn byte_mutation(rng: &mut Rng, b: &mut Vec<u8>, pool: &[Vec<u8>]) {
    let len = b.len();
    let at = rng.below(len + 1);
    match rng.below(12) {
        0 if len > 0 => b[at.min(len - 1)] ^= 1 << rng.below(8),
        1 if len > 0 => b[at.min(len - 1)] = *rng.pick(&[0u8, 0x7f, 0x80, 0xff, b'"', b'{', b'\n', b'0', b'9']),
        2 => {
            let width = *rng.pick(&[2usize, 4, 8]);
            if len >= width {
                let at = rng.below(len - width + 1);
                let v = *rng.pick(INTERESTING) ^ if rng.one_in(4) { rng.below(16) as u64 } else { 0 };
                b[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
            }
        }
        3 if len > 0 => {
            let n = 1 + rng.below((len / 4).max(1));
            let from = rng.below(len - n.min(len) + 1);
            b.drain(from..(from + n).min(len));
        }
        4 if len > 0 => {
            let n = 1 + rng.below(len.min(256));
            let from = rng.below(len - n + 1);
            let chunk = b[from..from + n].to_vec();
            b.splice(at..at, chunk);
        }
        5 => {
            let bytes: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next() as u8).collect();
            b.splice(at..at, bytes);
        }
        6 => {
            let t = rng.pick(TOKENS).as_bytes().to_vec();
            b.splice(at..at, t);
        }
        7 => digits(rng, b),
        8 if !pool.is_empty() => {
            let other = rng.pick(pool);
            let from = rng.below(other.len() + 1);
            b.truncate(at);
            b.extend_from_slice(&other[from..]);
        }
        9 => b.truncate(at),
        10 if len > 0 => {
            let n = 1 + rng.below(len.min(64));
            let from = rng.below(len - n + 1);
            let chunk = b[from..from + n].to_vec();
            for _ in 0..rng.below(64) {
                b.splice(from..from, chunk.iter().copied());
            }
        }
        _ => {
            let t = rng.pick(TOKENS).as_bytes();
            let end = (at + t.len()).min(len);
            b.splice(at..end, t.iter().copied());
        }
    }
}

/// Replaces a run of ASCII digits with an interesting number.
pub fn digits(rng: &mut Rng, b: &mut Vec<u8>) {
    let starts: Vec<usize> =
        (0..b.len()).filter(|&i| b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit())).collect();
    if starts.is_empty() {
        return;
    }
    let s = *rng.pick(&starts);
    let e = (s..b.len()).find(|&i| !b[i].is_ascii_digit()).unwrap_or(b.len());
    b.splice(s..e, rng.pick(NUMBERS).bytes());
}

// ---- JSON -------------------------------------------------------------------------------------------

/// A JSON-aware mutation when `input` is JSON (three times in four), else [`havoc`].
pub fn json_or_havoc(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(input) {
        Ok(mut v) if !rng.one_in(4) => {
            for _ in 0..1 + rng.below(3) {
                mutate_value(rng, &mut v, pool);
            }
            let mut out = if rng.one_in(2) { serde_json::to_vec(&v) } else { serde_json::to_vec_pretty(&v) }.unwrap();
            out.truncate(MAX_LEN);
            out
        }
        _ => havoc(rng, input, pool),
    }
}

/// An interesting number as JSON (a string when JSON has no such number, e.g. `1e309`).
fn number(rng: &mut Rng) -> Value {
    let text = *rng.pick::<&str>(NUMBERS);
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

/// A random JSON value, small, with the shapes parsers trip on.
pub fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 3 { 7 } else { 10 }) {
        0 => Value::Null,
        1 => json!(rng.one_in(2)),
        2 => json!(rng.next() as i64 >> rng.below(64)),
        3 => number(rng),
        4 => json!(rng.pick(TOKENS)),
        5 => json!("x".repeat(rng.below(300))),
        6 => json!(rng.pick(&["", "a", "text", "system", "assistant", "user", "result", "init", "tool_use"])),
        7 => Value::Array((0..rng.below(4)).map(|_| random_value(rng, depth + 1)).collect()),
        8 => {
            let mut m = Map::new();
            for _ in 0..rng.below(4) {
                m.insert(rng.pick(TOKENS).to_string(), random_value(rng, depth + 1));
            }
            Value::Object(m)
        }
        _ => {
            let mut v = random_value(rng, depth + 1);
            for _ in 0..rng.below(40) {
                v = json!([v]);
            }
            v
        }
    }
}

/// Every node's path (keys and indexes) in `v`, parents before children.
fn paths(v: &Value, at: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    out.push(at.clone());
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(PathStep::Index(i));
                paths(item, at, out);
                at.pop();
            }
        }
        Value::Object(m) => {
            for (k, item) in m {
                at.push(PathStep::Key(k.clone()));
                paths(item, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone)]
enum PathStep {
    Index(usize),
    Key(String),
}

fn node<'a>(v: &'a mut Value, path: &[PathStep]) -> &'a mut Value {
    path.iter().fold(v, |v, step| match step {
        PathStep::Index(i) => &mut v[*i],
        PathStep::Key(k) => &mut v[k.as_str()],
    })
}

/// Changes one node of `v`: replaced by a random value or one from another input, a key removed or
/// renamed, an array item duplicated, a string or number edited, the node wrapped in nesting.
pub fn mutate_value(rng: &mut Rng, v: &mut Value, pool: &[Vec<u8>]) {
    let mut all = Vec::new();
    paths(v, &mut Vec::new(), &mut all);
    let path = rng.pick(&all).clone();
    let n = node(v, &path);
    match rng.below(8) {
        0 => *n = random_value(rng, 0),
        1 if !pool.is_empty() => {
            let donor = rng.pick(pool);
            if let Ok(d) = serde_json::from_slice::<Value>(donor) {
                let mut ps = Vec::new();
                paths(&d, &mut Vec::new(), &mut ps);
                let mut d = d;
                let p = rng.pick(&ps).clone();
                *n = node(&mut d, &p).take();
            }
        }
        2 => match n {
            Value::Object(m) if !m.is_empty() => {
                let k = m.keys().nth(rng.below(m.len())).cloned().unwrap();
                let item = m.remove(&k).unwrap();
                if rng.one_in(2) {
                    m.insert(format!("{k}{}", rng.pick(TOKENS)), item);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                let i = rng.below(a.len());
                a.remove(i);
            }
            _ => *n = Value::Null,
        },
        3 => match n {
            Value::Array(a) if !a.is_empty() => {
                let i = rng.below(a.len());
                let item = a[i].clone();
                for _ in 0..1 + rng.below(20) {
                    a.push(item.clone());
                }
            }
            Value::Object(m) => {
                m.insert(rng.pick(TOKENS).to_string(), random_value(rng, 0));
            }
            _ => *n = json!([n.take()]),
        },
        4 => {
            if let Value::String(s) = n {
                let edited = havoc(rng, s.as_bytes(), &[]);
                *s = String::from_utf8_lossy(&edited).into_owned();
            } else {
                *n = random_value(rng, 0);
            }
        }
        5 => *n = number(rng),
        6 => {
            let mut wrapped = n.take();
            for _ in 0..1 + rng.below(8) {
                wrapped = if rng.one_in(2) { json!([wrapped]) } else { json!({ "x": wrapped }) };
            }
            *n = wrapped;
        }
        _ => *n = json!(rng.pick(TOKENS)),
    }
}

// ---- lines ------------------------------------------------------------------------------------------

/// For ND-JSON: mutates one line (JSON-aware when it is JSON), or drops, duplicates or swaps lines.
pub fn lines(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    let mut ls: Vec<Vec<u8>> = input.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    for _ in 0..1 + rng.below(3) {
        let i = rng.below(ls.len());
        match rng.below(6) {
            0 if ls.len() > 1 => {
                ls.remove(i);
            }
            1 => {
                let l = ls[i].clone();
                ls.insert(rng.below(ls.len() + 1), l);
            }
            2 => {
                let donor = rng.pick(pool);
                let donor_lines: Vec<&[u8]> = donor.split(|b| *b == b'\n').collect();
                ls.insert(i, rng.pick(&donor_lines).to_vec());
            }
            3 => ls[i] = havoc(rng, &ls[i], pool),
            _ => ls[i] = json_or_havoc(rng, &ls[i], &[]).into_iter().filter(|b| *b != b'\n').collect(),
        }
    }
    let mut out = ls.join(&b'\n');
    out.truncate(MAX_LEN);
    out
}

/// For packed folders ([`super::harness::pack`]): mutates one file (JSON-aware for `.json`), or
/// drops one, or adds one from another input.
pub fn folder(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    use super::harness::{pack, unpack};
    let mut files = unpack(input);
    if files.is_empty() || rng.one_in(20) {
        return havoc(rng, input, pool);
    }
    let i = rng.below(files.len());
    match rng.below(10) {
        0 if files.len() > 1 => {
            files.remove(i);
        }
        1 => {
            let donor = unpack(rng.pick(pool).as_slice());
            if !donor.is_empty() {
                let f = rng.pick(&donor).clone();
                files.retain(|(p, _)| *p != f.0);
                files.push(f);
            }
        }
        _ => {
            let bytes = std::mem::take(&mut files[i].1);
            let donors: Vec<Vec<u8>> =
                pool.iter().flat_map(|p| unpack(p)).filter(|(p, _)| *p == files[i].0).map(|(_, b)| b).collect();
            files[i].1 = if files[i].0.ends_with(".json") {
                json_or_havoc(rng, &bytes, &donors)
            } else {
                havoc(rng, &bytes, &donors)
            };
        }
    }
    let mut out = pack(&files);
    out.truncate(MAX_LEN);
    out
}
