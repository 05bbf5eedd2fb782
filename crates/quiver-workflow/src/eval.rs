//! Evaluating the expressions of `if`, `match` and templates over a run's context (a JSON
//! object with `input`, `steps`, `trigger`, `run`, `settings` and, for events, `event`).

use std::cmp::Ordering;

use quiver_package::workflow::expr::{self, CompareOp, Expr, Segment};
use quiver_package::workflow::template::{self, Part};
use serde_json::Value;

use crate::error::{Result, WorkflowError};

/// Whether a value counts as true: everything but `null`, `false`, `0`, `""`, `[]` and `{}`.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The value at `path` in `context`; `null` where it leads nowhere.
pub fn lookup<'a>(context: &'a Value, path: &[Segment]) -> &'a Value {
    let mut at = context;
    for segment in path {
        let next = match (segment, at) {
            (Segment::Key(k), Value::Object(map)) => map.get(k),
            (Segment::Index(i), Value::Array(items)) => items.get(*i),
            _ => None,
        };
        match next {
            Some(v) => at = v,
            None => return &Value::Null,
        }
    }
    at
}

/// Evaluates a parsed expression.
pub fn eval(expr: &Expr, context: &Value) -> Result<Value> {
    Ok(match expr {
        Expr::Literal(v) => v.clone(),
        Expr::Path(p) => lookup(context, p).clone(),
        Expr::Not(e) => Value::Bool(!truthy(&eval(e, context)?)),
        Expr::And(a, b) => Value::Bool(truthy(&eval(a, context)?) && truthy(&eval(b, context)?)),
        Expr::Or(a, b) => Value::Bool(truthy(&eval(a, context)?) || truthy(&eval(b, context)?)),
        Expr::Compare(a, op, b) => {
            let (a, b) = (eval(a, context)?, eval(b, context)?);
            Value::Bool(compare(&a, *op, &b)?)
        }
    })
}

fn compare(a: &Value, op: CompareOp, b: &Value) -> Result<bool> {
    let equal = || match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    };
    let order = || -> Result<Ordering> {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => x
                .as_f64()
                .zip(y.as_f64())
                .and_then(|(x, y)| x.partial_cmp(&y))
                .ok_or_else(|| WorkflowError::Eval("numbers that do not compare".into())),
            (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
            _ => Err(WorkflowError::Eval(format!(
                "cannot order {} and {}: `<` `<=` `>` `>=` compare two numbers or two strings",
                kind(a),
                kind(b)
            ))),
        }
    };
    Ok(match op {
        CompareOp::Eq => equal(),
        CompareOp::Ne => !equal(),
        CompareOp::Lt => order()? == Ordering::Less,
        CompareOp::Le => order()? != Ordering::Greater,
        CompareOp::Gt => order()? == Ordering::Greater,
        CompareOp::Ge => order()? != Ordering::Less,
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Evaluates a condition written as text.
pub fn condition(text: &str, context: &Value) -> Result<bool> {
    let parsed = expr::parse(text).map_err(|source| WorkflowError::Parse {
        text: text.to_owned(),
        source,
    })?;
    Ok(truthy(&eval(&parsed, context)?))
}

/// Renders one template string: exactly one `{{ ... }}` keeps the value's JSON type; in longer
/// text a string goes in as is, `null` as nothing, anything else as compact JSON.
pub fn render_str(text: &str, context: &Value) -> Result<Value> {
    if !text.contains("{{") {
        return Ok(Value::String(text.to_owned()));
    }
    let parsed = template::parse(text).map_err(|source| WorkflowError::Parse {
        text: text.to_owned(),
        source,
    })?;
    if let Some(e) = parsed.single() {
        return eval(e, context);
    }
    let mut out = String::new();
    for part in &parsed.parts {
        match part {
            Part::Text(t) => out.push_str(t),
            Part::Expr(_, e) => match eval(e, context)? {
                Value::Null => {}
                Value::String(s) => out.push_str(&s),
                other => out.push_str(&other.to_string()),
            },
        }
    }
    Ok(Value::String(out))
}

/// Renders every template string inside `value` (object keys are left as they are).
pub fn render(value: &Value, context: &Value) -> Result<Value> {
    Ok(match value {
        Value::String(s) => render_str(s, context)?,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| render(v, context))
                .collect::<Result<_>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), render(v, context)?)))
                .collect::<Result<_>>()?,
        ),
        other => other.clone(),
    })
}

