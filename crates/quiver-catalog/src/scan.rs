//! Finding package folders under the configured roots.
//!
//! Depth at most [`MAX_DEPTH`], at most [`MAX_FOLDERS`] folders per root; `.git`,
//! `node_modules` and dot-folders are skipped except the known skill folders (`.agents`,
//! `.claude`, `.codex`, and dot-tiers such as `.system` or `.curated` inside a `skills` folder).
//! A symlinked folder is followed once, and a folder reached twice is loaded once. A folder
//! laid out as another system's package (a zhin.js plugin, a `manifest.yaml`) is reported
//! with what to rename or add ([`quiver_package::foreign`]) and not searched further.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use quiver_package::{Diagnostic, is_package_dir};
use serde::Serialize;

/// Deepest folder level searched under a root.
pub const MAX_DEPTH: usize = 6;
/// Most folders visited per root.
pub const MAX_FOLDERS: usize = 2000;

/// Dot-folders that hold skills and are searched.
const KNOWN_DOT_FOLDERS: [&str; 3] = [".agents", ".claude", ".codex"];

/// Where a root's packages come from; earlier scopes win by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The project's own packages.
    Project,
    /// The user's packages.
    User,
    /// Packages installed into Quiver's store.
    Installed,
}

impl Scope {
    /// The scope's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::User => "user",
            Scope::Installed => "installed",
        }
    }
}

/// A folder to search for packages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Root {
    /// The folder.
    pub path: PathBuf,
    /// Its scope.
    pub scope: Scope,
}

/// A package folder found by the scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The package folder.
    pub dir: PathBuf,
    /// The scope of the root it was found under.
    pub scope: Scope,
    /// Index of that root in the list given to [`scan`].
    pub root: usize,
}

/// Scans every root (in parallel) and returns the package folders in a deterministic order:
/// by root, then by path.
pub fn scan(roots: &[Root]) -> (Vec<Found>, Vec<Diagnostic>) {
    use rayon::prelude::*;
    let per_root: Vec<_> = roots
        .par_iter()
        .map(|root| scan_root_canonical(&root.path))
        .collect();
    let mut found = Vec::new();
    let mut diags = Vec::new();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    for (index, (dirs, d)) in per_root.into_iter().enumerate() {
        diags.extend(d);
        for (dir, canonical) in dirs {
            if seen.insert(canonical) {
                found.push(Found {
                    dir,
                    scope: roots[index].scope,
                    root: index,
                });
            }
        }
    }
    (found, diags)
}

/// Package folders under one root, sorted.
pub fn scan_root(root: &Path) -> (Vec<PathBuf>, Vec<Diagnostic>) {
    let (found, diags) = scan_root_canonical(root);
    (found.into_iter().map(|(dir, _)| dir).collect(), diags)
}

/// Package folders under one root, sorted, each with its canonical path.
fn scan_root_canonical(root: &Path) -> (Vec<(PathBuf, PathBuf)>, Vec<Diagnostic>) {
    let mut state = Walk {
        visited: HashSet::new(),
        folders: 0,
        found: Vec::new(),
        diags: Vec::new(),
        truncated: false,
    };
    if !root.is_dir() {
        if root.exists() {
            state.diags.push(Diagnostic::warning(
                "root-not-folder",
                root,
                "this root is not a folder and is skipped",
            ));
        }
        return (state.found, state.diags);
    }
    state.walk(root, 0);
    if state.truncated {
        state.diags.push(
            Diagnostic::warning(
                "root-too-many-folders",
                root,
                format!("the scan stopped after {MAX_FOLDERS} folders; packages beyond them were not loaded"),
            )
            .with_help("point the root at the folder that holds the packages"),
        );
    }
    state.found.sort();
    (state.found, state.diags)
}

struct Walk {
    visited: HashSet<PathBuf>,
    folders: usize,
    /// (package folder, its canonical path).
    found: Vec<(PathBuf, PathBuf)>,
    diags: Vec<Diagnostic>,
    truncated: bool,
}

