//! The files of a skill: every regular file inside its folder, as people write skill folders
//! (Anthropic's `mcp-builder/reference/*.md`, a root-level `forms.md` or `reference.md` next
//! to `SKILL.md`), not only `references/`, `assets/` and `scripts/`.
//!
//! What is left out, by [`part_of_skill`]: hidden entries (`.git`, `.env`, `.venv`) and
//! Quiver's own state files ([`is_state_file`]: `state.db`, `mcp-secret`) at any level, the
//! `SKILL.md` itself, build litter (`__pycache__`, `node_modules`), the `tools/`
//! folder (tool definitions, loaded as tools), and, for a skill whose folder is the package
//! folder, what the package format defines besides the skill (`quiver.yaml`, `skill/`,
//! `skills/`, `agents/`, `workflows/`, `prompts/`, `pages/`, `docs/`, `AGENTS.md`,
//! `requirements.txt`): further skills, agents and prompt sections have visibility rules of
//! their own that reading them as files would bypass. A link directly inside the skill folder is
//! listed only when it stays inside the package; links deeper down are not followed; at most
//! [`MAX_SKILL_FILES`] files, [`MAX_SKILL_FILE_DEPTH`] folder levels deep. Listing reads names
//! and types only, never a file's content.

use std::fs;
use std::path::Path;

use crate::source::PackageDir;

/// Most files listed under one skill.
pub const MAX_SKILL_FILES: usize = 1000;
/// Deepest folder level listed under a skill.
pub const MAX_SKILL_FILE_DEPTH: usize = 6;

/// Names never listed at any level: build and package-manager litter.
const LITTER: [&str; 2] = ["__pycache__", "node_modules"];

/// Names directly in a package folder that the package format defines as something other
/// than the package's own skill. Its further skills, agents, workflows and prompt sections have
/// visibility rules of their own, which reading them as files would bypass.
const PACKAGE_ENTRIES: [&str; 10] = [
    "quiver.yaml",
    "skill",
    "skills",
    "agents",
    "workflows",
    "prompts",
    "pages",
    "docs",
    "AGENTS.md",
    "requirements.txt",
];

/// Suffixes of a state database and its companions (`state.db`, `state.db-wal`, ...).
const STATE_SUFFIXES: [&str; 5] = [".db", ".db-wal", ".db-shm", ".db-journal", ".db.engines"];

