//! The closed expression grammar of workflow conditions (`if`) and templates (`{{ ... }}`):
//! paths, literals, comparisons, `&& || !` and parentheses. Nothing else, so a workflow file
//! can never run code. Parsed here, where the loader checks what an expression names;
//! evaluated by `quiver-workflow`.
//!
//! ```text
//! expr    = or
//! or      = and ( "||" and )*
//! and     = cmp ( "&&" cmp )*
//! cmp     = unary ( ( "==" | "!=" | "<" | "<=" | ">" | ">=" ) unary )?
//! unary   = "!" unary | primary
//! primary = literal | path | "(" expr ")"
//! literal = string ('...' or "...") | number | true | false | null
//! path    = name ( "." name | "." digits | "[" digits "]" )*
//! name    = [A-Za-z_] [A-Za-z0-9_-]*
//! ```
//!
//! Hand-written rather than a parser crate: the grammar is a dozen lines, errors must carry a
//! byte position and never panic on any input, and the crates that fit (pest, nom, chumsky)
//! would bring a macro or combinator dependency larger than this file.

use serde_json::Value;

/// Longest expression accepted, in bytes.
pub const MAX_LEN: usize = 4096;
/// Deepest nesting of `!` and parentheses accepted.
pub const MAX_DEPTH: usize = 32;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A JSON literal.
    Literal(Value),
    /// A path into the context (`steps.fetch.output.items[0]`).
    Path(Vec<Segment>),
    /// `!e`.
    Not(Box<Expr>),
    /// `a <op> b`.
    Compare(Box<Expr>, CompareOp, Box<Expr>),
    /// `a && b`.
    And(Box<Expr>, Box<Expr>),
    /// `a || b`.
    Or(Box<Expr>, Box<Expr>),
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// An object key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// Why an expression does not parse, with the byte offset where it went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at position {position}")]
pub struct ExprError {
    /// Byte offset into the expression (0-based).
    pub position: usize,
    /// What is wrong.
    pub message: String,
}

impl Expr {
    /// Every path the expression reads, in order.
    pub fn paths(&self) -> Vec<&[Segment]> {
        let mut out = Vec::new();
        self.collect_paths(&mut out);
        out
    }

    fn collect_paths<'a>(&'a self, out: &mut Vec<&'a [Segment]>) {
        match self {
            Expr::Literal(_) => {}
            Expr::Path(p) => out.push(p),
            Expr::Not(e) => e.collect_paths(out),
            Expr::Compare(a, _, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                a.collect_paths(out);
                b.collect_paths(out);
            }
        }
    }
}

/// Renders a path as written (`steps.a.output[0]`).
pub fn path_text(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(k) if out.is_empty() => out.push_str(k),
            Segment::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Parses one expression.
pub fn parse(text: &str) -> Result<Expr, ExprError> {
    if text.len() > MAX_LEN {
        return Err(ExprError {
            position: MAX_LEN,
            message: format!("the expression is longer than {MAX_LEN} bytes"),
        });
    }
    let tokens = lex(text)?;
    let mut parser = Parser {
        tokens,
        next: 0,
        end: text.len(),
        depth: 0,
    };
    let expr = parser.or()?;
    match parser.peek() {
        None => Ok(expr),
        Some((position, token)) => Err(ExprError {
            position,
            message: format!("unexpected {}", token.describe()),
        }),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Number(Value),
    Str(String),
    Dot,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Not,
    And,
    Or,
    Op(CompareOp),
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Name(n) => format!("`{n}`"),
            Token::Number(n) => format!("number `{n}`"),
            Token::Str(_) => "string".to_owned(),
            Token::Dot => "`.`".to_owned(),
            Token::LBracket => "`[`".to_owned(),
            Token::RBracket => "`]`".to_owned(),
            Token::LParen => "`(`".to_owned(),
            Token::RParen => "`)`".to_owned(),
            Token::Not => "`!`".to_owned(),
            Token::And => "`&&`".to_owned(),
            Token::Or => "`||`".to_owned(),
            Token::Op(_) => "comparison".to_owned(),
        }
    }
}

fn error<T>(position: usize, message: impl Into<String>) -> Result<T, ExprError> {
    Err(ExprError {
        position,
        message: message.into(),
    })
}

