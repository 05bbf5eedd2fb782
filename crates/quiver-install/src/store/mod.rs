//! The content-addressed store and the installed list, under `<state>`:
//!
//! - `staging/<random>/`: where an archive is unpacked and checked; removed on any refusal;
//!   held by its install through `staging/<random>.lock` (see the `claim` module), so one a crashed
//!   install left is removed by the next store operation under the install lock;
//! - `store/<digest hex>/`: one installed version, read-only: its `MANIFEST.json` and the
//!   package folder `<id>/`; a catalog root of its own ([`Store::roots`]);
//! - `envs/<digest hex>/`: the Python environment of a version with a `requirements.txt`
//!   (see the `env` module), complete once its marker is written;
//! - `installed.json`: each package's current version and the ones before it (for
//!   `rollback`), replaced whole by a rename, only while `install.lock` is held.
//!
//! An install stages, verifies, loads and checks the package first ([`Store::stage_archive`],
//! [`Store::stage_folder`]); [`Store::commit`] then renames the staged folder into the store
//! and rewrites the installed list. A crash at any step leaves the old list (pointing at
//! complete folders) or the new one, never a mix: a folder enters the store by one rename,
//! and the list by another. A package's environment is made before its folder enters the
//! store, so the list never names a version whose environment is unfinished.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use quiver_package::distribution::PackManifest;
use quiver_package::distribution::PackPermissions;
use quiver_package::distribution::permission_diff::{PermissionChange, diff, escalates};
use quiver_package::distribution::signature::still_trusted;
use quiver_package::{Diagnostic, Package};
use serde::{Deserialize, Serialize};

use crate::InstallError;
use crate::error::io;
use crate::trust::TrustStore;

mod claim;
pub mod env;
mod files;
mod staging;

pub(crate) use files::write_atomically;
use files::{make_read_only, remove_tree};

/// One installed version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The package id.
    pub id: String,
    /// Its publisher (`local` for an unsigned folder).
    pub publisher: String,
    /// Its version.
    pub version: semver::Version,
    /// The package digest (of its manifest): its store folder's name.
    pub digest: String,
    /// Where it was installed from.
    pub source: String,
    /// The trusted keys whose signatures let it in.
    pub signed_by: Vec<String>,
    /// Installed from a folder with `--allow-unsigned`.
    pub unsigned: bool,
    /// Its permission ceiling.
    pub permissions: PackPermissions,
}

/// A package's installed versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versions {
    /// The version in use.
    pub current: Record,
    /// Earlier versions, oldest first (`rollback` goes back to the last).
    pub history: Vec<Record>,
}

/// `installed.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    /// By package id.
    pub packages: BTreeMap<String, Versions>,
}

/// A package unpacked, verified, loaded and checked in a staging folder.
#[derive(Debug)]
pub struct Staged {
    /// Its manifest.
    pub manifest: PackManifest,
    /// The loaded package.
    pub package: Package,
    /// Its diagnostics (no errors).
    pub diagnostics: Vec<Diagnostic>,
    /// The record it will be installed as.
    pub record: Record,
    /// The staging folder, held (removed when this is dropped uncommitted).
    claim: claim::Claim,
}

/// A step of [`Store::commit`] after which a test can make it stop, as a crash would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Staged and checked, nothing in the store yet.
    Staged,
    /// The package's Python environment built, its completion marker not yet written.
    Environment,
    /// Renamed into the store, the installed list not yet rewritten.
    Stored,
    /// The installed list rewritten.
    Listed,
}

impl Step {
    /// The step's name, as [`CRASH_AFTER_ENV`] names it.
    pub fn name(self) -> &'static str {
        match self {
            Step::Staged => "staged",
            Step::Environment => "environment",
            Step::Stored => "stored",
            Step::Listed => "listed",
        }
    }
}

/// For tests only: when this environment variable names a [`Step`] (`staged`, `environment`,
/// `stored`, `listed`), [`Store::commit`] ends the process with [`std::process::abort`] right
/// after that step, as a crash or a power cut would, so a test can check a real process's store
/// state. Never set it otherwise.
pub const CRASH_AFTER_ENV: &str = "QUIVER_TEST_CRASH_AFTER";

/// What [`Store::commit`] may do.
#[derive(Debug, Clone, Default)]
pub struct CommitOptions {
    /// Accept permissions the installed version did not have (never implied by `--yes`).
    pub accept_permissions: bool,
    /// Accept a version lower than the installed one.
    pub allow_downgrade: bool,
    /// Install the package's `requirements.txt` from this folder of wheels only, never from
    /// the package index (`pip --no-index --find-links`).
    pub wheels: Option<PathBuf>,
    /// Test hook: stop right after this step, as a crash would.
    pub fail_at: Option<Step>,
}

