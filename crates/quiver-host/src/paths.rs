//! Where things are: the config file, Quiver's state folder, and the package roots of an
//! invocation (`--root`, `QUIVER_PATH`, the config file's `roots:`, and the standard skill
//! folders of the project and the home directory).

use std::path::{Path, PathBuf};

use quiver_catalog::{CatalogOptions, Root, Scope};

use crate::HostError;
use crate::config::Config;

use quiver_package::env::{absolute_path, home};

/// The config file in use, if there is one (`$QUIVER_CONFIG`, else
/// `$XDG_CONFIG_HOME/quiver/config.yaml`, else `~/.config/quiver/config.yaml`, as the agent
/// configuration is found). A variable that is empty or holds a relative path counts as unset
/// (the XDG rule, see [`quiver_package::env`]).
pub fn config_path() -> Option<PathBuf> {
    absolute_path("QUIVER_CONFIG")
        .or_else(|| absolute_path("XDG_CONFIG_HOME").map(|x| x.join("quiver/config.yaml")))
        .or_else(|| home().map(|h| h.join(".config/quiver/config.yaml")))
        .filter(|p| p.is_file())
}

/// Quiver's state folder: `$QUIVER_HOME`, else `$XDG_DATA_HOME/quiver`, else
/// `~/.local/share/quiver`; `None` when none of them is an absolute path (an empty or
/// relative value counts as unset, so the state never lands under the current directory).
pub fn state_dir() -> Option<PathBuf> {
    absolute_path("QUIVER_HOME")
        .or_else(|| absolute_path("XDG_DATA_HOME").map(|xdg| xdg.join("quiver")))
        .or_else(|| home().map(|home| home.join(".local/share/quiver")))
}

/// The state folder, or an error saying which variables to set.
pub fn require_state_dir() -> Result<PathBuf, HostError> {
    state_dir().ok_or(HostError::NoStateDir)
}

/// The state database: `db`, else `state.db` in the state folder.
pub fn state_db(db: Option<&Path>) -> Result<PathBuf, HostError> {
    match db {
        Some(db) => Ok(db.to_owned()),
        None => Ok(require_state_dir()?.join("state.db")),
    }
}

/// The project's skill and package folders, read in each folder [`project_dirs`] yields.
pub const PROJECT_FOLDERS: [&str; 4] = [
    ".agents/skills",
    ".claude/skills",
    ".codex/skills",
    ".quiver/packages",
];

/// The folders whose [`PROJECT_FOLDERS`] are project roots, nearest first: `cwd`, then each
/// parent, as git finds a repository's root: the walk ends at the first folder that
/// `is_repo_root` (one holding `.git`), inclusive, or at the filesystem root. Walking up never
/// reaches the home folder `home` (its skill folders are the user's, read as user scope) nor
/// goes above it.
pub fn project_dirs(
    cwd: &Path,
    home: Option<&Path>,
    is_repo_root: &dyn Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let mut dirs = vec![cwd.to_path_buf()];
    let mut current = cwd;
    while !is_repo_root(current) && Some(current) != home {
        match current.parent() {
            Some(parent) if Some(parent) != home => {
                dirs.push(parent.to_path_buf());
                current = parent;
            }
            _ => break,
        }
    }
    dirs
}

fn parse_scope(text: &str) -> Result<Scope, HostError> {
    match text {
        "project" => Ok(Scope::Project),
        "user" => Ok(Scope::User),
        "installed" => Ok(Scope::Installed),
        other => Err(HostError::Config(format!(
            "unknown scope `{other}`; use `project`, `user` or `installed`"
        ))),
    }
}