impl Walk {
    fn walk(&mut self, dir: &Path, depth: usize) {
        if self.folders >= MAX_FOLDERS {
            self.truncated = true;
            return;
        }
        self.folders += 1;
        let Ok(canonical) = fs::canonicalize(dir) else {
            return;
        };
        if !self.visited.insert(canonical.clone()) {
            return;
        }
        if is_package_dir(dir) {
            self.found.push((dir.to_path_buf(), canonical));
            return;
        }
        // Another system's package is reported once, with what to add, and not searched.
        if let Some(d) = quiver_package::foreign::package_diagnostic(dir) {
            self.diags.push(d);
            return;
        }
        if depth >= MAX_DEPTH {
            return;
        }
        let Ok(read) = fs::read_dir(dir) else {
            self.diags.push(Diagnostic::warning(
                "folder-unreadable",
                dir,
                "cannot list this folder",
            ));
            return;
        };
        let mut subdirs: Vec<(PathBuf, String)> = read
            .flatten()
            .filter(is_dir)
            .map(|e| (e.path(), e.file_name().to_string_lossy().into_owned()))
            .collect();
        subdirs.sort();
        let here_is_skills = dir.file_name().is_some_and(|n| n == "skills");
        for (path, name) in subdirs {
            if name == ".git" || name == "node_modules" {
                continue;
            }
            if name.starts_with('.')
                && !KNOWN_DOT_FOLDERS.contains(&name.as_str())
                && !here_is_skills
            {
                continue;
            }
            self.walk(&path, depth + 1);
        }
    }
}

/// Whether an entry is a folder, or a link to one; no system call unless it is a link.
fn is_dir(entry: &fs::DirEntry) -> bool {
    match entry.file_type() {
        Ok(kind) if !kind.is_symlink() => kind.is_dir(),
        _ => entry.path().is_dir(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(dir: &Path, name: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: d\n---\n"),
        )
        .unwrap();
    }

    #[test]
    fn skips_and_follows() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        skill(&root.join("a"), "a");
        skill(&root.join(".git/b"), "b");
        skill(&root.join("node_modules/c"), "c");
        skill(&root.join(".hidden/d"), "d");
        skill(&root.join(".claude/skills/e"), "e");
        skill(&root.join("skills/.system/f"), "f");
        skill(&root.join("1/2/3/4/5/g"), "g");
        skill(&root.join("1/2/3/4/5/6/h"), "h");
        skill(&root.join("a/skills/inner"), "inner");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.join("1"), root.join("link")).unwrap();
            std::os::unix::fs::symlink(root, root.join("loop")).unwrap();
        }
        let (found, diags) = scan_root(root);
        let names: Vec<String> = found
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [".claude/skills/e", "1/2/3/4/5/g", "a", "skills/.system/f"]
        );
        assert!(diags.is_empty(), "{diags:?}");
    }

    #[test]
    fn folder_limit_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        for i in 0..(MAX_FOLDERS + 10) {
            fs::create_dir_all(tmp.path().join(format!("d{i:05}"))).unwrap();
        }
        let (_, diags) = scan_root(tmp.path());
        assert_eq!(
            diags.iter().map(|d| d.code).collect::<Vec<_>>(),
            ["root-too-many-folders"]
        );
    }

    #[test]
    fn one_target_loads_once_across_roots() {
        let tmp = tempfile::tempdir().unwrap();
        skill(&tmp.path().join("r1/x"), "x");
        fs::create_dir_all(tmp.path().join("r2")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(tmp.path().join("r1/x"), tmp.path().join("r2/x")).unwrap();
        let roots = [
            Root {
                path: tmp.path().join("r1"),
                scope: Scope::Project,
            },
            Root {
                path: tmp.path().join("r2"),
                scope: Scope::User,
            },
        ];
        let (found, _) = scan(&roots);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].scope, Scope::Project);
    }
}
