//! Load mode over the real-world corpus: all 123 skills load, with the expected warnings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use quiver_package::{Severity, load_package};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/skills")
}

fn skill_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            skill_dirs(&path, out);
        } else if path.file_name().is_some_and(|n| n == "SKILL.md") {
            out.push(dir.to_path_buf());
        }
    }
}

#[test]
fn every_corpus_skill_loads_leniently() {
    let mut dirs = Vec::new();
    skill_dirs(&corpus(), &mut dirs);
    assert_eq!(dirs.len(), 123, "the corpus has 123 skills");
    let mut warnings: BTreeMap<&str, usize> = BTreeMap::new();
    for dir in &dirs {
        let loaded = load_package(dir);
        let errors: Vec<_> = loaded
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", dir.display());
        let package = loaded
            .package
            .unwrap_or_else(|| panic!("{} did not load", dir.display()));
        let skill = package
            .skill
            .as_ref()
            .expect("a plain skill folder has its own skill");
        assert_eq!(skill.id, package.id.as_str());
        assert!(!skill.description.is_empty());
        assert!(!skill.body.trim().is_empty() || skill.body.is_empty());
        for d in &loaded.diagnostics {
            *warnings.entry(d.code).or_default() += 1;
        }
    }
    // The corpus's documented quirks (shared/corpus/skills/SOURCES.md) are warnings.
    assert_eq!(
        warnings.get("skill-name-dir-mismatch"),
        Some(&4),
        "{warnings:?}"
    );
    assert_eq!(
        warnings.get("skill-allowed-tools-list"),
        Some(&3),
        "{warnings:?}"
    );
    assert_eq!(
        warnings.get("skill-description-too-long"),
        Some(&1),
        "{warnings:?}"
    );
    assert!(
        warnings
            .get("skill-unknown-field")
            .is_some_and(|&n| n >= 14),
        "{warnings:?}"
    );
}

/// Issue 23 item 3: the instruction lint over the 123 real skills. The corpus copied only
/// `SKILL.md` and the `.md` files under `references/` (and `reference/`), so links to
/// `scripts/`, `resources/`, `examples/` or sibling files dangle on purpose
/// (shared/corpus/skills/SOURCES.md): every missing link must be one of those, never a file
/// under the copied folders, and every `references/` link that resolves is quiet.
#[test]
fn the_instruction_lint_over_the_corpus() {
    let mut dirs = Vec::new();
    skill_dirs(&corpus(), &mut dirs);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut links = 0;
    for dir in &dirs {
        let loaded = load_package(dir);
        let skill = loaded
            .package
            .as_ref()
            .and_then(|p| p.skill.as_ref())
            .unwrap();
        links += quiver_package::skill_lint::scan(&skill.body)
            .iter()
            .filter(|f| f.kind == quiver_package::skill_lint::Kind::Link)
            .count();
        for d in &loaded.diagnostics {
            let lint = d.code.starts_with("skill-link-")
                || d.code == "skill-pipe-to-shell"
                || d.code == "skill-recursive-delete";
            if !lint {
                continue;
            }
            *counts.entry(d.code).or_default() += 1;
            assert!(d.line.is_some() && d.column.is_some(), "{d:?}");
            if d.code == "skill-link-missing" {
                assert!(
                    !d.message.contains("`references/") && !d.message.contains("`reference/"),
                    "a copied folder's file is missing: {d:?}"
                );
            }
        }
    }
    let want: BTreeMap<&str, usize> = [
        ("skill-link-missing", 80),
        ("skill-link-outside-package", 4),
        ("skill-pipe-to-shell", 1),
        ("skill-recursive-delete", 5),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, want);
    assert!(links > 150, "{links} links scanned");
}
