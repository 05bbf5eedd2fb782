//! Templates: text with `{{ expression }}` parts (the grammar of [`super::expr`]). A JSON value
//! is templated at every depth of its strings; a string that is exactly one `{{ ... }}` stands
//! for the expression's value with its JSON type.

use serde_json::Value;

use super::expr::{self, Expr, ExprError};

/// One part of a parsed template string.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Literal text.
    Text(String),
    /// An expression, with the byte offset of its `{{` in the string.
    Expr(usize, Expr),
}

/// A parsed template string.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// Its parts, in order.
    pub parts: Vec<Part>,
}

impl Template {
    /// The expression, when the whole string is exactly one `{{ ... }}` (its value then keeps
    /// its JSON type).
    pub fn single(&self) -> Option<&Expr> {
        match self.parts.as_slice() {
            [Part::Expr(_, e)] => Some(e),
            _ => None,
        }
    }

    /// Every expression of the template.
    pub fn exprs(&self) -> impl Iterator<Item = &Expr> {
        self.parts.iter().filter_map(|p| match p {
            Part::Expr(_, e) => Some(e),
            Part::Text(_) => None,
        })
    }
}

/// Parses a template string. Error positions are byte offsets into `text`.
pub fn parse(text: &str) -> Result<Template, ExprError> {
    let mut parts = Vec::new();
    let mut offset = 0;
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            parts.push(Part::Text(rest[..start].to_owned()));
        }
        let inner_start = offset + start + 2;
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(ExprError {
                position: offset + start,
                message: "`{{` is not closed by `}}`".to_owned(),
            });
        };
        let inner = &after[..end];
        let parsed = expr::parse(inner).map_err(|e| ExprError {
            position: inner_start + e.position,
            message: e.message,
        })?;
        parts.push(Part::Expr(offset + start, parsed));
        offset = inner_start + end + 2;
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest.to_owned()));
    }
    Ok(Template { parts })
}

/// Every template string inside `value` (object keys are not templated), parsed, with the
/// JSON-pointer-like place it was found (`/a/0/b`).
pub fn parse_value(value: &Value) -> Vec<(String, Result<Template, ExprError>)> {
    let mut out = Vec::new();
    walk(value, String::new(), &mut out);
    out
}

fn walk(value: &Value, at: String, out: &mut Vec<(String, Result<Template, ExprError>)>) {
    match value {
        Value::String(s) if s.contains("{{") => out.push((at, parse(s))),
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                walk(v, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                walk(v, format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn splits() {
        let t = parse("Hi {{ input.name }}, {{steps.a.output}}!").unwrap();
        assert_eq!(t.parts.len(), 5);
        assert!(t.single().is_none());
        assert!(parse("{{ input.n }}").unwrap().single().is_some());
        assert!(parse("{{ input.n }}\n").unwrap().single().is_none());
        assert_eq!(parse("plain").unwrap().parts, [Part::Text("plain".into())]);
        assert_eq!(parse("").unwrap().parts, []);
    }

    #[test]
    fn errors_point_into_the_string() {
        let cases = [
            ("ab {{ x", 3, "not closed"),
            ("ab {{ x + }}", 8, "not part of"),
            ("{{}}", 2, "ends where"),
        ];
        for (text, position, words) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!(err.position, position, "{text}: {err}");
            assert!(err.message.contains(words), "{text}: {err}");
        }
    }

    #[test]
    fn values_are_walked() {
        let v = json!({"a": ["x {{ input.a }}", 1], "b": {"c": "{{ run.id }}"}, "d": "plain"});
        let found: Vec<String> = parse_value(&v).into_iter().map(|(at, _)| at).collect();
        assert_eq!(found, ["/a/0", "/b/c"]);
    }
}