/// What [`Store::commit`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// A package not installed before.
    New,
    /// A new version, with the permission changes (all of them accepted).
    Updated {
        /// The version replaced.
        from: Box<Record>,
        /// Its permission changes.
        changes: Vec<PermissionChange>,
    },
    /// The same digest was installed already.
    Unchanged,
}

/// Why an update is held back: permissions the installed version did not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the update asks for more than the installed version; the installed version is kept")]
pub struct Escalation {
    /// Every change, additions and removals.
    pub changes: Vec<PermissionChange>,
}

/// The installed packages a catalog loads, and those it must not.
#[derive(Debug, Clone, Default)]
pub struct InstalledRoots {
    /// Each loaded package's store folder (a catalog root) with its record.
    pub roots: Vec<(PathBuf, Record)>,
    /// Packages disabled because every key that signed them is revoked.
    pub disabled: Vec<Record>,
}

/// `<state>/install.lock` held by this process (released when dropped): what every write of
/// the installed list, `trust.json` and `quiver.lock` happens under, so two processes never
/// interleave a read and a write of them. Not reentrant: [`Store::commit`], `rollback` and
/// `uninstall` take it themselves, so it must not be held around them.
#[derive(Debug)]
pub struct StateLock {
    _file: fs::File,
}

/// Quiver's store of installed packages, in a state folder.
#[derive(Debug, Clone)]
pub struct Store {
    state: PathBuf,
}

impl Store {
    /// The store of the state folder `state`.
    pub fn new(state: &Path) -> Store {
        Store {
            state: state.to_owned(),
        }
    }

    /// `<state>/store/<hex>` for the digest `sha256:<hex>`.
    pub fn folder(&self, digest: &str) -> PathBuf {
        self.state
            .join("store")
            .join(digest.trim_start_matches("sha256:"))
    }

    fn installed_path(&self) -> PathBuf {
        self.state.join("installed.json")
    }

