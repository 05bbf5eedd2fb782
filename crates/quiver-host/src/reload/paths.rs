//! Which changed paths matter, and which packages they touch. Pure: paths in, paths out.
//!
//! Editors save through files no package reads: vim's swap files (`.x.swp`, `.swo`, `.swx`),
//! its write probe `4913` and backups (`x~`), Emacs's lock and autosave files (`.#x`, `#x#`),
//! and the `*.tmp` many tools write before renaming over the real file. A change to those alone
//! reloads nothing; a rename-save still reloads, since its target is the real file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Whether `path` names an editor's or a tool's temporary file.
pub fn is_editor_temp(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let lower = name.to_ascii_lowercase();
    name == "4913"
        || name.ends_with('~')
        || name.starts_with(".#")
        || (name.len() > 1 && name.starts_with('#') && name.ends_with('#'))
        || [".swp", ".swo", ".swx", ".tmp"]
            .iter()
            .any(|ext| lower.ends_with(ext))
}

/// The changed paths that may change a package: not an editor's temporary file.
pub fn relevant(changed: &[PathBuf]) -> Vec<PathBuf> {
    changed
        .iter()
        .filter(|p| !is_editor_temp(p))
        .cloned()
        .collect()
}

/// The known package folders (`packages`) that `changed` paths lie in, or that lie under a
/// changed path (a folder renamed or removed whole).
pub fn touched(packages: &BTreeSet<PathBuf>, changed: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for path in changed {
        // The package holding `path`: its nearest ancestor that is a package folder.
        if let Some(dir) = path.ancestors().find(|a| packages.contains(*a)) {
            out.insert(dir.to_owned());
        }
        // Packages under `path` (a parent folder renamed or deleted).
        out.extend(
            packages
                .range(path.clone()..)
                .take_while(|p| p.starts_with(path))
                .cloned(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editor_temp_files_are_recognised() {
        let cases = [
            ("/p/weather/.SKILL.md.swp", true),
            ("/p/weather/.SKILL.md.swx", true),
            ("/p/weather/.SKILL.md.swo", true),
            ("/p/weather/4913", true),
            ("/p/weather/SKILL.md~", true),
            ("/p/weather/.#SKILL.md", true),
            ("/p/weather/#SKILL.md#", true),
            ("/p/weather/SKILL.md.tmp", true),
            ("/p/weather/SKILL.md.TMP", true),
            ("/p/weather/SKILL.md", false),
            ("/p/weather/quiver.yaml", false),
            ("/p/weather/tools/get.yaml", false),
            ("/p/weather/49130", false),
            ("/p/weather/#", false),
            ("/p/weather", false),
        ];
        for (path, want) in cases {
            assert_eq!(is_editor_temp(Path::new(path)), want, "{path}");
        }
    }

    #[test]
    fn a_batch_of_temp_files_alone_is_irrelevant_and_a_rename_save_is_not() {
        let only_temp: Vec<PathBuf> = ["/p/a/.SKILL.md.swp", "/p/a/4913", "/p/a/SKILL.md~"]
            .map(PathBuf::from)
            .into();
        assert!(relevant(&only_temp).is_empty());
        // A rename-save: the temp file and its target come in one event.
        let rename: Vec<PathBuf> = ["/p/a/SKILL.md.tmp", "/p/a/SKILL.md"]
            .map(PathBuf::from)
            .into();
        assert_eq!(relevant(&rename), [PathBuf::from("/p/a/SKILL.md")]);
    }

    #[test]
    fn changed_paths_touch_the_packages_they_lie_in_or_contain() {
        let packages: BTreeSet<PathBuf> = ["/p/a", "/p/ab", "/p/group/c", "/p/group/d", "/u/e"]
            .map(PathBuf::from)
            .into();
        let cases: [(&[&str], &[&str]); 8] = [
            (&["/p/a/SKILL.md"], &["/p/a"]),
            (&["/p/a/tools/deep/x.yaml"], &["/p/a"]),
            // `/p/ab` is not inside `/p/a`.
            (&["/p/ab/SKILL.md"], &["/p/ab"]),
            // The package folder itself (deleted, renamed away).
            (&["/p/a"], &["/p/a"]),
            // A parent folder: every package under it.
            (&["/p/group"], &["/p/group/c", "/p/group/d"]),
            // A new folder no package knows: nothing known is touched (the scan finds it).
            (&["/p/new/SKILL.md"], &[]),
            (&["/p/a/x", "/u/e/y", "/p/a/z"], &["/p/a", "/u/e"]),
            (&[], &[]),
        ];
        for (changed, want) in cases {
            let changed: Vec<PathBuf> = changed.iter().map(PathBuf::from).collect();
            let want: BTreeSet<PathBuf> = want.iter().map(PathBuf::from).collect();
            assert_eq!(touched(&packages, &changed), want, "{changed:?}");
        }
    }
}