/// The roots and catalog options of an invocation: `explicit` (`--root`) alone when given, an
/// error when one of them does not exist; else `QUIVER_PATH`, the config file's `roots:` and
/// `precedence:`, the project's skill folders (in the current folder and each parent up to the
/// repository's root, nearest first: [`project_dirs`]), the home directory's, and the installed
/// packages, only the folders that exist (a named root that does not is warned about).
pub fn resolve_roots(
    explicit: &[PathBuf],
    config: &Config,
) -> Result<(Vec<Root>, CatalogOptions), HostError> {
    let mut options = CatalogOptions::default();
    if let Some(missing) = explicit.iter().find(|p| !p.exists()) {
        return Err(HostError::MissingRoot(missing.clone()));
    }
    if !explicit.is_empty() {
        let roots = explicit
            .iter()
            .map(|p| Root {
                path: p.clone(),
                scope: Scope::Project,
            })
            .collect();
        return Ok((roots, options));
    }
    // Roots a person named (`QUIVER_PATH`, the config file) are said when missing; the
    // standard skill folders below are looked for quietly.
    let mut roots = Vec::new();
    if let Some(paths) = std::env::var_os("QUIVER_PATH") {
        roots.extend(
            std::env::split_paths(&paths)
                .filter(|p| !p.as_os_str().is_empty())
                .map(|path| Root {
                    path,
                    scope: Scope::Project,
                }),
        );
    }
    for root in &config.roots {
        let scope = root
            .scope
            .as_deref()
            .map(parse_scope)
            .transpose()?
            .unwrap_or(Scope::User);
        roots.push(Root {
            path: quiver_package::source::expand_home(&root.path),
            scope,
        });
    }
    for root in &roots {
        if !root.path.exists() {
            tracing::warn!(
                "the root `{}` (from QUIVER_PATH or the config file) does not exist and is skipped",
                root.path.display()
            );
        }
    }
    if let Some(order) = &config.precedence {
        options.precedence = order
            .iter()
            .map(|s| parse_scope(s))
            .collect::<Result<_, _>>()?;
    }
    options.allow_shadow = config
        .allow_shadow
        .iter()
        .map(|id| {
            id.parse().map_err(|e| {
                HostError::Config(format!("`allow_shadow`: `{id}` is no package id: {e}"))
            })
        })
        .collect::<Result<_, _>>()?;
    let cwd = std::env::current_dir().unwrap_or_default();
    let home = home();
    let is_repo_root = |dir: &Path| dir.join(".git").exists();
    for project in project_dirs(&cwd, home.as_deref(), &is_repo_root) {
        for dir in PROJECT_FOLDERS {
            roots.push(Root {
                path: project.join(dir),
                scope: Scope::Project,
            });
        }
    }
    if let Some(home) = home {
        for dir in [".agents/skills", ".claude/skills", ".codex/skills"] {
            roots.push(Root {
                path: home.join(dir),
                scope: Scope::User,
            });
        }
    }
    if let Some(dir) = state_dir() {
        roots.push(Root {
            path: dir.join("packages"),
            scope: Scope::Installed,
        });
        roots.extend(installed_roots(&dir));
    }
    roots.retain(|r| r.path.exists());
    Ok((roots, options))
}

/// The store folders of the packages `quiver install` put in the state folder `state`, one
/// root each; a package signed only by revoked keys is left out with a warning, and so is
/// every installed package when the trust store or the installed list cannot be read.
pub fn installed_roots(state: &Path) -> Vec<Root> {
    let found = quiver_install::trust::TrustStore::load(state)
        .and_then(|trust| quiver_install::store::Store::new(state).roots(&trust));
    let installed = match found {
        Ok(installed) => installed,
        Err(e) => {
            tracing::warn!("the installed packages are not loaded: {e}");
            return Vec::new();
        }
    };
    for record in &installed.disabled {
        tracing::warn!(
            "the installed package `{}` {} is disabled: every key that signed it is revoked",
            record.id,
            record.version
        );
    }
    installed
        .roots
        .into_iter()
        .map(|(path, _)| Root {
            path,
            scope: Scope::Installed,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_folders_are_found_as_git_finds_its_root() {
        let repos = ["/work/repo", "/home/me/code/app", "/srv/wt"];
        let is_repo_root = |dir: &Path| repos.iter().any(|r| dir == Path::new(r));
        let home = Some(Path::new("/home/me"));
        let cases: [(&str, Option<&Path>, &[&str]); 8] = [
            ("/work/repo", home, &["/work/repo"]),
            (
                "/work/repo/a/b",
                home,
                &["/work/repo/a/b", "/work/repo/a", "/work/repo"],
            ),
            (
                "/work/other/x",
                home,
                &["/work/other/x", "/work/other", "/work", "/"],
            ),
            (
                "/home/me/code/app/src",
                home,
                &["/home/me/code/app/src", "/home/me/code/app"],
            ),
            (
                "/home/me/notes/2026",
                home,
                &["/home/me/notes/2026", "/home/me/notes"],
            ),
            ("/home/me", home, &["/home/me"]),
            (
                "/srv/wt/crates/x",
                None,
                &["/srv/wt/crates/x", "/srv/wt/crates", "/srv/wt"],
            ),
            ("/", home, &["/"]),
        ];
        for (cwd, home, want) in cases {
            let got = project_dirs(Path::new(cwd), home, &is_repo_root);
            let want: Vec<PathBuf> = want.iter().map(PathBuf::from).collect();
            assert_eq!(got, want, "{cwd}");
        }
    }
}
