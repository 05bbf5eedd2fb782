//! Every diagnostic code the code can emit is documented in docs/diagnostics.md, and every
//! documented code still exists.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A kebab-case code literal: `"word-word..."`.
fn is_code(s: &str) -> bool {
    let mut parts = s.split('-');
    parts.clone().count() >= 2
        && parts.all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// Prefixes of diagnostic codes, one per family in docs/diagnostics.md.
const PREFIXES: [&str; 22] = [
    "file-",
    "yaml-",
    "manifest-",
    "package-",
    "skill-",
    "tool-",
    "agent-",
    "workflow-",
    "prompt-",
    "item-",
    "requirements-",
    "empty-",
    "invalid-",
    "wire-",
    "root-",
    "folder-",
    "low-",
    "mcp-server-",
    "text-",
    "permission-",
    "unknown-",
    "declaration-",
];

/// Every kebab-case string literal with a code prefix in the library sources (tests excluded).
fn emitted_codes(repo: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    for krate in [
        "quiver-package",
        "quiver-catalog",
        "quiver-runtime",
        "quiver-mcp-client",
        "quiver-host",
    ] {
        rust_files(&repo.join("crates").join(krate).join("src"), &mut files);
    }
    let mut codes = BTreeSet::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let code_part = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, literal) in code_part.split('"').enumerate() {
            if i % 2 == 1 && is_code(literal) && PREFIXES.iter().any(|p| literal.starts_with(p)) {
                codes.insert(literal.to_owned());
            }
        }
    }
    codes
}

fn documented_codes(repo: &Path) -> BTreeSet<String> {
    let doc = fs::read_to_string(repo.join("docs/diagnostics.md")).unwrap();
    doc.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|c| is_code(c))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_code_is_documented_and_every_documented_code_exists() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let emitted = emitted_codes(&repo);
    let documented = documented_codes(&repo);
    assert!(
        emitted.len() > 60,
        "the scan found too few codes: {emitted:?}"
    );
    let undocumented: Vec<_> = emitted.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "codes missing from docs/diagnostics.md: {undocumented:?}"
    );
    let stale: Vec<_> = documented.difference(&emitted).collect();
    assert!(
        stale.is_empty(),
        "docs/diagnostics.md documents codes nothing emits: {stale:?}"
    );
}
