//! Staging folders and who holds them: `<state>/staging/<name>/` is claimed by holding
//! `<state>/staging/<name>.lock` locked (an advisory `flock`, released by the kernel when the
//! process ends, however it ends). [`Store::sweep`] removes, under the install lock, every
//! staging folder whose lock nobody holds (one a crashed install left behind) and every Python
//! environment whose completion marker is missing.

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use quiver_package::distribution::python_env::COMPLETE;

use super::Store;
use super::files::remove_tree;
use crate::InstallError;
use crate::error::io;

/// A staging folder this process holds; the folder (if still there) and its lock file are
/// removed when it is dropped.
#[derive(Debug)]
pub(super) struct Claim {
    /// The staging folder.
    pub(super) dir: PathBuf,
    lock_path: PathBuf,
    _lock: fs::File,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.dir.exists() {
            let _ = remove_tree(&self.dir);
        }
        // Removed while still held, so no sweep takes it for an abandoned one in between.
        let _ = fs::remove_file(&self.lock_path);
    }
}

/// How many random names are tried before giving up.
const ATTEMPTS: usize = 16;

impl Store {
    /// A new staging folder, claimed: its lock file is created and locked first, then checked
    /// to be still the one at its path (a sweep may have removed it between the two), and only
    /// then is the folder made.
    pub(super) fn claim(&self) -> Result<Claim, InstallError> {
        let root = self.state.join("staging");
        fs::create_dir_all(&root).map_err(io(&root))?;
        for _ in 0..ATTEMPTS {
            let mut bytes = [0u8; 8];
            getrandom::fill(&mut bytes)
                .map_err(|e| InstallError::Refused(format!("no random source: {e}")))?;
            let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let lock_path = root.join(format!("{name}.lock"));
            let mut lock = match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock_path)
            {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io(&lock_path)(e)),
            };
            lock.lock().map_err(io(&lock_path))?;
            let held = lock.metadata().map_err(io(&lock_path))?;
            let same = fs::metadata(&lock_path)
                .is_ok_and(|now| now.ino() == held.ino() && now.dev() == held.dev());
            if !same {
                continue;
            }
            let _ = writeln!(lock, "{}", std::process::id());
            let dir = root.join(&name);
            if let Err(e) = fs::create_dir(&dir) {
                let _ = fs::remove_file(&lock_path);
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    continue;
                }
                return Err(io(&dir)(e));
            }
            return Ok(Claim {
                dir,
                lock_path,
                _lock: lock,
            });
        }
        Err(InstallError::Refused(format!(
            "no free staging folder in `{}`",
            root.display()
        )))
    }

    /// Removes what a crashed install left: staging folders nobody holds, and environments
    /// never completed. Runs under the install lock, so no environment is being built.
    pub(super) fn sweep(&self) {
        if let Err(e) = self.sweep_staging() {
            tracing::warn!("cleaning the staging folder: {e}");
        }
        let envs = self.state.join("envs");
        for path in entries(&envs) {
            if path.is_dir() && !path.join(COMPLETE).is_file() {
                tracing::info!(env = %path.display(), "removing an unfinished environment");
                if let Err(e) = remove_tree(&path) {
                    tracing::warn!("removing an unfinished environment: {e}");
                }
            }
        }
    }

    fn sweep_staging(&self) -> Result<(), InstallError> {
        let root = self.state.join("staging");
        for path in entries(&root) {
            if path.extension().is_some_and(|e| e == "lock") {
                let Ok(file) = fs::OpenOptions::new().write(true).open(&path) else {
                    continue;
                };
                // Held: a live install's. Free: its owner is gone.
                if file.try_lock().is_ok() {
                    let dir = path.with_extension("");
                    if dir.exists() {
                        remove_tree(&dir)?;
                    }
                    tracing::info!(staging = %dir.display(), "removed an abandoned staging folder");
                    let _ = fs::remove_file(&path);
                }
            } else if path.is_dir() && !path.with_extension("lock").exists() {
                // A folder whose lock is gone: its owner is removing it, or died.
                if let Err(e) = remove_tree(&path)
                    && path.exists()
                {
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

/// The entries of `dir` (none when it cannot be read).
fn entries(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|read| read.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}
