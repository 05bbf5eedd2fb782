//! Argument digests for audit records: the arguments themselves are never stored, only a
//! SHA-256 of their canonical form with the secret fields removed.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The canonical text of a JSON value: object keys sorted by code point, no whitespace, strings
/// and numbers as `serde_json` writes them. Two values that differ only in key order or spacing
/// have the same canonical text.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &[], &mut out);
    out
}

/// The lowercase hex SHA-256 of the canonical JSON (see [`canonical_json`]) of `args`, after
/// removing every object member whose key is one of `secret_fields`, at any depth. The removal
/// is by name wherever the key appears, so a secret nested in an object or an array of objects
/// never reaches the digest; a digest therefore cannot be used to confirm a guessed secret.
pub fn argument_digest(args: &Value, secret_fields: &[&str]) -> String {
    let mut text = String::new();
    write_canonical(args, secret_fields, &mut text);
    let hash = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in hash {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_canonical(value: &Value, secret_fields: &[&str], out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map
                .iter()
                .filter(|(key, _)| !secret_fields.contains(&key.as_str()))
                .collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, member)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(member, secret_fields, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, secret_fields, out);
            }
            out.push(']');
        }
        Value::String(text) => write_string(text, out),
        Value::Number(number) => out.push_str(&number.to_string()),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Null => out.push_str("null"),
    }
}

fn write_string(text: &str, out: &mut String) {
    // `Value`'s Display writes compact JSON and cannot fail.
    out.push_str(&Value::String(text.to_owned()).to_string());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_forms() {
        let cases = [
            (
                json!({"b": 1, "a": [true, null, "x"]}),
                r#"{"a":[true,null,"x"],"b":1}"#,
            ),
            (json!({"z": {"y": 1, "x": 2}}), r#"{"z":{"x":2,"y":1}}"#),
            (json!("引号\"\n"), r#""引号\"\n""#),
            (json!(1.5), "1.5"),
            (json!([]), "[]"),
        ];
        for (value, want) in cases {
            assert_eq!(canonical_json(&value), want, "{value}");
        }
    }

    #[test]
    fn digest_is_lowercase_hex_sha256() {
        // sha256("{}")
        assert_eq!(
            argument_digest(&json!({}), &[]),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}
