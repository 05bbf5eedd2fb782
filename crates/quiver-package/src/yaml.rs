//! YAML through serde-saphyr, with budgets against hostile input and errors mapped to
//! diagnostics that point at the file's own lines.
//!
//! Every package file reads plain scalars as the YAML 1.2 core schema does: only `true`,
//! `True`, `TRUE`, `false`, `False` and `FALSE` are booleans (so `n`, `y`, `on` and `no` are
//! strings), `null`, `Null`, `NULL`, `~` and an empty value are null, and numbers follow the 1.2
//! core forms (no YAML 1.1 octal `017`, no `1_000`, no sexagesimal `1:20`).

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::diagnostic::Diagnostic;

/// Deepest nesting a package file may use; real manifests stay under 10.
pub const MAX_DEPTH: usize = 48;

fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: MAX_DEPTH,
            max_documents: 1,
            max_nodes: 200_000,
            max_aliases: 1_000,
            max_anchors: 1_000,
        },
        strict_booleans: true,
        underscored_numbers_as_strings: true,
        legacy_octal_numbers: false,
    }
}

/// Parses `text` (which starts on 1-based line `first_line` of `file`) into `T`.
///
/// An empty document is read as an empty mapping, so optional-only types parse from it.
pub fn parse<T: DeserializeOwned>(
    text: &str,
    file: &Path,
    first_line: u64,
) -> Result<T, Diagnostic> {
    let source = if text.trim().is_empty() { "{}" } else { text };
    serde_saphyr::from_str_with_options::<T>(source, options())
        .map_err(|err| to_diagnostic(&err, file, first_line))
}

/// Turns a serde-saphyr error into a diagnostic at the right line of the file.
fn to_diagnostic(err: &serde_saphyr::Error, file: &Path, first_line: u64) -> Diagnostic {
    let (code, help) = match classify(err) {
        Kind::TooComplex => (
            "yaml-too-complex",
            "simplify the file: nesting depth, aliases and node counts are limited",
        ),
        Kind::WrongType => (
            "yaml-wrong-type",
            "see docs/package-format.md for the type of each field",
        ),
        Kind::DuplicateKey => ("yaml-duplicate-key", "remove or rename one of the two keys"),
        Kind::Syntax => ("yaml-syntax", "check the YAML syntax near this line"),
    };
    let mut diag = Diagnostic::error(code, file, message(err)).with_help(help);
    if let Some(loc) = err.location()
        && loc.line() > 0
    {
        diag = diag.at(loc.line() + first_line - 1, loc.column().max(1));
    }
    diag
}

enum Kind {
    TooComplex,
    DuplicateKey,
    WrongType,
    Syntax,
}

fn classify(err: &serde_saphyr::Error) -> Kind {
    use serde_saphyr::Error as E;
    match err {
        // A wrapper's kind is its error's: a budget breached while an alias is replayed (a
        // billion laughs) is too complex, not a syntax error.
        E::WithSnippet { error, .. } | E::AliasError { error, .. } => classify(error),
        E::DuplicateMappingKey { .. } => Kind::DuplicateKey,
        E::Budget { .. }
        | E::AliasReplayCounterOverflow { .. }
        | E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayStackDepthExceeded { .. } => Kind::TooComplex,
        E::Message { .. }
        | E::Unexpected { .. }
        | E::InvalidScalar { .. }
        | E::InvalidBooleanStrict { .. }
        | E::NonFiniteFloat { .. }
        | E::NullIntoString { .. }
        | E::SerdeInvalidType { .. }
        | E::SerdeInvalidValue { .. }
        | E::SerdeInvalidLength { .. }
        | E::SerdeUnknownVariant { .. }
        | E::SerdeUnknownField { .. }
        | E::SerdeMissingField { .. }
        | E::SerdeVariantId { .. } => Kind::WrongType,
        other => {
            let text = other.to_string();
            if text.contains("recursion limit")
                || text.contains("nesting")
                || text.contains("depth")
            {
                Kind::TooComplex
            } else {
                Kind::Syntax
            }
        }
    }
}

