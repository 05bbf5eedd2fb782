//! The cache against a reference model: random creates, edits, invalid edits, deletions and
//! renames of packages on real files, each followed by a refresh with the paths the operation
//! changed (as the watcher reports them), end with the catalog a fresh load gives, except that
//! a package whose current files have an error keeps its last clean version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};

use super::{Dirty, PackageCache};

const NAMES: [&str; 4] = ["alpha", "beta", "gamma", "delta"];

#[derive(Debug, Clone)]
enum Op {
    /// Writes a valid package (creating or editing it) with this description number.
    Write(usize, u8),
    /// Writes a SKILL.md whose frontmatter does not parse.
    Invalidate(usize),
    /// Removes the package folder.
    Delete(usize),
    /// Renames one package folder to another name (its SKILL.md rewritten to match).
    Rename(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..NAMES.len(), any::<u8>()).prop_map(|(p, d)| Op::Write(p, d)),
        1 => (0..NAMES.len()).prop_map(Op::Invalidate),
        1 => (0..NAMES.len()).prop_map(Op::Delete),
        1 => (0..NAMES.len(), 0..NAMES.len()).prop_map(|(a, b)| Op::Rename(a, b)),
    ]
}

/// One folder in the model: its current description (`None`: invalid), and the last valid one.
#[derive(Debug, Clone, Default)]
struct Model {
    current: Option<String>,
    last_good: Option<String>,
}

fn skill(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n")
}

/// Applies `op` to the files under `root` and to `model`; the paths changed.
fn apply(root: &Path, model: &mut BTreeMap<String, Model>, op: &Op) -> Vec<PathBuf> {
    match *op {
        Op::Write(p, d) => {
            let name = NAMES[p];
            let description = format!("Package {name}, edition {d}.");
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("SKILL.md"), skill(name, &description)).unwrap();
            model.insert(
                name.into(),
                Model {
                    current: Some(description.clone()),
                    last_good: Some(description),
                },
            );
            vec![dir.join("SKILL.md")]
        }
        Op::Invalidate(p) => {
            let name = NAMES[p];
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("SKILL.md"), "---\nname: [unclosed\n---\n").unwrap();
            let entry = model.entry(name.into()).or_default();
            entry.current = None;
            vec![dir.join("SKILL.md")]
        }
        Op::Delete(p) => {
            let dir = root.join(NAMES[p]);
            let _ = std::fs::remove_dir_all(&dir);
            model.remove(NAMES[p]);
            vec![dir]
        }
        Op::Rename(a, b) => {
            let (from, to) = (root.join(NAMES[a]), root.join(NAMES[b]));
            if a == b || !from.exists() {
                return Vec::new();
            }
            let _ = std::fs::remove_dir_all(&to);
            std::fs::rename(&from, &to).unwrap();
            let moved = model.remove(NAMES[a]).unwrap_or_default();
            let replaced = model.remove(NAMES[b]).unwrap_or_default();
            // The id follows the folder: a valid SKILL.md is rewritten with the new name; an
            // invalid one stays invalid, and the folder it replaced keeps its last clean
            // version (the cache sees one folder edited, never gone).
            let description = moved.current.map(|_| format!("Renamed from {}.", NAMES[a]));
            if let Some(description) = &description {
                std::fs::write(to.join("SKILL.md"), skill(NAMES[b], description)).unwrap();
            }
            model.insert(
                NAMES[b].into(),
                Model {
                    current: description.clone(),
                    last_good: description.or(replaced.last_good),
                },
            );
            vec![from, to]
        }
    }
}

/// (id, description) of every package the catalog holds.
fn summary(catalog: &Catalog) -> BTreeMap<String, String> {
    catalog
        .packages()
        .iter()
        .map(|p| (p.package.id.to_string(), p.package.description.clone()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_file_operations_end_as_a_fresh_load(ops in prop::collection::vec(op(), 1..14)) {
        let dir = tempfile::tempdir().unwrap();
        let roots = [Root { path: dir.path().to_owned(), scope: Scope::Project }];
        let options = CatalogOptions::default();
        let mut cache = PackageCache::default();
        cache.refresh(&roots, &Dirty::All);
        let mut model: BTreeMap<String, Model> = BTreeMap::new();
        for op in &ops {
            let changed = apply(dir.path(), &mut model, op);
            let refreshed = cache.refresh(&roots, &Dirty::Paths(changed));
            let catalog = Catalog::build(refreshed.packages, refreshed.diagnostics, &options);
            let fresh = summary(&Catalog::load(&roots, &options));
            let got = summary(&catalog);
            // Valid folders: exactly what a fresh load gives.
            for (name, m) in &model {
                if m.current.is_some() {
                    prop_assert_eq!(got.get(name), fresh.get(name), "{:?}", op);
                }
            }
            // Invalid folders with a last good version keep it; those without one are as a
            // fresh load has them; nothing else is there.
            let mut want = fresh.clone();
            for (name, m) in &model {
                if m.current.is_none()
                    && let Some(good) = &m.last_good
                {
                    want.insert(name.clone(), good.clone());
                }
            }
            prop_assert_eq!(got, want, "after {:?}", op);
        }
    }
}

/// An edit with an error keeps the clean version, says so, and the next clean edit wins.
#[test]
fn an_edit_with_an_error_keeps_the_clean_version_until_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let roots = [Root {
        path: dir.path().to_owned(),
        scope: Scope::Project,
    }];
    let mut model = BTreeMap::new();
    let mut cache = PackageCache::default();
    let mut run = |op: Op| {
        let changed = apply(dir.path(), &mut model, &op);
        cache.refresh(&roots, &Dirty::Paths(changed))
    };
    let first = run(Op::Write(0, 1));
    assert_eq!(first.parsed, 1);
    let kept = run(Op::Invalidate(0));
    assert_eq!(kept.packages.len(), 1);
    assert_eq!(kept.packages[0].0.description, "Package alpha, edition 1.");
    let codes: Vec<&str> = kept.diagnostics.iter().map(|d| d.code).collect();
    assert!(codes.contains(&"package-reload-kept"), "{codes:?}");
    assert!(
        kept.diagnostics
            .iter()
            .any(|d| d.is_error() && d.file.ends_with("alpha/SKILL.md")),
        "{:?}",
        kept.diagnostics
    );
    let fixed = run(Op::Write(0, 2));
    assert_eq!(fixed.packages[0].0.description, "Package alpha, edition 2.");
    assert!(fixed.diagnostics.is_empty(), "{:?}", fixed.diagnostics);
    // A change elsewhere parses only what it touched.
    let other = run(Op::Write(1, 1));
    assert_eq!(other.parsed, 1);
    assert_eq!(other.packages.len(), 2);
}
