//! The `until` expression of a repeating pipeline stage (spec §10.1/§10.2): an OR (`||`) of ANDs
//! (`&&`) of `signal op literal` comparisons over the six known signals, with parentheses for
//! grouping and no NOT. A bare boolean signal stands for `signal == true`: the bundled
//! `od-code-migration` scenario writes `(build.passing && tests.passing) || iterations>=8`.
//! This module owns its parser (errors carry the 1-based column) and its evaluator; it is pure.

use super::vocab::{signal_kind, SignalKind, UNTIL_SIGNALS};
use super::{MAX_UNTIL_DEPTH, MAX_UNTIL_LEN};

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `>=`
    Ge,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `<`
    Lt,
}

/// The literal a signal is compared with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Literal {
    /// A finite number (for `critique.score` and `iterations`).
    Number(f64),
    /// `true` or `false` (for the boolean signals).
    Bool(bool),
}

/// One `signal op literal` term.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// One of the six known signal names.
    pub signal: String,
    /// The operator (booleans only take `==` and `!=`).
    pub op: CmpOp,
    /// The literal, typed to match the signal.
    pub value: Literal,
}

/// A parsed expression: satisfied when every comparison of at least one conjunction holds.
#[derive(Debug, Clone, PartialEq)]
pub struct UntilExpr {
    /// The disjunction of conjunctions.
    pub any: Vec<Vec<Comparison>>,
}

/// Why an `until` expression does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct UntilError {
    /// 1-based character column of the problem in the expression.
    pub column: usize,
    /// What is wrong there.
    pub message: String,
}

/// Parses an `until` expression.
pub fn parse_until(source: &str) -> Result<UntilExpr, UntilError> {
    if source.len() > MAX_UNTIL_LEN {
        return Err(UntilError { column: 1, message: format!("expression is longer than {MAX_UNTIL_LEN} bytes") });
    }
    let tokens = tokenize(source)?;
    if tokens.is_empty() {
        return Err(UntilError { column: 1, message: "empty expression".into() });
    }
    let mut parser = Parser { source, tokens, pos: 0 };
    let any = parser.or_expr(0)?;
    if let Some(tok) = parser.tokens.get(parser.pos) {
        return Err(parser.error_at(tok.start, "unexpected input after the expression (missing `&&` or `||`?)"));
    }
    Ok(UntilExpr { any })
}

impl UntilExpr {
    /// Evaluates against the current signals. A missing signal or a value of the wrong type makes
    /// its comparison false, as in the reference evaluator.
    pub fn evaluate(&self, signals: impl Fn(&str) -> Option<Literal>) -> bool {
        self.any.iter().any(|conj| conj.iter().all(|cmp| holds(cmp, signals(&cmp.signal))))
    }
}

impl UntilExpr {
    /// The first satisfied conjunction, rendered as `a && b` (None when none holds).
    pub fn matched(&self, signals: impl Fn(&str) -> Option<Literal>) -> Option<String> {
        let conj = self.any.iter().find(|conj| conj.iter().all(|cmp| holds(cmp, signals(&cmp.signal))))?;
        Some(conj.iter().map(Comparison::to_string).collect::<Vec<_>>().join(" && "))
    }
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = match self.op {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Ge => ">=",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Lt => "<",
        };
        match self.value {
            Literal::Number(n) => write!(f, "{}{op}{n}", self.signal),
            Literal::Bool(b) => write!(f, "{}{op}{b}", self.signal),
        }
    }
}

fn holds(cmp: &Comparison, actual: Option<Literal>) -> bool {
    match (actual, cmp.value) {
        (Some(Literal::Bool(a)), Literal::Bool(b)) => match cmp.op {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            _ => false,
        },
        (Some(Literal::Number(a)), Literal::Number(b)) => match cmp.op {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Ge => a >= b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Lt => a < b,
        },
        _ => false,
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Ident(String),
    Number(String),
    Op(CmpOp),
    And,
    Or,
    Open,
    Close,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    start: usize,
}

fn column(source: &str, byte: usize) -> usize {
    source.get(..byte).map_or(1, |s| s.chars().count() + 1)
}

fn tokenize(source: &str) -> Result<Vec<Token>, UntilError> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        let two = bytes.get(i..i + 2);
        let (kind, len) = match c {
            b' ' | b'\t' | b'\r' | b'\n' => {
                i += 1;
                continue;
            }
            b'(' => (Kind::Open, 1),
            b')' => (Kind::Close, 1),
            _ if two == Some(b"&&") => (Kind::And, 2),
            _ if two == Some(b"||") => (Kind::Or, 2),
            _ if two == Some(b"==") => (Kind::Op(CmpOp::Eq), 2),
            _ if two == Some(b"!=") => (Kind::Op(CmpOp::Ne), 2),
            _ if two == Some(b">=") => (Kind::Op(CmpOp::Ge), 2),
            _ if two == Some(b"<=") => (Kind::Op(CmpOp::Le), 2),
            b'>' => (Kind::Op(CmpOp::Gt), 1),
            b'<' => (Kind::Op(CmpOp::Lt), 1),
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let len = run(bytes, i, |b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
                (Kind::Ident(source[i..i + len].to_string()), len)
            }
            b'0'..=b'9' | b'-' | b'.' | b'+' => {
                let len = run(bytes, i, |b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'));
                (Kind::Number(source[i..i + len].to_string()), len)
            }
            _ => {
                let ch = source[i..].chars().next().unwrap_or('?');
                return Err(UntilError { column: column(source, i), message: format!("unexpected character {ch:?}") });
            }
        };
        tokens.push(Token { kind, start });
        i += len;
    }
    Ok(tokens)
}