/// The message of a diagnostic: a sentence of our own for budgets and duplicate keys (the
/// library's text names its own types and options), the library's otherwise.
fn message(err: &serde_saphyr::Error) -> String {
    use serde_saphyr::Error as E;
    use serde_saphyr::budget::BudgetBreach as B;
    match err {
        E::WithSnippet { error, .. } | E::AliasError { error, .. } => message(error),
        E::DuplicateMappingKey { key: Some(key), .. } => {
            format!("the key `{key}` appears twice in one mapping")
        }
        E::DuplicateMappingKey { key: None, .. } => "a key appears twice in one mapping".to_owned(),
        E::Budget { breach, .. } => {
            let what = match breach {
                B::Depth { .. } => format!("nests deeper than {MAX_DEPTH} levels"),
                B::Nodes { .. } => "has more than 200000 values".to_owned(),
                B::Aliases { .. } => "uses more than 1000 aliases".to_owned(),
                B::Anchors { .. } => "defines more than 1000 anchors".to_owned(),
                B::Documents { .. } => "holds more than one YAML document".to_owned(),
                _ => "exceeds a limit of the YAML reader".to_owned(),
            };
            format!("the YAML {what}")
        }
        E::AliasReplayCounterOverflow { .. }
        | E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayStackDepthExceeded { .. } => {
            "the YAML's aliases expand to too much".to_owned()
        }
        _ => match classify(err) {
            Kind::TooComplex => format!("the YAML nests deeper than {MAX_DEPTH} levels"),
            _ => plain_message(err),
        },
    }
}

/// The error's message without serde-saphyr's own `error: line N column M:` prefix.
fn plain_message(err: &serde_saphyr::Error) -> String {
    let text = err.to_string();
    let mut first = text.lines().next().unwrap_or("invalid YAML").trim();
    first = first.strip_prefix("error:").unwrap_or(first).trim_start();
    if first.starts_with("line ")
        && let Some((_, rest)) = first.split_once(": ")
    {
        first = rest;
    }
    let first = match first.rfind(" at line ") {
        Some(i) => &first[..i],
        None => first,
    };
    first.trim_end_matches(['.', ',']).to_owned()
}

/// The top-level keys of a YAML mapping with the 1-based line of each, in file order.
///
/// A cheap scan used to point warnings (unknown keys) at their line; keys that are not plain
/// `key:` lines at column 0 are skipped.
pub fn top_level_key_lines(text: &str, first_line: u64) -> Vec<(String, u64)> {
    let mut keys = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with([' ', '\t', '#', '-']) || line.is_empty() {
            continue;
        }
        let (key, rest) = match line.split_once(':') {
            Some(parts) => parts,
            None => continue,
        };
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            continue;
        }
        let key = key.trim().trim_matches(['"', '\'']);
        keys.push((key.to_owned(), first_line + i as u64));
    }
    keys
}

