//! Canonical JSON: object keys sorted by code point, no whitespace, strings and numbers as
//! `serde_json` writes them. Two equal values have the same text, so a digest or a signature
//! over it is over the value, not over one way of writing it.

use serde_json::Value;

/// The canonical text of `value`.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut members: Vec<_> = map.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_spacing_do_not_change_the_text() {
        let cases = [
            (
                json!({"b": 1, "a": [true, null, "x"]}),
                r#"{"a":[true,null,"x"],"b":1}"#,
            ),
            (json!({"z": {"d": 1, "c": 2}}), r#"{"z":{"c":2,"d":1}}"#),
            (json!("天气\n"), r#""天气\n""#),
            (json!([]), "[]"),
        ];
        for (value, want) in cases {
            assert_eq!(canonical_json(&value), want);
        }
    }
}
