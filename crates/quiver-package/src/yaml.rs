//! YAML through serde-saphyr, with budgets against hostile input and errors mapped to
//! diagnostics that point at the file's own lines.

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
        Kind::Syntax => ("yaml-syntax", "check the YAML syntax near this line"),
    };
    let mut diag = Diagnostic::error(code, file, plain_message(err)).with_help(help);
    if let Some(loc) = err.location()
        && loc.line() > 0
    {
        diag = diag.at(loc.line() + first_line - 1, loc.column().max(1));
    }
    diag
}

enum Kind {
    TooComplex,
    WrongType,
    Syntax,
}

fn classify(err: &serde_saphyr::Error) -> Kind {
    use serde_saphyr::Error as E;
    match err {
        E::WithSnippet { error, .. } => classify(error),
        E::Budget { .. }
        | E::AliasReplayCounterOverflow { .. }
        | E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayStackDepthExceeded { .. } => Kind::TooComplex,
        E::Message { .. }
        | E::Unexpected { .. }
        | E::InvalidScalar { .. }
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
}