/// The line of top-level key `key`, if found.
pub fn key_line(text: &str, first_line: u64, key: &str) -> Option<u64> {
    top_level_key_lines(text, first_line)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, line)| line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        #[serde(default)]
        flag: bool,
    }

    #[test]
    fn errors_point_at_file_lines() {
        let file = Path::new("x.yaml");
        let err = parse::<Doc>("name: a\nflag: [1, 2]\n", file, 2).unwrap_err();
        assert_eq!(err.code, "yaml-wrong-type", "{err:?}");
        assert_eq!(err.line, Some(3), "{err:?}");
        let err = parse::<Doc>("name: a\n  b: : :\n", file, 1).unwrap_err();
        assert!(err.line.is_some(), "{err:?}");
        let err = parse::<Doc>("flag: true\n", file, 1).unwrap_err();
        assert!(err.message.contains("name"), "{err:?}");
    }

    #[test]
    fn absurd_nesting_is_refused() {
        let deep = format!("a: {}1{}", "[".repeat(5000), "]".repeat(5000));
        let err =
            parse::<BTreeMap<String, serde_json::Value>>(&deep, Path::new("x"), 1).unwrap_err();
        assert!(err.is_error());
        let deep_block: String = (0..200)
            .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
            .collect();
        assert!(parse::<serde_json::Value>(&deep_block, Path::new("x"), 1).is_err());
    }

    #[test]
    fn key_lines() {
        let text = "# c\nname: a\nnested:\n  x: 1\n\"quoted\": 2\nurl:http\n";
        assert_eq!(
            top_level_key_lines(text, 2),
            vec![
                ("name".into(), 3),
                ("nested".into(), 4),
                ("quoted".into(), 6)
            ]
        );
    }

    #[test]
    fn plain_scalars_follow_the_yaml_1_2_core_schema() {
        use serde_json::json;
        let cases = [
            ("n", json!("n")),
            ("y", json!("y")),
            ("on", json!("on")),
            ("off", json!("off")),
            ("yes", json!("yes")),
            ("no", json!("no")),
            ("Y", json!("Y")),
            ("NO", json!("NO")),
            ("true", json!(true)),
            ("True", json!(true)),
            ("TRUE", json!(true)),
            ("false", json!(false)),
            ("False", json!(false)),
            ("FALSE", json!(false)),
            ("null", json!(null)),
            ("Null", json!(null)),
            ("~", json!(null)),
            ("", json!(null)),
            ("12", json!(12)),
            ("-3", json!(-3)),
            ("0x1F", json!(31)),
            ("0o17", json!(15)),
            ("1.5", json!(1.5)),
            ("1e3", json!(1000.0)),
            // 1.2 core reads `017` as decimal 17 (serde-saphyr gives it as a float).
            ("017", json!(17.0)),
            ("1_000", json!("1_000")),
            ("1:20", json!("1:20")),
            ("'n'", json!("n")),
        ];
        for (scalar, want) in cases {
            let got = parse::<serde_json::Value>(&format!("a: {scalar}\n"), Path::new("x"), 1)
                .map(|v| v["a"].clone());
            assert_eq!(got, Ok(want), "{scalar:?}");
        }
        // A schema's `required: [n]` and an enum of `[y, on]` stay strings.
        let schema: serde_json::Value = parse(
            "type: object\nproperties: {n: {type: string, enum: [y, on]}}\nrequired: [n]\n",
            Path::new("x"),
            1,
        )
        .unwrap();
        assert_eq!(schema["required"], json!(["n"]));
        assert_eq!(schema["properties"]["n"]["enum"], json!(["y", "on"]));
        assert!(crate::schema::compile(&schema).is_ok());
    }

    #[test]
    fn budget_and_duplicate_key_errors_read_as_sentences() {
        let anchors: String = (0..1100).map(|i| format!("k{i}: &a{i} v\n")).collect();
        let nodes = format!("a: [{}]", "1,".repeat(200_001));
        let deep = format!("a: {}1{}", "[".repeat(60), "]".repeat(60));
        // Issue 22 item 14: nine levels of nine aliases each (a billion laughs).
        let mut laughs = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n".to_owned();
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            let row = [prev.as_str(); 9].join(", ");
            laughs.push_str(&format!("a{i}: &a{i} [{row}]\n"));
        }
        let cases: &[(&str, &str, &str)] = &[
            (&laughs, "yaml-too-complex", "more than 200000 values"),
            (&anchors, "yaml-too-complex", "more than 1000 anchors"),
            (&nodes, "yaml-too-complex", "more than 200000 values"),
            (&deep, "yaml-too-complex", "deeper than 48 levels"),
            (
                "a: 1\na: 2\n",
                "yaml-duplicate-key",
                "the key `a` appears twice",
            ),
        ];
        for (text, code, words) in cases {
            let err = parse::<serde_json::Value>(text, Path::new("x"), 1).unwrap_err();
            assert_eq!(err.code, *code, "{err:?}");
            assert!(err.message.contains(words), "{err:?}");
            for leak in ["{", "Options", "Policy", "breached"] {
                assert!(!err.message.contains(leak), "{err:?}");
            }
        }
    }
}
