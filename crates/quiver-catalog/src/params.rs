//! Parameter names and descriptions of a JSON Schema, flattened for search.

use serde_json::Value;

/// Deepest schema nesting followed.
const MAX_DEPTH: usize = 16;

/// `(path, description)` for every property of `schema`, nested ones as `outer.inner`;
/// `enum` values are appended to the description so they can be searched.
pub fn schema_params(schema: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    flatten(schema, "", &mut out, 0);
    out
}

fn flatten(schema: &Value, prefix: &str, out: &mut Vec<(String, String)>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(items) = schema.get("items") {
        flatten(items, prefix, out, depth + 1);
    }
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return;
    };
    for (name, property) in properties {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let mut description = property
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if let Some(Value::Array(values)) = property.get("enum") {
            for v in values {
                description.push(' ');
                match v {
                    Value::String(s) => description.push_str(s),
                    other => description.push_str(&other.to_string()),
                }
            }
        }
        out.push((path.clone(), description));
        flatten(property, &path, out, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flattens_nested_and_enums() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string", "description": "城市"},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "opts": {"type": "object", "properties": {"days": {"description": "n"}}},
            "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {}}}}
        }});
        assert_eq!(
            schema_params(&schema),
            [
                ("city".to_owned(), "城市".to_owned()),
                ("unit".to_owned(), " c f".to_owned()),
                ("opts".to_owned(), String::new()),
                ("opts.days".to_owned(), "n".to_owned()),
                ("tags".to_owned(), String::new()),
                ("tags.k".to_owned(), String::new()),
            ]
        );
        let mut deep = json!({});
        for _ in 0..100 {
            deep = json!({"properties": {"x": deep}});
        }
        assert!(schema_params(&deep).len() <= MAX_DEPTH + 1);
    }
}