/// Renders a template string to text (an idempotency key, an agent's task).
pub fn render_text(text: &str, context: &Value) -> Result<String> {
    Ok(match render_str(text, context)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn context() -> Value {
        json!({
            "input": {"city": "Berlin", "days": 3, "tags": ["a", "b"], "empty": "", "none": null},
            "steps": {
                "fetch": {"output": {"temp": 21.5, "items": [{"name": "x"}, {"name": "y"}]}, "status": "ok"},
                "confirm": {"approved": true, "status": "approved", "output": {"by": "boss"}},
                "skipped": {"status": "skipped", "output": null}
            },
            "trigger": {"kind": "schedule", "fire_at": "2026-03-29T08:00:00+02:00"},
            "run": {"id": "run-1"},
            "settings": {"unit": "C"}
        })
    }

    /// Golden templates: what each renders to over one context.
    #[test]
    fn templates() {
        let ctx = context();
        let cases = [
            (json!("plain"), json!("plain")),
            (json!("{{ input.days }}"), json!(3)),
            (json!("{{ input.tags }}"), json!(["a", "b"])),
            (
                json!("{{ steps.fetch.output }}"),
                json!({"temp": 21.5, "items": [{"name": "x"}, {"name": "y"}]}),
            ),
            (json!("{{ steps.fetch.output.items[1].name }}"), json!("y")),
            (json!("{{ steps.fetch.output.items.0.name }}"), json!("x")),
            (json!("{{ steps.confirm.approved }}"), json!(true)),
            (json!("{{ input.missing }}"), json!(null)),
            (json!("{{ input.days > 2 }}"), json!(true)),
            (json!("{{input.city}}"), json!("Berlin")),
            (
                json!(
                    "Weather in {{ input.city }}: {{ steps.fetch.output.temp }}{{ settings.unit }}"
                ),
                json!("Weather in Berlin: 21.5C"),
            ),
            (
                json!("tags={{ input.tags }} none=[{{ input.none }}]"),
                json!("tags=[\"a\",\"b\"] none=[]"),
            ),
            (
                json!("{{ run.id }}/{{ trigger.kind }}"),
                json!("run-1/schedule"),
            ),
            (json!(" {{ input.days }}"), json!(" 3")),
            (
                json!({"q": "{{ input.city }}", "n": "{{ input.days }}", "list": ["{{ steps.confirm.output.by }}", 7, null], "k{{x}}": true}),
                json!({"q": "Berlin", "n": 3, "list": ["boss", 7, null], "k{{x}}": true}),
            ),
        ];
        for (template, want) in cases {
            assert_eq!(render(&template, &ctx).unwrap(), want, "{template}");
        }
        assert_eq!(render_text("{{ input.days }}", &ctx).unwrap(), "3");
        assert_eq!(render_text("{{ input.none }}", &ctx).unwrap(), "");
        assert!(render(&json!("{{ input.city "), &ctx).is_err());
    }

    /// Golden conditions.
    #[test]
    fn conditions() {
        let ctx = context();
        let cases: &[(&str, Option<bool>)] = &[
            ("true", Some(true)),
            ("input.city == 'Berlin'", Some(true)),
            ("input.city != \"Berlin\"", Some(false)),
            ("input.days == 3.0", Some(true)),
            ("input.days >= 3 && input.days < 4", Some(true)),
            (
                "steps.fetch.output.temp > 30 || steps.confirm.approved",
                Some(true),
            ),
            ("!steps.confirm.approved", Some(false)),
            ("steps.skipped.status == 'skipped'", Some(true)),
            ("steps.skipped.output == null", Some(true)),
            ("input.missing == null", Some(true)),
            ("input.empty", Some(false)),
            ("input.tags", Some(true)),
            ("input.none", Some(false)),
            ("'b' > 'a'", Some(true)),
            ("input.tags == input.tags", Some(true)),
            ("!(input.days <= 2)", Some(true)),
            // `||` does not evaluate its right side once the left is true.
            ("true || input.city < 1", Some(true)),
            ("input.city < 1", None),
            ("input.tags > 0", None),
            ("null < 1", None),
            ("input.city ==", None),
        ];
        for (text, want) in cases {
            assert_eq!(condition(text, &ctx).ok(), *want, "{text}");
        }
    }
}