fn run(bytes: &[u8], from: usize, pred: impl Fn(u8) -> bool) -> usize {
    bytes[from..].iter().take_while(|b| pred(**b)).count()
}

struct Parser<'a> {
    source: &'a str,
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser<'_> {
    fn error_at(&self, byte: usize, message: impl Into<String>) -> UntilError {
        UntilError { column: column(self.source, byte), message: message.into() }
    }

    fn error_here(&self, message: impl Into<String>) -> UntilError {
        let byte = self.tokens.get(self.pos).map_or(self.source.len(), |t| t.start);
        self.error_at(byte, message)
    }

    fn peek(&self) -> Option<&Kind> {
        self.tokens.get(self.pos).map(|t| &t.kind)
    }

    fn or_expr(&mut self, depth: usize) -> Result<Vec<Vec<Comparison>>, UntilError> {
        let mut any = self.and_expr(depth)?;
        while self.peek() == Some(&Kind::Or) {
            self.pos += 1;
            any.extend(self.and_expr(depth)?);
        }
        Ok(any)
    }

    /// A conjunction; a parenthesised group inside it must not contain a top-level `||`,
    /// because the expression is an OR of ANDs.
    fn and_expr(&mut self, depth: usize) -> Result<Vec<Vec<Comparison>>, UntilError> {
        let first_start = self.tokens.get(self.pos).map(|t| t.start);
        let mut parts = vec![(first_start, self.term(depth)?)];
        while self.peek() == Some(&Kind::And) {
            self.pos += 1;
            let start = self.tokens.get(self.pos).map(|t| t.start);
            parts.push((start, self.term(depth)?));
        }
        if parts.len() == 1 {
            return Ok(parts.pop().map(|(_, alts)| alts).unwrap_or_default());
        }
        let mut conj = Vec::new();
        for (start, mut alts) in parts {
            if alts.len() != 1 {
                let byte = start.unwrap_or(0);
                return Err(
                    self.error_at(byte, "a parenthesised `||` cannot be joined with `&&` (until is an OR of ANDs)")
                );
            }
            conj.append(&mut alts[0]);
        }
        Ok(vec![conj])
    }

    fn term(&mut self, depth: usize) -> Result<Vec<Vec<Comparison>>, UntilError> {
        match self.peek() {
            Some(Kind::Open) => {
                if depth >= MAX_UNTIL_DEPTH {
                    return Err(self.error_here(format!("parentheses nested deeper than {MAX_UNTIL_DEPTH}")));
                }
                let open = self.pos;
                self.pos += 1;
                let inner = self.or_expr(depth + 1)?;
                if self.peek() != Some(&Kind::Close) {
                    let at = self.tokens[open].start;
                    return Err(self.error_at(at, "unclosed parenthesis"));
                }
                self.pos += 1;
                Ok(inner)
            }
            _ => Ok(vec![vec![self.comparison()?]]),
        }
    }

    fn comparison(&mut self) -> Result<Comparison, UntilError> {
        let signal = match self.peek() {
            Some(Kind::Ident(name)) => name.clone(),
            None => return Err(self.error_here("expected a signal, found the end of the expression")),
            Some(_) => return Err(self.error_here("expected a signal name")),
        };
        let Some(kind) = signal_kind(&signal) else {
            let known: Vec<&str> = UNTIL_SIGNALS.iter().map(|(n, _)| *n).collect();
            return Err(self.error_here(format!("unknown signal {signal:?} (known: {})", known.join(", "))));
        };
        self.pos += 1;
        let op = match self.peek() {
            Some(Kind::Op(op)) => *op,
            // A bare boolean signal means `signal == true` (od-code-migration's `build.passing && tests.passing`).
            _ if kind == SignalKind::Boolean => {
                return Ok(Comparison { signal, op: CmpOp::Eq, value: Literal::Bool(true) })
            }
            _ => return Err(self.error_here("expected a comparison operator (== != >= <= > <)")),
        };
        self.pos += 1;
        let value = self.literal(&signal, kind, op)?;
        self.pos += 1;
        Ok(Comparison { signal, op, value })
    }

    fn literal(&self, signal: &str, kind: SignalKind, op: CmpOp) -> Result<Literal, UntilError> {
        let tok = self.peek();
        match kind {
            SignalKind::Boolean => {
                let value = match tok {
                    Some(Kind::Ident(w)) if w == "true" => true,
                    Some(Kind::Ident(w)) if w == "false" => false,
                    _ => return Err(self.error_here(format!("{signal} is a boolean: expected true or false"))),
                };
                if !matches!(op, CmpOp::Eq | CmpOp::Ne) {
                    return Err(self.error_here(format!("{signal} is a boolean: only == and != apply")));
                }
                Ok(Literal::Bool(value))
            }
            SignalKind::Number => match tok {
                Some(Kind::Number(text)) => parse_number(text)
                    .map(Literal::Number)
                    .ok_or_else(|| self.error_here(format!("{text:?} is not a finite number"))),
                _ => Err(self.error_here(format!("{signal} is a number: expected a number literal"))),
            },
        }
    }
}

