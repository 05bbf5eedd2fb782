//! Where `quiver install` takes its packages from: a `.qpkg`, a package found in an index, a
//! folder, a git repository at a pinned commit, or the sources of a `skills-lock.json`.

use std::path::{Path, PathBuf};

use quiver_install::InstallError;
use quiver_install::lockfile::read_skills_lock;
use quiver_install::store::{Staged, Store};
use quiver_install::trust::TrustStore;

use super::install::InstallArgs;

/// One package to stage: an archive, one found in an index, or a folder with the source to
/// record.
pub(super) enum Source {
    Archive(PathBuf),
    Indexed(Box<quiver_install::index::Resolved>),
    Folder(PathBuf, Option<String>),
}

/// The packages `args.source` names; git repositories are cloned under `scratch`.
pub(super) fn sources(
    args: &InstallArgs,
    scratch: &Path,
    trust: &TrustStore,
    state: &Path,
) -> Result<Vec<Source>, InstallError> {
    let text = args.source.as_str();
    if let Some(index) = &args.index {
        let location = quiver_install::index::IndexLocation::parse(index);
        let resolved = quiver_install::index::resolve(&location, text, trust, state, scratch)?;
        return Ok(vec![Source::Indexed(Box::new(resolved))]);
    }
    if let Some(rest) = text.strip_prefix("git+") {
        let (url, commit) = rest
            .rsplit_once('@')
            .ok_or_else(|| InstallError::Refused("a git source is `git+URL@COMMIT`".to_owned()))?;
        return git_sources(url, commit, &args.skills, scratch, 0);
    }
    let path = PathBuf::from(text);
    if path.is_file() && text.ends_with("skills-lock.json") {
        let bytes = std::fs::read(&path).map_err(|e| InstallError::Io {
            path: path.clone(),
            source: e,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut out = Vec::new();
        for (i, s) in read_skills_lock(&bytes)?.into_iter().enumerate() {
            if s.source_type == "local" {
                out.push(Source::Folder(base.join(&s.source), None));
                continue;
            }
            let commit = s.reference.clone().unwrap_or_default();
            let wanted = vec![s.skill_dir.clone().map_or(s.name.clone(), |d| {
                d.rsplit('/').next().unwrap_or(&d).to_owned()
            })];
            out.extend(git_sources(&s.source, &commit, &wanted, scratch, i + 1)?);
        }
        return Ok(out);
    }
    if path.is_dir() {
        return Ok(vec![Source::Folder(path, None)]);
    }
    Ok(vec![Source::Archive(path)])
}

fn git_sources(
    url: &str,
    commit: &str,
    wanted: &[String],
    scratch: &Path,
    n: usize,
) -> Result<Vec<Source>, InstallError> {
    let repo = scratch.join(format!("repo-{n}"));
    quiver_install::git::checkout(url, commit, &repo)?;
    let mut folders = quiver_install::git::package_folders(&repo);
    if !wanted.is_empty() {
        folders.retain(|f| {
            f.file_name()
                .is_some_and(|n| wanted.iter().any(|w| n == w.as_str()))
        });
        if folders.len() < wanted.len() {
            return Err(InstallError::Refused(format!(
                "`{url}` at {commit} does not hold every package named ({})",
                wanted.join(", ")
            )));
        }
    }
    if folders.is_empty() {
        return Err(InstallError::Refused(format!(
            "`{url}` at {commit} holds no package"
        )));
    }
    let source = format!("git+{url}@{commit}");
    Ok(folders
        .into_iter()
        .map(|f| Source::Folder(f, Some(source.clone())))
        .collect())
}

pub(super) fn stage(
    store: &Store,
    trust: &TrustStore,
    args: &InstallArgs,
    source: &Source,
) -> Result<Staged, InstallError> {
    match source {
        Source::Folder(dir, recorded) => {
            if !args.allow_unsigned {
                return Err(InstallError::Refused(format!(
                    "`{}` is a folder or a git source: nothing vouches for it; pass `--allow-unsigned` to install it unsigned, or install a signed `.qpkg`",
                    recorded
                        .as_deref()
                        .map_or_else(|| dir.display().to_string(), str::to_owned)
                )));
            }
            store.stage_folder(dir, recorded.as_deref())
        }
        Source::Archive(path) => store.stage_archive(path, trust),
        Source::Indexed(resolved) => quiver_install::index::stage(store, resolved, trust),
    }
}