    /// The installed list (empty when there is none).
    pub fn installed(&self) -> Result<Installed, InstallError> {
        let path = self.installed_path();
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| InstallError::State {
                path,
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Installed::default()),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// The permission changes installing `staged` would bring, against the version installed.
    pub fn pending_changes(
        &self,
        staged: &Staged,
    ) -> Result<Option<(Record, Vec<PermissionChange>)>, InstallError> {
        let installed = self.installed()?;
        Ok(installed.packages.get(&staged.record.id).map(|v| {
            let changes = diff(&v.current.permissions, &staged.record.permissions);
            (v.current.clone(), changes)
        }))
    }

    /// Puts `staged` into the store and makes it the current version, under the install lock.
    /// An update that adds permissions needs `accept_permissions`; a lower version,
    /// `allow_downgrade`. Either refusal keeps the installed version.
    pub fn commit(
        &self,
        staged: Staged,
        options: &CommitOptions,
    ) -> Result<Committed, InstallError> {
        let _lock = self.lock()?;
        let mut installed = self.installed()?;
        let record = staged.record.clone();
        let previous = installed
            .packages
            .get(&record.id)
            .map(|v| v.current.clone());
        let mut outcome = Committed::New;
        if let Some(old) = &previous {
            if old.digest == record.digest && self.folder(&record.digest).exists() {
                // Its environment is made again if it is unfinished or was removed.
                let folder = self.folder(&record.digest).join(&record.id);
                self.ensure_env(&record.digest, &folder, options)?;
                return Ok(Committed::Unchanged);
            }
            if record.version < old.version && !options.allow_downgrade {
                return Err(InstallError::Refused(format!(
                    "`{}` {} is older than the installed {}; pass `--allow-downgrade` to install it",
                    record.id, record.version, old.version
                )));
            }
            let changes = diff(&old.permissions, &record.permissions);
            if escalates(&changes) && !options.accept_permissions {
                return Err(InstallError::Escalation(Escalation { changes }));
            }
            outcome = Committed::Updated {
                from: Box::new(old.clone()),
                changes,
            };
        }
        stop_at(options, Step::Staged)?;
        let target = self.folder(&record.digest);
        let dir = &staged.claim.dir;
        // The environment first: a refusal here leaves the store and the list as they were.
        let package = if target.exists() { &target } else { dir };
        self.ensure_env(&record.digest, &package.join(&record.id), options)?;
        if target.exists() {
            // The same content is in the store already (an earlier install or a crash after
            // the rename): it is complete, since it entered by one rename.
            remove_tree(dir)?;
        } else {
            make_read_only(dir)?;
            let parent = self.state.join("store");
            fs::create_dir_all(&parent).map_err(io(&parent))?;
            fs::rename(dir, &target).map_err(io(&target))?;
        }
        drop(staged);
        stop_at(options, Step::Stored)?;
        match installed.packages.get_mut(&record.id) {
            Some(versions) => {
                let old = std::mem::replace(&mut versions.current, record);
                versions
                    .history
                    .retain(|r| r.digest != versions.current.digest);
                versions.history.push(old);
            }
            None => {
                installed.packages.insert(
                    record.id.clone(),
                    Versions {
                        current: record,
                        history: Vec::new(),
                    },
                );
            }
        }
        self.write_installed(&installed)?;
        stop_at(options, Step::Listed)?;
        Ok(outcome)
    }

    /// Goes back to the version installed before the current one of `id`.
    pub fn rollback(&self, id: &str) -> Result<Record, InstallError> {
        let _lock = self.lock()?;
        let mut installed = self.installed()?;
        let versions = installed
            .packages
            .get_mut(id)
            .ok_or_else(|| not_installed(id))?;
        let Some(previous) = versions.history.pop() else {
            return Err(InstallError::Refused(format!(
                "`{id}` has no earlier version to go back to"
            )));
        };
        // The version rolled back from leaves the list; its folder stays in the store until
        // `uninstall --purge` collects what no version names.
        versions.current = previous.clone();
        self.write_installed(&installed)?;
        Ok(previous)
    }

    /// Removes `id` from the installed list; with `purge`, its store folders too (and every
    /// other store folder no installed version names, such as one a rollback left behind).
    pub fn uninstall(&self, id: &str, purge: bool) -> Result<Versions, InstallError> {
        let _lock = self.lock()?;
        let mut installed = self.installed()?;
        let versions = installed
            .packages
            .remove(id)
            .ok_or_else(|| not_installed(id))?;
        self.write_installed(&installed)?;
        if purge {
            self.collect_garbage(&installed)?;
        }
        Ok(versions)
    }

    /// The catalog roots of the installed packages (each current version's store folder), and
    /// the records left out because every key that signed them is revoked.
    pub fn roots(&self, trust: &TrustStore) -> Result<InstalledRoots, InstallError> {
        let mut roots = InstalledRoots::default();
        for versions in self.installed()?.packages.into_values() {
            let record = versions.current;
            if record.unsigned || still_trusted(&record.signed_by, &trust.keys) {
                roots.roots.push((self.folder(&record.digest), record));
            } else {
                roots.disabled.push(record);
            }
        }
        Ok(roots)
    }

    /// Removes every store folder and environment that no version of `installed` names. Runs
    /// under the install lock, so no commit is between its rename and its listing.
    fn collect_garbage(&self, installed: &Installed) -> Result<(), InstallError> {
        let digests: Vec<&String> = installed
            .packages
            .values()
            .flat_map(|v| std::iter::once(&v.current).chain(&v.history))
            .map(|r| &r.digest)
            .collect();
        let stores = digests.iter().map(|d| self.folder(d)).collect();
        let envs = digests.iter().map(|d| self.env_folder(d)).collect();
        for (dir, used) in [("store", stores), ("envs", envs)] {
            let used: Vec<PathBuf> = used;
            let dir = self.state.join(dir);
            let Ok(read) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in read {
                let path = entry.map_err(io(&dir))?.path();
                if !used.contains(&path) {
                    remove_tree(&path)?;
                }
            }
        }
        Ok(())
    }

    fn write_installed(&self, installed: &Installed) -> Result<(), InstallError> {
        let bytes = serde_json::to_vec_pretty(installed)
            .map_err(|e| InstallError::Refused(e.to_string()))?;
        write_atomically(&self.installed_path(), &bytes)
    }

    /// Takes `<state>/install.lock` for a write of `trust.json` or `quiver.lock` (read, change
    /// and write it while the lock is held), waiting for another process that holds it.
    pub fn lock_state(&self) -> Result<StateLock, InstallError> {
        Ok(StateLock {
            _file: self.lock()?,
        })
    }

    /// Takes `<state>/install.lock`, waiting for another process that holds it, then removes
    /// what a crashed install left ([`Store::sweep`]).
    fn lock(&self) -> Result<fs::File, InstallError> {
        fs::create_dir_all(&self.state).map_err(io(&self.state))?;
        let path = self.state.join("install.lock");
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        file.lock().map_err(io(&path))?;
        self.sweep();
        Ok(file)
    }
}

fn not_installed(id: &str) -> InstallError {
    InstallError::Refused(format!(
        "`{id}` is not installed; `quiver installed` lists what is"
    ))
}

pub(super) fn stop_at(options: &CommitOptions, step: Step) -> Result<(), InstallError> {
    if std::env::var(CRASH_AFTER_ENV).is_ok_and(|v| v == step.name()) {
        tracing::error!(
            step = step.name(),
            "{CRASH_AFTER_ENV}: stopping dead (test hook)"
        );
        std::process::abort();
    }
    if options.fail_at == Some(step) {
        return Err(InstallError::Refused(format!(
            "stopped after {step:?} (test hook)"
        )));
    }
    Ok(())
}