/// A JSON-style number: optional `-`, digits, optional fraction, optional exponent; finite.
fn parse_number(text: &str) -> Option<f64> {
    let body = text.strip_prefix('-').unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((int, frac)) => (int, Some(frac)),
        None => (mantissa, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let exp_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    if !digits(int) || !frac.is_none_or(digits) || !exp_ok {
        return None;
    }
    text.parse::<f64>().ok().filter(|n| n.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(src: &str) -> UntilExpr {
        parse_until(src).unwrap_or_else(|e| panic!("{src}: {e}"))
    }

    #[test]
    fn reference_expressions_parse() {
        assert_eq!(ok("critique.score>=4 || iterations>=3").any.len(), 2);
        let e = ok("(build.passing && tests.passing) || iterations>=8");
        assert_eq!(e.any.len(), 2);
        assert_eq!(e.any[0].len(), 2);
        assert_eq!(ok("((preview.ok == true))").any.len(), 1);
        assert_eq!(ok("user.confirmed==true && (critique.score > 3.5)").any[0].len(), 2);
        let bare = ok("preview.ok");
        assert_eq!(
            bare.any[0][0],
            Comparison { signal: "preview.ok".into(), op: CmpOp::Eq, value: Literal::Bool(true) }
        );
    }

    #[test]
    fn errors_carry_the_column() {
        let cases = [
            ("", 1),
            ("   ", 1),
            ("critique.score >=", 18),
            ("foo.bar > 1", 1),
            ("critique.score >= 4 || ", 24),
            ("preview.ok >= true", 15),
            ("iterations >= true", 15),
            ("build.passing == 1", 18),
            ("(iterations > 1", 1),
            ("iterations > 1)", 15),
            ("(iterations > 1 || preview.ok == true) && tests.passing == true", 1),
            ("iterations > 1e", 14),
            ("iterations = 1", 12),
            ("iterations > 1 iterations > 2", 16),
            ("iterations && preview.ok", 12),
            ("é > 1", 1),
        ];
        for (src, col) in cases {
            let err = parse_until(src).expect_err(src);
            assert_eq!(err.column, col, "{src}: {err}");
        }
    }

    #[test]
    fn evaluation_follows_the_reference() {
        let e = ok("(build.passing && tests.passing) || iterations>=8");
        let sig = |b: bool, t: bool, n: f64| {
            move |name: &str| match name {
                "build.passing" => Some(Literal::Bool(b)),
                "tests.passing" => Some(Literal::Bool(t)),
                "iterations" => Some(Literal::Number(n)),
                _ => None,
            }
        };
        assert!(e.evaluate(sig(true, true, 1.0)));
        assert!(!e.evaluate(sig(true, false, 7.0)));
        assert!(e.evaluate(sig(false, false, 8.0)));
        assert!(!ok("critique.score >= 4").evaluate(|_| None));
    }

    #[test]
    fn bounds() {
        let long = format!("iterations > {}", "1".repeat(MAX_UNTIL_LEN));
        assert!(parse_until(&long).is_err());
        let deep = format!("{}iterations > 1{}", "(".repeat(40), ")".repeat(40));
        assert!(parse_until(&deep).unwrap_err().message.contains("nested"));
    }
}
