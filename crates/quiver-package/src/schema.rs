//! JSON Schema checks for tool inputs and outputs (no remote `$ref` is ever fetched).

use serde_json::Value;

/// Compiles `schema`, checking it against its meta-schema first.
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    if let Err(err) = jsonschema::meta::validate(schema) {
        return Err(describe(&err));
    }
    jsonschema::validator_for(schema).map_err(|err| describe(&err))
}

/// The validator's first complaint about `instance`, if any.
pub fn first_error(validator: &jsonschema::Validator, instance: &Value) -> Option<String> {
    validator.validate(instance).err().map(|err| describe(&err))
}

fn describe(err: &jsonschema::ValidationError<'_>) -> String {
    let path = err.instance_path().to_string();
    if path.is_empty() {
        err.to_string()
    } else {
        format!("{err} at `{path}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compile_and_validate() {
        assert!(compile(&json!({"type": 7})).is_err());
        assert!(compile(&json!({"$ref": "https://example.com/s.json"})).is_err());
        let v = compile(
            &json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
        .unwrap();
        assert_eq!(first_error(&v, &json!({"n": 1})), None);
        let msg = first_error(&v, &json!({"n": "x"})).unwrap();
        assert!(msg.contains("/n"), "{msg}");
        assert!(first_error(&v, &json!({})).unwrap().contains("required"));
    }
}