fn lex(text: &str) -> Result<Vec<(usize, Token)>, ExprError> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(at, c)) = chars.peek() {
        let two = text.get(at..at + 2);
        let mut take = |n: usize, token: Token, tokens: &mut Vec<(usize, Token)>| {
            for _ in 0..n {
                chars.next();
            }
            tokens.push((at, token));
        };
        match (c, two) {
            (c, _) if c.is_whitespace() => {
                chars.next();
            }
            (_, Some("&&")) => take(2, Token::And, &mut tokens),
            (_, Some("||")) => take(2, Token::Or, &mut tokens),
            (_, Some("==")) => take(2, Token::Op(CompareOp::Eq), &mut tokens),
            (_, Some("!=")) => take(2, Token::Op(CompareOp::Ne), &mut tokens),
            (_, Some("<=")) => take(2, Token::Op(CompareOp::Le), &mut tokens),
            (_, Some(">=")) => take(2, Token::Op(CompareOp::Ge), &mut tokens),
            ('<', _) => take(1, Token::Op(CompareOp::Lt), &mut tokens),
            ('>', _) => take(1, Token::Op(CompareOp::Gt), &mut tokens),
            ('!', _) => take(1, Token::Not, &mut tokens),
            ('.', _) => take(1, Token::Dot, &mut tokens),
            ('[', _) => take(1, Token::LBracket, &mut tokens),
            (']', _) => take(1, Token::RBracket, &mut tokens),
            ('(', _) => take(1, Token::LParen, &mut tokens),
            (')', _) => take(1, Token::RParen, &mut tokens),
            ('\'' | '"', _) => {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return error(at, "a string is not closed"),
                        Some((_, q)) if q == c => break,
                        Some((e, '\\')) => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, 't')) => value.push('\t'),
                            Some((_, q @ ('\\' | '\'' | '"'))) => value.push(q),
                            _ => return error(e, "unknown escape (use \\\\ \\' \\\" \\n \\t)"),
                        },
                        Some((_, other)) => value.push(other),
                    }
                }
                tokens.push((at, Token::Str(value)));
            }
            (c, _) if c.is_ascii_digit() || c == '-' => {
                let mut end = at + c.len_utf8();
                chars.next();
                while let Some(&(i, d)) = chars.peek() {
                    let exponent_sign = (d == '-' || d == '+')
                        && matches!(text[..i].chars().last(), Some('e' | 'E'));
                    // A `.` belongs to the number only before a digit (`items.0.name`).
                    let fraction = d == '.'
                        && text[i + 1..].starts_with(|n: char| n.is_ascii_digit())
                        && !text[at..i].contains('.');
                    if d.is_ascii_digit() || fraction || d == 'e' || d == 'E' || exponent_sign {
                        end = i + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                let literal = &text[at..end];
                let number = literal.parse::<i64>().ok().map(Value::from).or_else(|| {
                    literal
                        .parse::<f64>()
                        .ok()
                        .filter(|f| f.is_finite())
                        .and_then(serde_json::Number::from_f64)
                        .map(Value::Number)
                });
                match number {
                    Some(n) => tokens.push((at, Token::Number(n))),
                    None => return error(at, format!("`{literal}` is not a number")),
                }
            }
            (c, _) if c.is_ascii_alphabetic() || c == '_' => {
                let mut end = at;
                while let Some(&(i, d)) = chars.peek() {
                    if d.is_ascii_alphanumeric() || d == '_' || d == '-' {
                        end = i + 1;
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push((at, Token::Name(text[at..end].to_owned())));
            }
            (other, _) => {
                return error(
                    at,
                    format!("`{other}` is not part of the condition language"),
                );
            }
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    next: usize,
    end: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<(usize, &Token)> {
        self.tokens.get(self.next).map(|(at, t)| (*at, t))
    }

    fn bump(&mut self) -> Option<(usize, Token)> {
        let token = self.tokens.get(self.next).cloned();
        self.next += 1;
        token
    }

    fn eat(&mut self, want: &Token) -> bool {
        if self.peek().is_some_and(|(_, t)| t == want) {
            self.next += 1;
            true
        } else {
            false
        }
    }

    fn deeper(&mut self, at: usize) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return error(at, format!("nested deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.and()?;
        while self.eat(&Token::Or) {
            let right = self.and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.compare()?;
        while self.eat(&Token::And) {
            let right = self.compare()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn compare(&mut self) -> Result<Expr, ExprError> {
        let left = self.unary()?;
        if let Some((_, Token::Op(op))) = self.peek() {
            let op = *op;
            self.next += 1;
            let right = self.unary()?;
            if let Some((at, Token::Op(_))) = self.peek() {
                return error(at, "comparisons do not chain; use `&&`");
            }
            return Ok(Expr::Compare(Box::new(left), op, Box::new(right)));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        if let Some((at, Token::Not)) = self.peek() {
            self.next += 1;
            self.deeper(at)?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        let Some((at, token)) = self.bump() else {
            return error(self.end, "the expression ends where a value was expected");
        };
        match token {
            Token::Number(n) => Ok(Expr::Literal(n)),
            Token::Str(s) => Ok(Expr::Literal(Value::String(s))),
            Token::Name(n) if n == "true" => Ok(Expr::Literal(Value::Bool(true))),
            Token::Name(n) if n == "false" => Ok(Expr::Literal(Value::Bool(false))),
            Token::Name(n) if n == "null" => Ok(Expr::Literal(Value::Null)),
            Token::Name(n) => self.path(n),
            Token::LParen => {
                self.deeper(at)?;
                let inner = self.or()?;
                self.depth -= 1;
                if self.eat(&Token::RParen) {
                    Ok(inner)
                } else {
                    let position = self.peek().map_or(self.end, |(p, _)| p);
                    error(position, "`(` is not closed")
                }
            }
            other => error(at, format!("unexpected {}", other.describe())),
        }
    }

    fn path(&mut self, first: String) -> Result<Expr, ExprError> {
        let mut segments = vec![Segment::Key(first)];
        loop {
            if self.eat(&Token::Dot) {
                match self.bump() {
                    Some((_, Token::Name(n))) => segments.push(Segment::Key(n)),
                    Some((at, Token::Number(Value::Number(n)))) => match n.as_u64() {
                        Some(i) => segments.push(Segment::Index(i as usize)),
                        None => return error(at, "an index must be a whole number"),
                    },
                    Some((at, other)) => {
                        return error(
                            at,
                            format!("expected a name after `.`, found {}", other.describe()),
                        );
                    }
                    None => return error(self.end, "expected a name after `.`"),
                }
            } else if self.eat(&Token::LBracket) {
                let index = match self.bump() {
                    Some((_, Token::Number(Value::Number(n)))) if n.as_u64().is_some() => {
                        n.as_u64().unwrap_or_default() as usize
                    }
                    Some((_, Token::Str(key))) => {
                        if !self.eat(&Token::RBracket) {
                            let position = self.peek().map_or(self.end, |(p, _)| p);
                            return error(position, "`[` is not closed");
                        }
                        segments.push(Segment::Key(key));
                        continue;
                    }
                    Some((at, _)) => {
                        return error(at, "expected a whole number or a string in `[ ]`");
                    }
                    None => return error(self.end, "`[` is not closed"),
                };
                if !self.eat(&Token::RBracket) {
                    let position = self.peek().map_or(self.end, |(p, _)| p);
                    return error(position, "`[` is not closed");
                }
                segments.push(Segment::Index(index));
            } else {
                return Ok(Expr::Path(segments));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(k: &str) -> Segment {
        Segment::Key(k.to_owned())
    }

    fn path(parts: &[&str]) -> Expr {
        Expr::Path(parts.iter().map(|p| key(p)).collect())
    }

    #[test]
    fn parses() {
        let b = Box::new;
        let cases: Vec<(&str, Expr)> = vec![
            ("true", Expr::Literal(json!(true))),
            ("null", Expr::Literal(json!(null))),
            ("-1.5", Expr::Literal(json!(-1.5))),
            ("42", Expr::Literal(json!(42))),
            ("'a\\'b'", Expr::Literal(json!("a'b"))),
            ("\"x\"", Expr::Literal(json!("x"))),
            ("input.city", path(&["input", "city"])),
            (
                "steps.fetch-it.output.items[2].name",
                Expr::Path(vec![
                    key("steps"),
                    key("fetch-it"),
                    key("output"),
                    key("items"),
                    Segment::Index(2),
                    key("name"),
                ]),
            ),
            ("a.0", Expr::Path(vec![key("a"), Segment::Index(0)])),
            (
                "a.0.b",
                Expr::Path(vec![key("a"), Segment::Index(0), key("b")]),
            ),
            ("a['b c']", Expr::Path(vec![key("a"), key("b c")])),
            (
                "a == 'x'",
                Expr::Compare(b(path(&["a"])), CompareOp::Eq, b(Expr::Literal(json!("x")))),
            ),
            (
                "!a && b || c",
                Expr::Or(
                    b(Expr::And(b(Expr::Not(b(path(&["a"])))), b(path(&["b"])))),
                    b(path(&["c"])),
                ),
            ),
            (
                "a || b && c",
                Expr::Or(
                    b(path(&["a"])),
                    b(Expr::And(b(path(&["b"])), b(path(&["c"])))),
                ),
            ),
            (
                "!(a >= 3)",
                Expr::Not(b(Expr::Compare(
                    b(path(&["a"])),
                    CompareOp::Ge,
                    b(Expr::Literal(json!(3))),
                ))),
            ),
            (
                "a<=b",
                Expr::Compare(b(path(&["a"])), CompareOp::Le, b(path(&["b"]))),
            ),
            (
                "x != null",
                Expr::Compare(
                    b(path(&["x"])),
                    CompareOp::Ne,
                    b(Expr::Literal(json!(null))),
                ),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn errors_carry_positions_and_never_panic() {
        let cases: &[(&str, usize, &str)] = &[
            ("", 0, "ends where a value"),
            ("a ==", 4, "ends where a value"),
            ("a == b == c", 7, "do not chain"),
            ("(a", 2, "not closed"),
            ("a)", 1, "unexpected `)`"),
            ("'abc", 0, "not closed"),
            ("a + b", 2, "not part of"),
            ("a.", 2, "after `.`"),
            ("a[", 2, "not closed"),
            ("a[x]", 2, "whole number"),
            ("a.-1", 2, "whole number"),
            ("1.2.3", 3, "unexpected `.`"),
            ("'\\q'", 1, "unknown escape"),
            ("&&", 0, "unexpected `&&`"),
            ("a b", 2, "unexpected `b`"),
            ("f(x)", 1, "unexpected `(`"),
            ("a = b", 2, "not part of"),
            ("a & b", 2, "not part of"),
            ("é", 0, "not part of"),
        ];
        for (text, position, words) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!(err.position, *position, "{text}: {err}");
            assert!(err.message.contains(words), "{text}: {err}");
        }
        // Odd inputs: every one returns, none panics.
        let deep = format!("{}a{}", "(".repeat(100), ")".repeat(100));
        let nots = "!".repeat(100) + "a";
        let long = "a".repeat(MAX_LEN + 1);
        let odd = [
            deep.as_str(),
            nots.as_str(),
            long.as_str(),
            "\"",
            "'\\",
            "-",
            "--1",
            "1e",
            "1e999",
            "[]",
            "a[99999999999999999999]",
            "a.b.c.d.e.f[0][1]['x']",
            "!",
            "((",
            "))",
            "\u{0}",
            "a\u{200b}b",
            "🙂 == 🙂",
            "'🙂' == \"🙂\"",
        ];
        for text in odd {
            let _ = parse(text);
        }
        assert!(parse(&deep).unwrap_err().message.contains("deeper"));
        assert!(parse(&nots).unwrap_err().message.contains("deeper"));
        assert!(parse(&long).unwrap_err().message.contains("longer"));
        assert!(parse("'🙂' == \"🙂\"").is_ok());
    }

    #[test]
    fn paths_are_listed() {
        let e = parse("a.b == 1 && !(c || d[0])").unwrap();
        let texts: Vec<String> = e.paths().iter().map(|p| path_text(p)).collect();
        assert_eq!(texts, ["a.b", "c", "d[0]"]);
    }
}
