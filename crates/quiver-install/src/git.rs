//! Packages from a git repository at a pinned commit, through the system's `git`: the
//! repository is cloned into a scratch folder and checked out at exactly that commit (a full
//! 40-digit id; a branch or tag is refused, since it can move), then every package folder in it
//! is found: the repository itself when it is one, else each folder holding a `SKILL.md` or a
//! `quiver.yaml` (a repository of plain Agent Skills folders, as `npx skills add` takes, gives
//! one package per skill). Nothing from the repository runs: no hooks, no submodules, no
//! filters.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::InstallError;

/// Deepest folder searched for packages in a repository.
const MAX_DEPTH: usize = 4;

/// Clones `url` into `into` and checks out `commit`.
pub fn checkout(url: &str, commit: &str, into: &Path) -> Result<(), InstallError> {
    let pinned = commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit());
    if !pinned {
        return Err(InstallError::Refused(format!(
            "`{commit}` is not a full commit id; a git source must be pinned to one (40 hex digits)"
        )));
    }
    if url.starts_with('-') || url.starts_with("ext::") {
        return Err(InstallError::Refused(format!("`{url}` is not a git URL")));
    }
    let into_text = into.display().to_string();
    git(
        &["clone", "--quiet", "--no-checkout", "--", url, &into_text],
        None,
    )?;
    git(&["checkout", "--quiet", "--detach", commit], Some(into))?;
    let head = git(&["rev-parse", "HEAD"], Some(into))?;
    if !head.trim().eq_ignore_ascii_case(commit) {
        return Err(InstallError::Refused(format!(
            "the checkout is at `{}`, not `{commit}`",
            head.trim()
        )));
    }
    Ok(())
}

/// Every package folder of a checked-out repository, sorted (see the module documentation).
pub fn package_folders(repo: &Path) -> Vec<PathBuf> {
    if quiver_package::is_package_dir(repo) {
        return vec![repo.to_owned()];
    }
    let mut found = Vec::new();
    walk(repo, 0, &mut found);
    found.sort();
    found
}

fn walk(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in read.flatten() {
        let name = entry.file_name();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_dir || name == ".git" || name == "node_modules" {
            continue;
        }
        let path = entry.path();
        if quiver_package::is_package_dir(&path) {
            found.push(path);
        } else if depth < MAX_DEPTH {
            walk(&path, depth + 1, found);
        }
    }
}

/// Runs `git` with hooks, the credential prompt and system/global configuration off.
fn git(args: &[&str], dir: Option<&Path>) -> Result<String, InstallError> {
    let mut command = Command::new("git");
    if let Some(dir) = dir {
        command.arg("-C").arg(dir);
    }
    command
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "advice.detachedHead=false",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    let out = command
        .output()
        .map_err(|e| InstallError::Refused(format!("cannot run `git`: {e}")))?;
    if !out.status.success() {
        return Err(InstallError::Refused(format!(
            "`git {}` failed: {}",
            args.first().copied().unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