/// Whether `name` is one of Quiver's own state files, never a skill file wherever it lies (a
/// state folder or `--db` inside a skill folder): a state database (`*.db`) with its `-wal`,
/// `-shm`, `-journal` and `.engines` companions, the MCP front's secret and its owner token
/// (the files `quiver_host::state_files` names, which a test there checks against this).
pub fn is_state_file(name: &str) -> bool {
    matches!(name, "mcp-secret" | "mcp-token") || STATE_SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// Whether the entry `name`, directly inside a skill's folder, belongs to the skill.
/// `package_root`: the skill's folder is the package folder (a package's own `SKILL.md`).
pub fn part_of_skill(name: &str, package_root: bool) -> bool {
    !(name.starts_with('.')
        || is_state_file(name)
        || name == "SKILL.md"
        || name == "tools"
        || LITTER.contains(&name)
        || (package_root && PACKAGE_ENTRIES.contains(&name)))
}

/// Whether `name`, an entry below the top level of a skill folder, is listed.
fn listed_below(name: &str) -> bool {
    !name.starts_with('.') && !LITTER.contains(&name) && !is_state_file(name)
}

/// Every file of the skill whose folder is `dir`, relative to it and sorted (see the module
/// documentation for what is left out). `package` is the package folder, which no listed
/// file leaves.
pub fn list(package: &PackageDir, dir: &Path) -> Vec<String> {
    let package_root = dir == package.path();
    let mut out = Vec::new();
    let Ok(read) = fs::read_dir(dir) else {
        return out;
    };
    let mut entries: Vec<_> = read.flatten().collect();
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !part_of_skill(&name, package_root) || out.len() >= MAX_SKILL_FILES {
            continue;
        }
        let path = entry.path();
        let Ok(mut kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            // Followed only when it stays inside the package.
            if package.holds(&path) != Some(true) {
                continue;
            }
            let Ok(meta) = fs::metadata(&path) else {
                continue;
            };
            kind = meta.file_type();
        }
        if kind.is_dir() {
            walk(&path, &name, 1, &mut out);
        } else if kind.is_file() {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// Appends the regular files under `dir` (named `rel` relative to the skill folder) to `out`,
/// without following links, at most [`MAX_SKILL_FILE_DEPTH`] levels down and
/// [`MAX_SKILL_FILES`] in all.
pub(crate) fn walk(dir: &Path, rel: &str, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_SKILL_FILE_DEPTH || out.len() >= MAX_SKILL_FILES {
        return;
    }
    let Ok(read) = fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = read.flatten().collect();
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        if !listed_below(&name) {
            continue;
        }
        let rel = format!("{rel}/{name}");
        if kind.is_dir() {
            walk(&entry.path(), &rel, depth + 1, out);
        } else if kind.is_file() && out.len() < MAX_SKILL_FILES {
            out.push(rel);
        }
    }
}

/// The paths among `paths` (`/`-separated, relative to a folder) that `walk` of that folder
/// would list, in its order: no component hidden, litter or a state file, at most
/// [`MAX_SKILL_FILE_DEPTH`] folders deep, at most [`MAX_SKILL_FILES`] in all. For a package
/// held in memory (an archive being verified), so it is checked exactly as its folder would be.
pub fn select<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut listed: Vec<&str> = paths
        .into_iter()
        .filter(|path| {
            let parts: Vec<&str> = path.split('/').collect();
            parts.len() <= MAX_SKILL_FILE_DEPTH + 1 && parts.iter().all(|p| listed_below(p))
        })
        .collect();
    // `walk` visits each folder's entries sorted by name, depth first: component order.
    listed.sort_by(|a, b| a.split('/').cmp(b.split('/')));
    listed.truncate(MAX_SKILL_FILES);
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_belongs_to_a_skill() {
        // (entry, in a package's root folder, in a skill's own folder)
        let cases = [
            ("references", true, true),
            ("reference", true, true),
            ("forms.md", true, true),
            ("reference.md", true, true),
            ("LICENSE.txt", true, true),
            ("docs", false, true),
            ("AGENTS.md", false, true),
            ("requirements.txt", false, true),
            ("templates", true, true),
            ("SKILL.md", false, false),
            (".git", false, false),
            (".env", false, false),
            (".venv", false, false),
            ("__pycache__", false, false),
            ("state.db", false, false),
            ("state.db-wal", false, false),
            ("mcp-secret", false, false),
            ("mcp-token", false, false),
            ("schema.sql", true, true),
            ("node_modules", false, false),
            ("tools", false, false),
            ("quiver.yaml", false, true),
            ("skills", false, true),
            ("agents", false, true),
            ("workflows", false, true),
            ("prompts", false, true),
            ("pages", false, true),
            ("skill", false, true),
        ];
        for (name, at_root, in_own_folder) in cases {
            assert_eq!(part_of_skill(name, true), at_root, "{name} at the root");
            assert_eq!(
                part_of_skill(name, false),
                in_own_folder,
                "{name} in a skill folder"
            );
        }
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn select_lists_what_walk_lists() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = vec![
            "a.md".to_owned(),
            "a/b.md".to_owned(),
            "a-b/c.md".to_owned(),
            ".hidden/x.md".to_owned(),
            "ok/.env".to_owned(),
            "node_modules/x.js".to_owned(),
            "x/__pycache__/y.pyc".to_owned(),
            "s/state.db".to_owned(),
            "1/2/3/4/5/6/7.md".to_owned(),
            "1/2/3/4/5/6/7/8.md".to_owned(),
            "Z.md".to_owned(),
        ];
        for i in 0..MAX_SKILL_FILES + 5 {
            paths.push(format!("many/{i:05}.md"));
        }
        for path in &paths {
            let file = dir.path().join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, "x").unwrap();
        }
        let mut walked = Vec::new();
        walk(dir.path(), "", 0, &mut walked);
        let walked: Vec<&str> = walked.iter().map(|p| p.trim_start_matches('/')).collect();
        assert_eq!(select(paths.iter().map(String::as_str)), walked);
    }
}
